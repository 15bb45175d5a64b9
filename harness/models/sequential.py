"""An anytime-valid sequential test for paired binary outcomes: which of two policies succeeds more.

Each block runs every arm once at the same start position, so a comparison of two arms gains one
*pair* per block: (A succeeded, B succeeded). Concordant pairs say nothing about which is better;
among the discordant ones, theta = P(only A succeeded | exactly one did) is 1/2 whenever the two
arms succeed equally often at every start position, whatever that rate is (McNemar's argument).

The test is a two-sided sequential probability ratio test on the discordant pairs (Wald 1945),
with its boundaries set by exact calculation and Ville's inequality instead of Wald's approximations:
its statistic is a test *martingale*, looked at after every block without inflating the error
(Ramdas, Gruenwald, Vovk and Shafer, "Game-theoretic statistics and safe anytime-valid inference",
Statistical Science 2023, section 3; a point-alternative relative of the mixture SPRT of Johari,
Koomen, Pekelis and Walsh, "Always valid inference", Operations Research 2022):

* ``e_A = prod (2 theta1)^x (2 (1 - theta1))^(1 - x)`` over discordant pairs (x = 1 when only A
  succeeded) is a non-negative martingale with mean 1 when theta = 1/2, so
  ``P(sup e_A >= 2 K / alpha) <= alpha / (2 K)``; likewise ``e_B`` with theta1 and 1 - theta1
  swapped. "A better" when ``e_A`` crosses the efficacy bound, "B better" when ``e_B`` does. The
  bound is calibrated to the cap (:func:`design`): the lowest whose two-sided error, looked at after
  every pair up to the cap, is at most alpha / K even if every pair were discordant; never above
  Ville's, which holds with no cap. At most alpha over K declared comparisons (Bonferroni).
* Futility ("no difference of that size") uses every pair, concordant ones too (`FutilityRule.PAIRED_BETTING`,
  testing by betting: Shafer, "Testing by betting", JRSS A 2021; Waudby-Smith and Ramdas, "Estimating means of
  bounded random variables by betting", JRSS B 2024). With D = (A succeeded) - (B succeeded) in {-1, 0, 1},
  "A better by d" says E[D] >= d, so ``W_A = prod (1 + lambda (d - D))`` (0 <= lambda < 1 / (1 - d)) has
  expectation at most 1 at every pair: a test supermartingale *against* "A better by d", and
  ``P(sup W_A >= 1 / gamma) <= gamma`` under it (Ville). A concordant pair (D = 0) multiplies W_A by 1 + lambda d:
  two arms that mostly agree, both succeeding or both failing, soon show that their difference is not d,
  which a test on discordant pairs alone cannot see (it waits for the rare disagreements). Direction A closes
  when ``W_A >= 1 / gamma`` (likewise W_B with D negated); both closed: futility. When the better arm really
  leads by the declared difference, futility is wrongly declared with probability at most gamma.
  lambda is fixed at the lock (so the state is the counts, and the exact walk below stays exact): the
  Kelly bet against the null with the most discordant pairs independent trials allow (both arms at 1/2,
  D = +-1 with probability 1/4 each), the slowest null for this bet to close (`kelly_bet`).
  Sheets locked before this rule existed keep theirs (`FutilityRule.DISCORDANT_SPRT`: ``1 / e_A``, a
  martingale when theta = theta1, closes direction A at ``e_A <= gamma``), as their lock says.
* theta1 is the discordant-pair odds the declared difference gives at the least favourable success
  rates (1/2 - d/2 against 1/2 + d/2, independent trials): any other rates with the same difference,
  or outcomes correlated through the start position, make theta larger and the test faster.

The cap (pairs per comparison) and the power are exact: :func:`operating_characteristics` walks the
distribution of (A-only, B-only) counts pair by pair (no simulation), so a lock can refuse a cap
that cannot reach the declared power and name the smallest one that does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, StrEnum
from statistics import NormalDist
from typing import Any

import numpy as np

# The futility bound gamma is this share of the allowed miss rate (1 - power); the rest is left to
# the cap. Chosen on the least favourable setting (see docs/comparisons.md), not on the benchmark's.
FUTILITY_SHARE_OF_BETA = 1.0
# No cap beyond this many pairs is searched: far more than a real arm can run.
MAX_PAIRS_SEARCHED = 2_000
MAX_COMPARISONS = 45  # ten arms, every pair


class FutilityRule(StrEnum):
    """Which statistic closes a direction for futility (module docstring); the lock records it."""

    DISCORDANT_SPRT = "discordant-sprt"   # 1 / e on discordant pairs only (sheets locked before paired-betting)
    PAIRED_BETTING = "paired-betting"     # betting on every pair's difference, concordant pairs included


class Decision(Enum):
    """Where a comparison stands after a block."""

    CONTINUE = "continue"
    FIRST_BETTER = "first better"
    SECOND_BETTER = "second better"
    FUTILITY = "no difference of that size"
    CAP = "cap reached without a decision"

    @property
    def final(self) -> bool:
        return self is not Decision.CONTINUE


@dataclass(frozen=True)
class SequentialDesign:
    """The pre-registered numbers of one comparison's test (identical for every declared pair).

    Build it with :func:`design`, which calibrates the efficacy bound to the cap; the locked block
    stores every field, so a resumed run uses the very same numbers.
    """

    alpha: float
    power: float
    min_difference: float
    comparisons: int
    cap: int  # pairs per comparison: the trials per arm at most
    log_efficacy_bound: float
    futility: FutilityRule = FutilityRule.PAIRED_BETTING
    futility_bet: float | None = None   # lambda of PAIRED_BETTING; None: `kelly_bet(min_difference)`

    @property
    def bet(self) -> float:
        return self.futility_bet if self.futility_bet is not None else kelly_bet(self.min_difference)

    @property
    def theta1(self) -> float:
        """P(only the better arm succeeded | exactly one did) at the least favourable rates."""
        high, low = least_favourable(self.min_difference)
        return high * high / (high * high + low * low)

    @property
    def log_step_up(self) -> float:
        """log e gained by a discordant pair that favours the direction tested."""
        return math.log(2 * self.theta1)

    @property
    def log_step_down(self) -> float:
        """log e lost by a discordant pair against it."""
        return math.log(2 * (1 - self.theta1))

    @property
    def log_ville_bound(self) -> float:
        """Ville's bound for each direction of each declared comparison, valid for ever: 2 K / alpha."""
        return math.log(2 * self.comparisons / self.alpha)

    @property
    def log_futility_bound(self) -> float:
        return math.log(FUTILITY_SHARE_OF_BETA * (1 - self.power))

    def log_e(self, first_only: Any, second_only: Any) -> tuple[Any, Any]:   # ints or arrays alike
        """(log e_first, log e_second) after these discordant counts."""
        up, down = self.log_step_up, self.log_step_down
        return first_only * up + second_only * down, second_only * up + first_only * down

    def log_against(self, pairs: Any, first_only: Any, second_only: Any) -> tuple[Any, Any]:   # ints or arrays
        """(log evidence against "first better by the difference", against "second better by it") after these
        counts; a direction closes once its evidence reaches ``-log_futility_bound`` (module docstring)."""
        if self.futility is FutilityRule.DISCORDANT_SPRT:
            log_first, log_second = self.log_e(first_only, second_only)
            return -log_first, -log_second
        d, bet = self.min_difference, self.bet
        for_first, against_first, agree = math.log1p(bet * (d - 1)), math.log1p(bet * (d + 1)), math.log1p(bet * d)
        concordant = pairs - first_only - second_only
        return (first_only * for_first + second_only * against_first + concordant * agree,
                second_only * for_first + first_only * against_first + concordant * agree)

    def closes(self, pairs: Any, first_only: Any, second_only: Any) -> tuple[Any, Any]:
        """Whether each direction's futility evidence has reached its bound at these counts."""
        against_first, against_second = self.log_against(pairs, first_only, second_only)
        return (_at_or_above(against_first, -self.log_futility_bound),
                _at_or_above(against_second, -self.log_futility_bound))

    def fixed_sample_pairs(self) -> int:
        """Pairs per arm McNemar's fixed-sample test needs at the same alpha (per comparison, two-sided),
        power and least favourable rates (Connor 1987, Biometrics 43:207)."""
        return mcnemar_fixed_pairs(self.alpha / self.comparisons, self.power, *least_favourable(self.min_difference))


def check_design_inputs(alpha: float, power: float, min_difference: float, comparisons: int) -> None:
    for name, value in (("alpha", alpha), ("power", power), ("min_difference", min_difference)):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or not 0 < value < 1:
            raise ValueError(f"{name}: {value!r} must be a number strictly between 0 and 1")
    if alpha > 0.5 or power < 0.5:
        raise ValueError(f"alpha {alpha} and power {power}: alpha must be at most 0.5 and power at least 0.5")
    if not 1 <= comparisons <= MAX_COMPARISONS:
        raise ValueError(f"comparisons: {comparisons} must be 1..{MAX_COMPARISONS}")


def kelly_bet(min_difference: float) -> float:
    """The betting fraction lambda that grows ``W = prod (1 + lambda (d - D))`` fastest (in expected log) when both
    arms succeed half the time independently: D = -1, 0, 1 with probabilities 1/4, 1/2, 1/4, the null with the
    most discordant pairs, on which a bet that learns from agreement is slowest. Concave in lambda: bisection on
    the derivative, inside [0, 1 / (1 - d)) where every factor stays positive."""
    d = min_difference

    def slope(bet: float) -> float:
        return d / (2 * (1 + bet * d)) + (d - 1) / (4 * (1 + bet * (d - 1))) + (d + 1) / (4 * (1 + bet * (d + 1)))

    low, high = 0.0, (1 - 1e-9) / (1 - d)
    for _ in range(60):
        middle = (low + high) / 2
        if slope(middle) > 0:
            low = middle
        else:
            high = middle
    return low


def design(alpha: float, power: float, min_difference: float, comparisons: int, cap: int,
           futility: FutilityRule = FutilityRule.PAIRED_BETTING) -> SequentialDesign:
    """The test for this cap: the lowest efficacy bound whose error, looked at after every pair up to
    the cap, is at most alpha / K even if every pair were discordant (the most steps the walk can take;
    fewer discordant pairs only lower it). Never above Ville's bound, which holds with no cap at all.
    """
    check_design_inputs(alpha, power, min_difference, comparisons)
    if not 1 <= cap <= MAX_PAIRS_SEARCHED:
        raise ValueError(f"cap: {cap} pairs must be 1..{MAX_PAIRS_SEARCHED}")
    bet = kelly_bet(min_difference) if futility is FutilityRule.PAIRED_BETTING else None
    ville = SequentialDesign(alpha, power, min_difference, comparisons, cap, 0.0, futility, bet).log_ville_bound
    low, high = 0.0, ville
    for _ in range(25):   # to 1e-7 of Ville's log bound: far finer than the lattice of log e values
        middle = (low + high) / 2
        candidate = SequentialDesign(alpha, power, min_difference, comparisons, cap, middle, futility, bet)
        if worst_case_type_one_error(candidate) <= alpha / comparisons:
            high = middle
        else:
            low = middle
    return SequentialDesign(alpha, power, min_difference, comparisons, cap, high, futility, bet)


def worst_case_type_one_error(design: SequentialDesign) -> float:
    """P(either direction declared better) when the arms are equal and every pair is discordant.

    The worst case for either futility rule: a concordant pair moves neither e-value and only adds evidence
    against a difference (paired betting), closing directions sooner, and it takes a pair of the cap that a
    discordant one could have used. With s + f = n the state is one-dimensional: mass[closed_first,
    closed_second, s].
    """
    size = design.cap + 1
    mass: np.ndarray = np.zeros((2, 2, size))
    mass[0, 0, 0] = 1.0
    s = np.arange(size)
    error = 0.0
    for n in range(1, design.cap + 1):
        moved = mass * 0.5
        moved[:, :, 1:] += mass[:, :, :-1] * 0.5
        mass = moved
        log_first, log_second = design.log_e(s, n - s)
        valid = s <= n
        up_first = valid & _at_or_above(log_first, design.log_efficacy_bound)
        up_second = valid & _at_or_above(log_second, design.log_efficacy_bound)
        error += mass[0][:, up_first].sum()
        mass[0][:, up_first] = 0.0
        error += mass[:, 0][:, up_second].sum()
        mass[:, 0][:, up_second] = 0.0
        low_first, low_second = design.closes(n, s, n - s)
        closing_first = mass[0] * (valid & low_first)
        mass[0] -= closing_first
        mass[1] += closing_first
        closing_second = mass[:, 0] * (valid & low_second)
        mass[:, 0] -= closing_second
        mass[:, 1] += closing_second
        mass[1, 1] = 0.0
    return float(error)


@dataclass(frozen=True)
class ComparisonState:
    """One declared comparison after some blocks: its counts, which directions are closed
    (a direction closes for good when its e-value falls to the futility bound), and its decision."""

    pairs: int = 0
    first_only: int = 0
    second_only: int = 0
    closed_first: bool = False
    closed_second: bool = False
    decision: Decision = Decision.CONTINUE

    def log_e(self, design: SequentialDesign) -> tuple[float, float]:
        return design.log_e(self.first_only, self.second_only)

    def log_against(self, design: SequentialDesign) -> tuple[float, float]:
        """Each direction's futility evidence (`SequentialDesign.log_against`)."""
        return design.log_against(self.pairs, self.first_only, self.second_only)


def advance(design: SequentialDesign, state: ComparisonState, first: bool, second: bool, cap: int) -> ComparisonState:
    """The state after one more pair (both arms' outcomes at one start position)."""
    if state.decision.final:
        raise ValueError("this comparison has already stopped")
    pairs = state.pairs + 1
    first_only = state.first_only + (first and not second)
    second_only = state.second_only + (second and not first)
    log_first, log_second = design.log_e(first_only, second_only)
    decision = Decision.CONTINUE
    if not state.closed_first and _at_or_above(log_first, design.log_efficacy_bound):
        decision = Decision.FIRST_BETTER
    elif not state.closed_second and _at_or_above(log_second, design.log_efficacy_bound):
        decision = Decision.SECOND_BETTER
    low_first, low_second = design.closes(pairs, first_only, second_only)
    closed_first = state.closed_first or bool(low_first)
    closed_second = state.closed_second or bool(low_second)
    if decision is Decision.CONTINUE and closed_first and closed_second:
        decision = Decision.FUTILITY
    if decision is Decision.CONTINUE and pairs >= cap:
        decision = Decision.CAP
    return ComparisonState(pairs, first_only, second_only, closed_first, closed_second, decision)


def least_favourable(min_difference: float) -> tuple[float, float]:
    """The success rates with the given difference whose pairs carry the least information."""
    return 0.5 + min_difference / 2, 0.5 - min_difference / 2


def discordance(p_first: float, p_second: float) -> tuple[float, float]:
    """(P(only first), P(only second)) for independent trials."""
    return p_first * (1 - p_second), p_second * (1 - p_first)


def mcnemar_fixed_pairs(alpha: float, power: float, p_first: float, p_second: float) -> int:
    """Connor's sample size for McNemar's test (two-sided alpha) with independent trials."""
    only_first, only_second = discordance(p_first, p_second)
    psi, delta = only_first + only_second, abs(only_first - only_second)
    if delta == 0:
        raise ValueError("the rates are equal: no fixed sample detects a zero difference")
    z_alpha = NormalDist().inv_cdf(1 - alpha / 2)
    z_beta = NormalDist().inv_cdf(power)
    return math.ceil((z_alpha * math.sqrt(psi) + z_beta * math.sqrt(psi - delta * delta)) ** 2 / (delta * delta))


@dataclass(frozen=True)
class OperatingCharacteristics:
    """Exact probabilities of each ending and the expected pairs used, given the true rates."""

    first_better: float
    second_better: float
    futility: float
    cap: float
    expected_pairs: float
    # cumulative P(first better by pair n), n = 1..cap: the power curve that sizes the cap
    first_better_by: np.ndarray


def operating_characteristics(
    design: SequentialDesign, only_first: float, only_second: float, cap: int, until_first: float | None = None
) -> OperatingCharacteristics:
    """Walk the distribution of the test's state pair by pair, absorbing what reaches a decision.

    State: mass[closed_first, closed_second, s, f] = P(still running, each direction closed or not,
    s pairs where only the first succeeded, f where only the second did); after n pairs only s, f <= n
    can hold mass, so step n works on that corner. O(cap^3) with numpy: a cap of 300 takes about a
    second. `until_first`: stop once P(first better) reaches it (what sizing a cap needs; the other
    figures are then partial).
    """
    concordant = 1.0 - only_first - only_second
    size = cap + 1
    mass = np.zeros((2, 2, size, size))
    mass[0, 0, 0, 0] = 1.0
    s_idx, f_idx = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    log_first, log_second = design.log_e(s_idx, f_idx)
    up_first = _at_or_above(log_first, design.log_efficacy_bound)
    up_second = _at_or_above(log_second, design.log_efficacy_bound)
    first = second = futile = expected = 0.0
    first_by = np.zeros(cap)
    for n in range(1, cap + 1):
        k = n + 1
        live = mass[:, :, :k, :k]
        expected += live.sum()  # every comparison still running uses pair n
        moved = live * concordant
        moved[:, :, 1:, :] += live[:, :, :-1, :] * only_first
        moved[:, :, :, 1:] += live[:, :, :, :-1] * only_second
        live[...] = moved
        # an open direction crossing its efficacy bound decides (the first checked first, as `advance` does)
        hit = up_first[:k, :k]
        first += live[0][:, hit].sum()
        live[0][:, hit] = 0.0
        hit = up_second[:k, :k]
        second += live[:, 0][:, hit].sum()
        live[:, 0][:, hit] = 0.0
        # directions close at their futility bound; both closed: futility
        low_first, low_second = design.closes(n, s_idx[:k, :k], f_idx[:k, :k])
        closing_first = live[0] * low_first
        live[0] -= closing_first
        live[1] += closing_first
        closing_second = live[:, 0] * low_second
        live[:, 0] -= closing_second
        live[:, 1] += closing_second
        futile += live[1, 1].sum()
        live[1, 1] = 0.0
        first_by[n - 1] = first
        if until_first is not None and first >= until_first:
            first_by[n:] = first
            break
    return OperatingCharacteristics(first, second, futile, float(mass.sum()), expected, first_by)


def _at_or_above(values: np.ndarray, bound: float) -> np.ndarray:
    """values >= bound, forgiving float noise: a boundary landed on exactly counts as crossed."""
    return values >= bound - 1e-9


def power_at_least_favourable(design: SequentialDesign) -> float:
    only_first, only_second = discordance(*least_favourable(design.min_difference))
    return operating_characteristics(design, only_first, only_second, design.cap, until_first=design.power).first_better


def minimum_cap(alpha: float, power: float, min_difference: float, comparisons: int,
                futility: FutilityRule = FutilityRule.PAIRED_BETTING) -> int | None:
    """The fewest pairs per comparison whose calibrated test reaches the power at the least favourable
    rates, or None if no cap up to MAX_PAIRS_SEARCHED does. Searched upward from the fixed-sample n
    (a sequential test never needs fewer), doubling, then bisecting."""
    def reaches(cap: int) -> bool:
        return power_at_least_favourable(design(alpha, power, min_difference, comparisons, cap, futility)) >= power

    check_design_inputs(alpha, power, min_difference, comparisons)
    fixed = mcnemar_fixed_pairs(alpha / comparisons, power, *least_favourable(min_difference))
    low, high = fixed - 1, fixed
    while not reaches(high):
        if high >= MAX_PAIRS_SEARCHED:
            return None
        low, high = high, min(2 * high, MAX_PAIRS_SEARCHED)
    while high - low > 1:
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle
    return high


def simulate(
    design: SequentialDesign, first: np.ndarray, second: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run the test on simulated outcomes, vectorised over comparisons (the benchmark's engine; the
    exact walk above and `advance` are the other two implementations it is checked against).

    `first`, `second`: bool arrays (comparisons, >= cap pairs), the arms' outcomes at each pair.
    Returns (decision code per comparison: 1 first better, -1 second better, 0 futility, 2 cap;
    pairs used per comparison).
    """
    first, second = first[:, :cap], second[:, :cap]
    first_only, second_only = np.cumsum(first & ~second, axis=1), np.cumsum(second & ~first, axis=1)
    log_first, log_second = design.log_e(first_only, second_only)
    low_first, low_second = design.closes(np.arange(1, first.shape[1] + 1)[None, :], first_only, second_only)
    never = cap + 1

    def first_time(hit: np.ndarray) -> np.ndarray:
        return np.where(hit.any(axis=1), np.argmax(hit, axis=1), never)

    up_first = first_time(_at_or_above(log_first, design.log_efficacy_bound))
    up_second = first_time(_at_or_above(log_second, design.log_efficacy_bound))
    closed_first = first_time(low_first)
    closed_second = first_time(low_second)
    # a direction's efficacy is checked before that pair closes it (as `advance` does)
    wins_first = np.where(up_first <= closed_first, up_first, never)
    wins_second = np.where(up_second <= closed_second, up_second, never)
    futile = np.maximum(closed_first, closed_second)
    at = np.minimum(np.minimum(wins_first, wins_second), np.minimum(futile, cap - 1))
    code = np.select([wins_first == at, wins_second == at, futile == at], [1, -1, 0], default=2)
    return code, at + 1
