"""The paired betting test for graded outcomes (issue 58, `harness.stats.betting`): under the average-over-
positions null its wealth is a nonnegative martingale (mean 1 at every pair) and its type I error stays at most
alpha, on settings it was not tuned on; it finds a graded difference; a sheet's replay is the simulation's."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats import betting
from harness.stats.betting import BettingDesign
from harness.stats.sequential import Decision

ALPHA = 0.05


def _null_pairs(rng: np.random.Generator, count: int, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Progress scores (0-4, scaled) of two arms that score the same *on average over eight start positions* but
    not at any one: A strong on one side of the workspace, B on the other; each block's position drawn at random
    (the schedule of issue 57), the arms correlated through it."""
    positions = 8
    side = np.linspace(-1, 1, positions)
    level_a = np.clip(2.0 + 1.5 * side, 0, 4)          # A's typical progress at each position
    level_b = np.clip(2.0 - 1.5 * side, 0, 4)          # B's: the mirror image, the same average
    where = rng.integers(0, positions, size=(count, pairs))
    noise = rng.integers(-1, 2, size=(2, count, pairs))
    first = np.clip(np.rint(level_a[where]) + noise[0], 0, 4) / 4
    second = np.clip(np.rint(level_b[where]) + noise[1], 0, 4) / 4
    return first, second


def test_under_the_average_over_positions_null_the_wealth_is_a_nonnegative_martingale_and_errs_at_most_alpha() -> None:
    rng = np.random.default_rng(20261207)
    count, pairs = 4000, 150
    first, second = _null_pairs(rng, count, pairs)
    assert abs((first - second).mean()) < 0.01   # the null holds on average, not per position
    design = BettingDesign(ALPHA, 0.8, 0.25, 1, pairs)
    state = betting.start(design, (count,))
    wealth_means = []
    errors = np.zeros(count, dtype=bool)
    for i in range(pairs):
        # the wealth with no stopping at all: what Ville's inequality bounds
        state = betting.step(BettingDesign(ALPHA, 0.8, 0.25, 1, 10 ** 9), state, first[:, i], second[:, i])
        wealth = np.exp(state.log_for_first)
        assert (wealth > 0).all()
        wealth_means.append(wealth.mean())
        bound = design.log_efficacy_bound
        errors |= (state.log_for_first >= bound) | (state.log_for_second >= bound)
    se = np.std(np.exp(state.log_for_first)) / np.sqrt(count)
    assert wealth_means[-1] <= 1 + 4 * se            # mean 1 under the null (a martingale), within MC error
    rate = errors.mean()                              # "ever crossed", however often looked at
    assert rate <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / count)
    code, used = betting.simulate(design, first, second)
    wrong = np.isin(code, [betting.FIRST, betting.SECOND]).mean()
    assert wrong <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / count)
    assert (used <= pairs).all()


def test_a_binary_null_with_negatively_dependent_arms_keeps_the_error() -> None:
    """Success only, one arm succeeding exactly where the other fails half the time: the most discordant null."""
    rng = np.random.default_rng(58)
    count, pairs = 4000, 200
    first = (rng.random((count, pairs)) < 0.5).astype(float)
    second = np.where(rng.random((count, pairs)) < 0.5, 1 - first, (rng.random((count, pairs)) < 0.5))
    code, _ = betting.simulate(BettingDesign(ALPHA, 0.8, 0.2, 1, pairs), first, second.astype(float))
    assert np.isin(code, [betting.FIRST, betting.SECOND]).mean() <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / count)


def test_a_policy_that_gets_further_is_found_and_equal_policies_stop_for_futility() -> None:
    rng = np.random.default_rng(7)
    count, pairs = 2000, 176
    better = rng.choice(5, size=(count, pairs), p=[0.2, 0.1, 0.1, 0.1, 0.5]) / 4   # mean progress 2.6 of 4
    worse = rng.choice(5, size=(count, pairs), p=[0.4, 0.1, 0.1, 0.1, 0.3]) / 4    # 1.8 of 4: 0.2 apart
    design = BettingDesign(ALPHA, 0.8, 0.2, 1, pairs)
    code, used = betting.simulate(design, worse, better)
    assert (code == betting.SECOND).mean() >= 0.8
    assert (code == betting.FIRST).mean() == 0
    same = rng.choice(5, size=(2, count, pairs), p=[0.3, 0.1, 0.1, 0.1, 0.4]) / 4
    code, used = betting.simulate(design, same[0], same[1])
    assert (code == betting.FUTILE).mean() >= 0.8
    assert np.median(used) < pairs / 2


def test_a_sheets_replay_pair_by_pair_is_the_vectorised_simulation() -> None:
    rng = np.random.default_rng(3)
    first, second = rng.integers(0, 5, size=(2, 40, 60)) / 4
    design = BettingDesign(ALPHA, 0.8, 0.3, 1, 60)
    code, used = betting.simulate(design, first, second)
    for k in range(40):
        states = betting.replay(design, list(zip(first[k], second[k], strict=True)))
        assert len(states) == used[k]
        assert betting.decision(states[-1]) is betting.CODES[int(code[k])]
    assert betting.CODES[betting.FUTILE] is Decision.FUTILITY


@pytest.mark.parametrize("bad", [-0.5, 1.7])
def test_scores_outside_zero_to_one_are_clipped_so_no_factor_turns_negative(bad: float) -> None:
    design = BettingDesign(ALPHA, 0.8, 0.2, 1, 10)
    state = betting.step(design, betting.start(design), bad, 1 - bad)
    assert np.isfinite(state.log_for_first) and np.isfinite(state.log_for_second)
