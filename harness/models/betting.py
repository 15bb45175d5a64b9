"""An anytime-valid test for paired bounded outcomes, by betting: which of two policies scores higher.

A comparison whose primary outcome is graded (`harness.models.graded`: progress, time to success) gains one pair
per block, each arm's score on [0, 1] at the same start position; ``D = x_first - x_second`` lies in [-1, 1].

Null hypothesis, in words: averaged over the protocol's start positions, the two policies score the same
(``E[D] = 0``). Each block's start position is drawn at random from the protocol's list (issue 57), so given
everything before it a block's D has the position-averaged mean: zero under the null, whatever the policies do at
any one position. Not assumed: equal scores at every position, independence of the arms, any distribution.

* "First better" bets on D being positive: ``K_first = prod (1 + lambda_i D_i)`` with ``0 <= lambda_i <= c``
  chosen from the pairs before i. Each factor has mean 1 under the null and is positive (``c < 1``), so
  ``K_first`` is a nonnegative martingale with mean 1 (a test martingale; Shafer, "Testing by betting",
  JRSS A 2021) and Ville's inequality gives ``P(ever K_first >= 2 K / alpha) <= alpha / (2 K)``, looked at after
  every pair, with no cap and no calibration. ``K_second`` bets on D being negative. Two-sided error over K
  declared comparisons: at most alpha (Bonferroni).
* The bet is aGRAPA (Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting", JRSS B
  2024, section 5.1): ``lambda = mu / (sigma^2 + mu^2)`` of the running mean and variance of D (a pseudo pair
  with D = 0 and variance 1/4 before the first), truncated to [0, c]. It is the first-order Kelly bet for the
  alternative the data point to, so it bets big when D is steady (progress differences of a few quarter points
  at low variance) and small when it is noisy, in closed form and vectorisable over 10,000 simulated
  comparisons. ONS (online Newton step) has a regret guarantee aGRAPA lacks, but starts slower on the short
  runs a real arm affords; either keeps the type I error, which rests on the predictability of the bet alone.
  ``c`` (`max_bet`, locked) keeps one adverse pair from losing more than that share of the wealth.
* Futility ("no difference of the declared size"): ``W_first = prod (1 + lambda_i (d - D_i))`` bets against
  "first better by d" (``E[D] >= d``), under which it is a nonnegative supermartingale; direction first closes
  for good once ``W_first >= 1 / (1 - power)``, likewise second with D negated. Both closed: the running
  (power-level) confidence sequence for E[D] excludes both +d and -d. When the better arm leads by d, futility
  is declared with probability at most 1 - power.

Validity needs only what the schedule gives (a fresh draw of the start position per block, the arms' order
drawn inside it) and bounded scores; the cap ends a run without a decision, and ignoring the cap or futility
never inflates the error (Ville holds for ever).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.models.comparison import ComparisonTrace
from harness.models.sequential import ComparisonState, Decision

PRIOR_VARIANCE = 0.25   # the pseudo pair's variance: a bet starts moderate, neither all-in nor asleep
DEFAULT_MAX_BET = 0.75  # Waudby-Smith and Ramdas use 1/2 or 3/4; 3/4 on synthetic settings, not the benchmark


@dataclass(frozen=True)
class BettingDesign:
    """The pre-registered numbers of a graded comparison's test (identical for every declared pair)."""

    alpha: float
    power: float
    min_difference: float   # on the score's [0, 1] scale
    comparisons: int
    cap: int
    max_bet: float = DEFAULT_MAX_BET

    @property
    def log_efficacy_bound(self) -> float:
        """Ville's bound per direction per comparison: log(2 K / alpha)."""
        return math.log(2 * self.comparisons / self.alpha)

    @property
    def log_futility_bound(self) -> float:
        return math.log(1 / (1 - self.power))


@dataclass(frozen=True)
class BettingState:
    """Where a comparison (or, with arrays, many simulated ones) stands: the running sums the bets are drawn
    from, the four log wealths, which directions are closed and the decision code (`CODES`)."""

    pairs: Any
    first_ahead: Any          # pairs where the first arm scored higher
    second_ahead: Any
    sum_d: Any
    sum_sq: Any               # sum of (D_i - running mean before i)^2, the variance estimate's numerator
    log_for_first: Any        # log K_first: evidence that the first is better
    log_for_second: Any
    log_against_first: Any    # log W_first: evidence against "first better by d"
    log_against_second: Any
    closed_first: Any
    closed_second: Any
    code: Any                 # CONTINUE, FIRST, SECOND, FUTILE, CAPPED

    def mean(self) -> Any:
        return self.sum_d / np.maximum(self.pairs, 1)


CONTINUE, FIRST, SECOND, FUTILE, CAPPED = 0, 1, 2, 3, 4
CODES = {CONTINUE: Decision.CONTINUE, FIRST: Decision.FIRST_BETTER, SECOND: Decision.SECOND_BETTER,
         FUTILE: Decision.FUTILITY, CAPPED: Decision.CAP}


def start(shape: tuple[int, ...] = ()) -> BettingState:
    zeros = np.zeros(shape)
    no = np.zeros(shape, dtype=bool)
    return BettingState(np.zeros(shape, dtype=int), np.zeros(shape, dtype=int), np.zeros(shape, dtype=int), zeros,
                        zeros, zeros, zeros, zeros, zeros, no, no, np.zeros(shape, dtype=int))


def _agrapa(edge: Any, variance: Any, cap: float) -> Any:
    """aGRAPA's bet for an expected gain `edge` per unit stake: edge / (variance + edge^2), in [0, cap]."""
    return np.clip(edge / (variance + edge * edge), 0.0, cap)


def step(design: BettingDesign, state: BettingState, first: Any, second: Any) -> BettingState:
    """The state after one more pair (each arm's score on [0, 1]); a comparison already decided stays as it is.
    Works alike on scalars (a sheet's replay) and on arrays (the benchmark's simulations)."""
    live = state.code == CONTINUE
    d = np.clip(np.asarray(first, dtype=float), 0, 1) - np.clip(np.asarray(second, dtype=float), 0, 1)
    n = state.pairs
    mean = state.sum_d / (n + 1)                         # the pseudo pair (D = 0) counted once
    variance = (PRIOR_VARIANCE + state.sum_sq) / (n + 1)
    c, md = design.max_bet, design.min_difference
    log_for_first = state.log_for_first + np.log1p(_agrapa(mean, variance, c) * d)
    log_for_second = state.log_for_second + np.log1p(-_agrapa(-mean, variance, c) * d)
    log_against_first = state.log_against_first + np.log1p(_agrapa(md - mean, variance, c) * (md - d))
    log_against_second = state.log_against_second + np.log1p(_agrapa(md + mean, variance, c) * (md + d))
    pairs = n + 1
    first_wins = ~state.closed_first & (log_for_first >= design.log_efficacy_bound - 1e-12)
    second_wins = ~first_wins & ~state.closed_second & (log_for_second >= design.log_efficacy_bound - 1e-12)
    closed_first = state.closed_first | (log_against_first >= design.log_futility_bound)
    closed_second = state.closed_second | (log_against_second >= design.log_futility_bound)
    code = np.select([first_wins, second_wins, closed_first & closed_second, pairs >= design.cap],
                     [FIRST, SECOND, FUTILE, CAPPED], default=CONTINUE)

    def keep(new: Any, old: Any) -> Any:
        return np.where(live, new, old)

    return BettingState(keep(pairs, n), keep(state.first_ahead + (d > 0), state.first_ahead),
                        keep(state.second_ahead + (d < 0), state.second_ahead), keep(state.sum_d + d, state.sum_d),
                        keep(state.sum_sq + (d - mean) ** 2, state.sum_sq), keep(log_for_first, state.log_for_first),
                        keep(log_for_second, state.log_for_second), keep(log_against_first, state.log_against_first),
                        keep(log_against_second, state.log_against_second), keep(closed_first, state.closed_first),
                        keep(closed_second, state.closed_second), keep(code, state.code))


def decision(state: BettingState) -> Decision:
    return CODES[int(state.code)]


def as_comparison_state(state: BettingState) -> ComparisonState:
    """The counts and decision in the form a binary comparison's replay gives (first_only/second_only: the pairs
    where that arm scored higher), so the schedule, the stop and the decision's words are shared."""
    return ComparisonState(int(state.pairs), int(state.first_ahead), int(state.second_ahead),
                           bool(state.closed_first), bool(state.closed_second), decision(state))


def replay(design: BettingDesign, scores: list[tuple[float, float]]) -> list[BettingState]:
    """One comparison's state after each pair (stops at its decision: later blocks do not change it)."""
    states: list[BettingState] = []
    state = start()
    for first, second in scores:
        if state.code != CONTINUE:
            break
        state = step(design, state, first, second)
        states.append(state)
    return states


def replay_comparisons(design: BettingDesign, comparisons: tuple[tuple[str, str], ...],
                       block_scores: list[dict[str, float]]) -> list[ComparisonTrace]:
    """Each declared comparison's states after each complete block (`block_scores[b][code]`: that arm's score in
    block b), as `harness.models.comparison.replay` gives them for success, so stopping and words are shared."""
    traces = []
    for first, second in comparisons:
        states = replay(design, [(scores[first], scores[second]) for scores in block_scores])
        traces.append(ComparisonTrace(first, second, tuple(as_comparison_state(state) for state in states)))
    return traces


def simulate(design: BettingDesign, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Many comparisons at once (`first`, `second`: scores, shape (comparisons, >= cap pairs)).
    Returns (decision code per comparison, pairs used)."""
    state = start(first.shape[:1])
    for i in range(min(design.cap, first.shape[1])):
        state = step(design, state, first[:, i], second[:, i])
        if not (state.code == CONTINUE).any():
            break
    return np.asarray(state.code), np.asarray(state.pairs)
