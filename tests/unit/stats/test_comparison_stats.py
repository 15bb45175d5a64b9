"""Comparison statistics against scipy, and the logistic fit on data with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.stats.estimates import (
    expected_wilson_width,
    fisher_exact,
    mcnemar_exact,
    minimum_detectable_effect,
    newcombe_paired,
    newcombe_unpaired,
    trials_needed,
)
from harness.stats.logistic import fit_logistic


@settings(max_examples=60, deadline=None)
@given(b=st.integers(0, 40), c=st.integers(0, 40))
def test_mcnemar_matches_scipy_binomial_test(b, c) -> None:
    expected = 1.0 if b + c == 0 else sps.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(n1=st.integers(1, 60), n2=st.integers(1, 60), data=st.data())
def test_fisher_matches_scipy(n1, n2, data) -> None:
    k1 = data.draw(st.integers(0, n1))
    k2 = data.draw(st.integers(0, n2))
    expected = sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
    assert fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_newcombe_intervals_match_published_examples() -> None:
    # Newcombe (1998) unpaired example: 56/70 vs 48/80 -> difference 0.2, 95% CI 0.0524 to 0.3339
    low, high = newcombe_unpaired(56, 70, 48, 80)
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=5e-4)


def test_newcombe_paired_interval_covers_and_uses_the_pairing() -> None:
    rng = np.random.default_rng(7)
    # two policies on the same 50 trials; B succeeds whenever A does, plus sometimes otherwise
    n, pa, extra = 50, 0.6, 0.5
    true_diff = pa - (pa + (1 - pa) * extra)
    covered = 0
    for _ in range(2000):
        a_ok = rng.uniform(size=n) < pa
        b_ok = a_ok | (rng.uniform(size=n) < extra)
        a, b = int(np.sum(a_ok & b_ok)), int(np.sum(a_ok & ~b_ok))
        c, d = int(np.sum(~a_ok & b_ok)), int(np.sum(~a_ok & ~b_ok))
        low, high = newcombe_paired(a, b, c, d)
        covered += low <= true_diff <= high
    assert covered / 2000 >= 0.93
    paired = newcombe_paired(25, 0, 10, 15)
    unpaired = newcombe_unpaired(25, 50, 35, 50)
    assert paired[0] <= -0.2 <= paired[1]
    assert paired[1] - paired[0] < unpaired[1] - unpaired[0]


def test_sample_size_and_detectable_effect_agree() -> None:
    n = trials_needed(0.5, 0.2)
    assert n == 93  # two proportions 0.5 vs 0.7, alpha 0.05, power 0.8
    assert minimum_detectable_effect(0.5, n) == pytest.approx(0.2, abs=0.005)
    assert trials_needed(0.9, -0.2) < trials_needed(0.9, -0.1)
    assert expected_wilson_width(0.9, 50) == pytest.approx(0.19, abs=0.02)


def test_logistic_fit_recovers_a_known_falloff() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 6, size=400)
    p = 1 / (1 + np.exp(-(3.0 - 1.5 * x)))
    y = (rng.uniform(size=400) < p).astype(int)
    fit = fit_logistic(list(x), list(y))
    assert fit is not None
    assert fit.intercept == pytest.approx(3.0, abs=0.6) and fit.slope == pytest.approx(-1.5, abs=0.3)
    assert fit.distance_at(0.5) == pytest.approx(2.0, abs=0.3)
    prob, low, high = fit.predict(np.array([0.0, 2.0, 5.0]))
    assert np.all(low <= prob) and np.all(prob <= high)
    assert fit_logistic([1.0, 2.0], [1, 0]) is None and fit_logistic([1.0, 2.0, 3.0], [1, 1, 1]) is None


def test_logistic_fit_stays_finite_on_perfect_separation() -> None:
    fit = fit_logistic([0.5, 1.0, 1.5, 4.0, 5.0, 5.5], [1, 1, 1, 0, 0, 0])
    assert fit is not None and np.isfinite(fit.slope) and fit.slope < 0


def test_mean_interval_is_students_t() -> None:
    from harness.stats.estimates import mean_interval

    values = [0.4, 1.1, 0.7, 2.0, 0.9]
    mean, low, high = mean_interval(values)
    expected = sps.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=sps.sem(values))
    assert mean == pytest.approx(np.mean(values)) and (low, high) == pytest.approx(expected)
    assert mean_interval([1.5]) == (1.5, None, None) and mean_interval([]) is None
