"""An anytime-valid test for paired bounded outcomes, by betting: which of two policies scores higher.

A comparison whose primary outcome is graded (`harness.models.graded`: progress, time to success) gains one pair
per block, each arm's score on [0, 1] at the same start position; ``D = x_first - x_second`` lies in [-1, 1].

Null hypothesis, in words: averaged over the protocol's start positions, the two policies score the same
(``E[D] = 0``). Each block's start position is drawn at random from the protocol's list (issue 57), so given
everything before it a block's D has the position-averaged mean: zero under the null, whatever the policies do at
any one position. Not assumed: equal scores at every position, independence of the arms, any distribution.

* "First better" bets on D being positive: for a bet ``0 <= lambda < 1``, ``prod (1 + lambda D_i)`` has factors
  with mean 1 under the null, all positive, so it is a nonnegative martingale with mean 1 (a test martingale;
  Shafer, "Testing by betting", JRSS A 2021); so is ``K_first``, its average over the bets below. Ville's
  inequality gives ``P(ever K_first >= 2 K / alpha) <= alpha / (2 K)``, looked at after every pair, with no cap and
  no calibration. ``K_second`` bets on D being negative. Two-sided error over K declared comparisons: at most
  alpha (Bonferroni).
* The bet is a uniform mixture over fixed fractions (`DEFAULT_BETS`, 0.02 to 0.75): ``K_first`` is the average
  of ``prod (1 + lambda_j D_i)`` over the grid, itself a test martingale (an average of test martingales), whose log
  is within log(8) of the best constant bet in hindsight, whatever the data: the mixture method (Robbins 1970) in
  Waudby-Smith and Ramdas's discrete form ("Estimating means of bounded random variables by betting", JRSS B
  2024, section 5.4). It needs no prior and no tuning, and vectorises over 10,000 simulated comparisons. aGRAPA
  (their section 5.1: a plug-in Kelly bet ``mu / (sigma^2 + mu^2)``, truncated) was tried first: on six synthetic
  settings chosen before the benchmark (binary 0.6 against 0.4, progress 0.2 apart and 1.3 apart, a time
  difference, two nulls) the mixture used fewer pairs at the moderate differences and under the nulls (93 against
  101, 74 against 79, 64 against 75) with more power (0.76 against 0.69 on the binary pair), and a few more at the
  large difference (20 against 17). ONS (online Newton step) was not tried. The largest bet keeps one adverse pair
  from losing more than 3/4 of that part of the wealth.
* Futility ("no difference of the declared size"): ``W_first = prod (1 + lambda (d - D_i))``, mixed over the same
  bets, bets against "first better by d" (``E[D] >= d``), under which it is a nonnegative supermartingale; direction
  first closes for good once ``W_first >= 1 / (1 - power)``, likewise second with D negated. Both closed: the
  running (power-level) confidence sequence for E[D] excludes both +d and -d. When the better arm leads by d,
  futility is declared with probability at most 1 - power.

Validity needs only what the schedule gives (a fresh draw of the start position per block, the arms' order
drawn inside it) and bounded scores; the cap ends a run without a decision, and ignoring the cap or futility
never inflates the error (Ville holds for ever).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.stats.sequential import ComparisonState, ComparisonTrace, Decision

# The mixture's bets, fixed before the benchmark (module docstring); locked with a graded comparison.
DEFAULT_BETS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.75)


@dataclass(frozen=True)
class BettingDesign:
    """The pre-registered numbers of a graded comparison's test (identical for every declared pair)."""

    alpha: float
    power: float
    min_difference: float   # on the score's [0, 1] scale
    comparisons: int
    cap: int
    bets: tuple[float, ...] = DEFAULT_BETS

    @property
    def log_efficacy_bound(self) -> float:
        """Ville's bound per direction per comparison: log(2 K / alpha)."""
        return math.log(2 * self.comparisons / self.alpha)

    @property
    def log_futility_bound(self) -> float:
        return math.log(1 / (1 - self.power))


def _mixture(per_bet: Any) -> Any:
    """log of the mean wealth over the bets (the last axis)."""
    top = np.max(per_bet, axis=-1)
    return top + np.log(np.mean(np.exp(per_bet - top[..., None]), axis=-1))


@dataclass(frozen=True)
class BettingState:
    """Where a comparison (or, with arrays, many simulated ones) stands: each bet's log wealth in each of the four
    games (last axis: the bets), the pairs and who scored higher, which directions are closed and the decision
    code (`CODES`)."""

    pairs: Any
    first_ahead: Any          # pairs where the first arm scored higher
    second_ahead: Any
    sum_d: Any
    for_first: Any            # per bet: log wealth on "first better"
    for_second: Any
    against_first: Any        # per bet: log wealth against "first better by d"
    against_second: Any
    closed_first: Any
    closed_second: Any
    code: Any                 # CONTINUE, FIRST, SECOND, FUTILE, CAPPED

    def mean(self) -> Any:
        return self.sum_d / np.maximum(self.pairs, 1)

    @property
    def log_for_first(self) -> Any:
        """log K_first: the mixture's evidence that the first is better."""
        return _mixture(self.for_first)

    @property
    def log_for_second(self) -> Any:
        return _mixture(self.for_second)

    @property
    def log_against_first(self) -> Any:
        """log W_first: the evidence against "first better by d"."""
        return _mixture(self.against_first)

    @property
    def log_against_second(self) -> Any:
        return _mixture(self.against_second)


CONTINUE, FIRST, SECOND, FUTILE, CAPPED = 0, 1, 2, 3, 4
CODES = {CONTINUE: Decision.CONTINUE, FIRST: Decision.FIRST_BETTER, SECOND: Decision.SECOND_BETTER,
         FUTILE: Decision.FUTILITY, CAPPED: Decision.CAP}


def start(design: BettingDesign, shape: tuple[int, ...] = ()) -> BettingState:
    counts = np.zeros(shape, dtype=int)
    wealth = np.zeros((*shape, len(design.bets)))
    no = np.zeros(shape, dtype=bool)
    return BettingState(counts, counts, counts, np.zeros(shape), wealth, wealth, wealth, wealth, no, no, counts)


def step(design: BettingDesign, state: BettingState, first: Any, second: Any) -> BettingState:
    """The state after one more pair (each arm's score on [0, 1]); a comparison already decided stays as it is.
    Works alike on scalars (a sheet's replay) and on arrays (the benchmark's simulations)."""
    live = state.code == CONTINUE
    d = np.clip(np.asarray(first, dtype=float), 0, 1) - np.clip(np.asarray(second, dtype=float), 0, 1)
    bets, md, x = np.asarray(design.bets), design.min_difference, d[..., None]
    for_first = state.for_first + np.log1p(bets * x)
    for_second = state.for_second + np.log1p(-bets * x)
    against_first = state.against_first + np.log1p(bets * (md - x))
    against_second = state.against_second + np.log1p(bets * (md + x))
    pairs = state.pairs + 1
    efficacy = design.log_efficacy_bound - 1e-12
    first_wins = ~state.closed_first & (_mixture(for_first) >= efficacy)
    second_wins = ~first_wins & ~state.closed_second & (_mixture(for_second) >= efficacy)
    closed_first = state.closed_first | (_mixture(against_first) >= design.log_futility_bound)
    closed_second = state.closed_second | (_mixture(against_second) >= design.log_futility_bound)
    code = np.select([first_wins, second_wins, closed_first & closed_second, pairs >= design.cap],
                     [FIRST, SECOND, FUTILE, CAPPED], default=CONTINUE)

    def keep(new: Any, old: Any) -> Any:
        return np.where(live[..., None] if np.ndim(new) > np.ndim(live) else live, new, old)

    return BettingState(keep(pairs, state.pairs), keep(state.first_ahead + (d > 0), state.first_ahead),
                        keep(state.second_ahead + (d < 0), state.second_ahead), keep(state.sum_d + d, state.sum_d),
                        keep(for_first, state.for_first), keep(for_second, state.for_second),
                        keep(against_first, state.against_first), keep(against_second, state.against_second),
                        keep(closed_first, state.closed_first), keep(closed_second, state.closed_second),
                        keep(code, state.code))


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
    state = start(design)
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
    state = start(design, first.shape[:1])
    for i in range(min(design.cap, first.shape[1])):
        state = step(design, state, first[:, i], second[:, i])
        if not (state.code == CONTINUE).any():
            break
    return np.asarray(state.code), np.asarray(state.pairs)
