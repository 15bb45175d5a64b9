"""Success against distance: a two-parameter logistic fit with a 95% band.

A weak ridge penalty keeps the fit finite when the data separate perfectly (every
near trial succeeds, every far one fails), which small robot runs often do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RIDGE = 0.01


@dataclass(frozen=True)
class LogisticFit:
    intercept: float
    slope: float
    covariance: np.ndarray
    n: int

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Probability and its 95% band (delta method on the logit scale) at each x."""
        design = np.column_stack([np.ones_like(x), x])
        eta = design @ np.array([self.intercept, self.slope])
        se = np.sqrt(np.einsum("ij,jk,ik->i", design, self.covariance, design))
        def expit(v: np.ndarray) -> np.ndarray:
            return 1 / (1 + np.exp(-v))

        return expit(eta), expit(eta - 1.96 * se), expit(eta + 1.96 * se)

    def distance_at(self, probability: float) -> float | None:
        """Where the fitted success probability crosses `probability` (None when it never does)."""
        if self.slope == 0:
            return None
        x = (math.log(probability / (1 - probability)) - self.intercept) / self.slope
        return x if x >= 0 else None


def fit_logistic(x: list[float], y: list[int], iterations: int = 100) -> LogisticFit | None:
    """Penalised maximum likelihood by Newton's method; None with fewer than 3 points or one class."""
    if len(x) < 3 or len(set(y)) < 2:
        return None
    design = np.column_stack([np.ones(len(x)), np.asarray(x, dtype=float)])
    target = np.asarray(y, dtype=float)
    beta = np.zeros(2)
    hessian = np.eye(2)
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(design @ beta)))
        gradient = design.T @ (target - p) - RIDGE * beta
        weights = p * (1 - p)
        hessian = design.T @ (design * weights[:, None]) + RIDGE * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-9:
            break
    return LogisticFit(float(beta[0]), float(beta[1]), np.linalg.inv(hessian), len(x))
