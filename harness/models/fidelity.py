"""How well a simulated twin predicts the real arm: pure statistics over paired labels and success rates.

Per attempt (one real sheet against its twin): the confusion of labels (success and each failure mode),
agreement with a Wilson interval, Cohen's kappa (agreement beyond what the two marginals give by chance),
and the failure modes the twin misses (real has it, the twin said something else) or invents (the other way).

Across sheets (checkpoints or policies, each with a real and a twin success rate): Pearson's r and SimplerEnv's
Mean Maximum Rank Violation (Li et al. 2024, `simpler_env.utils.metrics.mean_maximum_rank_violation`): for each
policy i, the largest real success-rate gap |real_i - real_j| over the policies j the twin orders differently
from the real arm ((twin_i > twin_j) != (real_i > real_j)); the mean of those over i. 0 is a perfect ranking;
it weighs a swap by how far apart the real rates were, so swapping two near-equal policies costs little.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.models.taxonomy import Label
from harness.stats.estimates import wilson_interval

# The labels a scored attempt can carry, in the order tables show them.
SCORED_LABELS: tuple[Label, ...] = tuple(label for label in Label if label is not Label.VOID)


@dataclass(frozen=True)
class PairedAttempt:
    """One real attempt and its twin's, by the real trial they both ran."""

    trial_index: int
    real: Label
    twin: Label

    @property
    def agree(self) -> bool:
        return self.real is self.twin

    @property
    def outcome_agrees(self) -> bool:
        """Success against failure, whatever the failure mode."""
        return (self.real is Label.SUCCESS) == (self.twin is Label.SUCCESS)


@dataclass(frozen=True)
class ModeShift:
    """A failure mode the twin got wrong: `missed` real attempts had it and the twin said otherwise;
    `invented` twin attempts had it where the real one did not."""

    label: Label
    real: int
    twin: int
    missed: int
    invented: int


@dataclass(frozen=True)
class Agreement:
    """k of n with its 95 % Wilson interval."""

    agreed: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.agreed / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.agreed, self.n)


@dataclass(frozen=True)
class Fidelity:
    """Everything the report says about one real sheet against its twin."""

    pairs: tuple[PairedAttempt, ...]
    labels: Agreement            # same label (success, or the same failure mode)
    outcomes: Agreement          # same outcome (success or failure)
    kappa: float | None          # Cohen's kappa over labels; None when chance agreement is total (one label only)
    outcome_kappa: float | None
    confusion: dict[Label, dict[Label, int]]   # real label -> twin label -> attempts
    modes: tuple[ModeShift, ...]

    @property
    def disagreements(self) -> tuple[PairedAttempt, ...]:
        return tuple(pair for pair in self.pairs if not pair.agree)


def cohen_kappa(pairs: Sequence[tuple[object, object]]) -> float | None:
    """(p_o - p_e) / (1 - p_e), p_e from each rater's own marginals. None when p_e is 1 (both raters used one and
    the same category throughout): kappa is then undefined, and agreement alone says all there is."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    categories = {a for a, _ in pairs} | {b for _, b in pairs}
    expected = sum((sum(1 for a, _ in pairs if a == c) / n) * (sum(1 for _, b in pairs if b == c) / n)
                   for c in categories)
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1.0 - expected)


def fidelity(pairs: Sequence[PairedAttempt]) -> Fidelity:
    """The per-attempt comparison; voids never pair (each side's trial ends in one scored attempt)."""
    if any(pair.real is Label.VOID or pair.twin is Label.VOID for pair in pairs):
        raise ValueError("a void is not a scored attempt: pair each trial's scored attempts")
    confusion = {real: {twin: 0 for twin in SCORED_LABELS} for real in SCORED_LABELS}
    for pair in pairs:
        confusion[pair.real][pair.twin] += 1
    modes = []
    for label in SCORED_LABELS:
        if not label.is_failure:
            continue
        real = sum(1 for p in pairs if p.real is label)
        twin = sum(1 for p in pairs if p.twin is label)
        missed = sum(1 for p in pairs if p.real is label and p.twin is not label)
        invented = sum(1 for p in pairs if p.twin is label and p.real is not label)
        modes.append(ModeShift(label, real, twin, missed, invented))
    return Fidelity(
        pairs=tuple(pairs),
        labels=Agreement(sum(1 for p in pairs if p.agree), len(pairs)),
        outcomes=Agreement(sum(1 for p in pairs if p.outcome_agrees), len(pairs)),
        kappa=cohen_kappa([(p.real, p.twin) for p in pairs]),
        outcome_kappa=cohen_kappa([(p.real is Label.SUCCESS, p.twin is Label.SUCCESS) for p in pairs]),
        confusion=confusion,
        modes=tuple(modes),
    )


def pearson_r(real: Sequence[float], twin: Sequence[float]) -> float | None:
    """Pearson's correlation of twin against real success rates; None with fewer than two sheets or when either
    side has no spread (every rate equal: the correlation is undefined, not 1 or 0)."""
    if len(real) != len(twin):
        raise ValueError("real and twin rates must pair up")
    n = len(real)
    if n < 2:
        return None
    mr, mt = sum(real) / n, sum(twin) / n
    sr = sum((r - mr) ** 2 for r in real)
    st = sum((t - mt) ** 2 for t in twin)
    if sr == 0 or st == 0:
        return None
    return sum((r - mr) * (t - mt) for r, t in zip(real, twin, strict=True)) / math.sqrt(sr * st)


def rank_violations(real: Sequence[float], twin: Sequence[float]) -> list[float]:
    """Per policy, the largest real gap to a policy the twin orders differently (0: none)."""
    if len(real) != len(twin):
        raise ValueError("real and twin rates must pair up")
    worst = []
    for i in range(len(real)):
        gaps = [abs(real[i] - real[j]) for j in range(len(real))
                if (twin[i] > twin[j]) != (real[i] > real[j])]
        worst.append(max(gaps, default=0.0))
    return worst


def mmrv(real: Sequence[float], twin: Sequence[float]) -> float | None:
    """Mean Maximum Rank Violation (module docstring); None with fewer than two sheets."""
    if len(real) < 2:
        return None
    violations = rank_violations(real, twin)
    return sum(violations) / len(violations)


def same_ranking(real: Sequence[float], twin: Sequence[float]) -> bool:
    """Whether the twin orders every pair as the real arm does (ties included): MMRV's violation set is empty."""
    return all((twin[i] > twin[j]) == (real[i] > real[j]) for i in range(len(real)) for j in range(len(real)))
