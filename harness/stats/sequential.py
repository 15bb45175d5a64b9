"""An anytime-valid sequential test for paired binary outcomes: which of two policies succeeds more.

Each block runs every arm once at the same start position, drawn at random from the protocol's positions
(`harness.models.comparison`), so a comparison of two arms gains one *pair* per block, and the pairs are
independent draws. Concordant pairs say nothing about which is better; among the discordant ones,
theta = P(only A succeeded | exactly one did) is exactly 1/2 whenever the two arms have equal *average*
success over the positions, whatever the rate, the dependence between the arms or how their strengths
differ by position (McNemar's argument, made exact by the draw).

* Which is better (`EfficacyRule.MIXTURE`, what comparisons lock): ``e_A`` bets on each discordant pair at
  the odds estimated from the discordant pairs before it (the posterior mean of theta under a Beta prior
  truncated to theta >= 1/2): a predictable plug-in bet, which multiplies out to a mixture over the
  alternative, a function of the counts (`log_mixture`). It is a test martingale when theta = 1/2 (a
  supermartingale when theta < 1/2), so by Ville's inequality ``P(sup e_A >= 2 K / alpha) <= alpha / (2 K)``
  for ever: anytime-valid, past the cap, and whether futility is heeded or not (Ramdas, Gruenwald, Vovk and
  Shafer, "Game-theoretic statistics and safe anytime-valid inference", Statistical Science 2023; the betting
  form of Waudby-Smith and Ramdas, JRSS B 2024; mixtures as in Wald 1947 and Robbins 1970). ``e_B`` likewise
  with A and B swapped; at most alpha over K declared comparisons (Bonferroni).
  Sheets locked before it keep `EfficacyRule.CALIBRATED_SPRT`: a point-alternative SPRT (Wald 1945) whose
  bound is calibrated to the cap with futility binding (`design`): a truncated sequential test, valid only
  up to the cap and only if futility stops the run.
* Futility ("no difference of that size") uses every pair, concordant ones too (`FutilityRule.PAIRED_BETTING`,
  testing by betting: Shafer, "Testing by betting", JRSS A 2021). With D = (A succeeded) - (B succeeded) in
  {-1, 0, 1}, "A better by d" says E[D] >= d, so ``W_A = prod (1 + lambda (d - D))`` (0 <= lambda < 1 / (1 - d))
  has expectation at most 1 at every pair: a test supermartingale *against* "A better by d", and
  ``P(sup W_A >= 1 / gamma) <= gamma`` under it (Ville). A concordant pair (D = 0) multiplies W_A by 1 + lambda d:
  two arms that mostly agree soon show that their difference is not d. Direction A closes when
  ``W_A >= 1 / gamma`` (likewise W_B with D negated); both closed: futility. lambda is fixed at the lock (so the
  state is the counts, and the exact walks stay exact): the Kelly bet at both arms 1/2 independent (`kelly_bet`).
  Sheets locked before this rule existed keep theirs (`FutilityRule.DISCORDANT_SPRT`), as their lock says.
* The cap is sized exactly for the declared power *whatever the dependence between the arms*: the power is
  lowest when every pair is discordant (a pair then tells least about the difference: d^2 / 2 psi per pair
  for a share psi of discordant pairs), where the state is one-dimensional and one exact walk
  (`discordant_walk`, O(cap^2), under a second up to `MAX_PAIRS_SEARCHED`) gives the power of every cap at
  once. :func:`operating_characteristics` walks the general (A-only, B-only) distribution for the tests.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import Enum, StrEnum
from statistics import NormalDist
from typing import Any

import numpy as np

# The futility bound gamma is this share of the allowed miss rate (1 - power); the rest is left to
# the cap. Chosen on the least favourable setting (see docs/comparisons.md), not on the benchmark's.
FUTILITY_SHARE_OF_BETA = 1.0
# No cap beyond this many pairs is checked or searched: the exact walk that sizes a cap answers within about a
# second up to here (far more trials than a real arm runs); a larger cap is refused naming this limit.
MAX_PAIRS_SEARCHED = 5_000
# The old design's bound is calibrated by bisection over a walk per candidate: bounded separately, as tightly.
MAX_PAIRS_CALIBRATED = 2_000
MAX_COMPARISONS = 45  # ten arms, every pair
# The mixture's prior on the discordant odds theta, truncated to theta >= 1/2: Beta centred on the odds the
# declared difference gives at the least favourable independent rates, with this total weight (a + b), in
# pairs. Chosen on d = 0.2 at the least favourable rates (independent and every pair discordant) only; the
# benchmark judges it on the other settings (docs/benchmarks.md).
PRIOR_STRENGTH = 20.0


class FutilityRule(StrEnum):
    """Which statistic closes a direction for futility (module docstring); the lock records it."""

    DISCORDANT_SPRT = "discordant-sprt"   # 1 / e on discordant pairs only (sheets locked before paired-betting)
    PAIRED_BETTING = "paired-betting"     # betting on every pair's difference, concordant pairs included
    # the same bet's equal-weight mixture over several fractions (`futility_bets`): what comparisons lock now
    PAIRED_BETTING_MIXTURE = "paired-betting-mixture"


class EfficacyRule(StrEnum):
    """Which statistic names a winner; the lock records it (absent: a sheet locked before the mixture)."""

    # a point-alternative SPRT whose bound is calibrated to the cap with futility binding: a truncated
    # sequential test, valid only up to the cap and only if futility stops the run (sheets locked before)
    CALIBRATED_SPRT = "calibrated-sprt"
    # a mixture over the discordant odds (betting on the plug-in estimate from the pairs so far) against
    # Ville's bound: anytime-valid, past the cap and whether futility is heeded or not
    MIXTURE = "beta-mixture"


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
    efficacy: EfficacyRule = EfficacyRule.CALIBRATED_SPRT
    prior_a: float | None = None   # MIXTURE's Beta prior on theta (truncated to theta >= 1/2)
    prior_b: float | None = None
    futility_bets: tuple[float, ...] | None = None   # PAIRED_BETTING_MIXTURE's fractions, equal weights

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
        if self.efficacy is EfficacyRule.MIXTURE:
            if self.prior_a is None or self.prior_b is None:
                raise ValueError("a mixture design needs its prior")
            return (log_mixture(first_only, second_only, self.prior_a, self.prior_b),
                    log_mixture(second_only, first_only, self.prior_a, self.prior_b))
        up, down = self.log_step_up, self.log_step_down
        return first_only * up + second_only * down, second_only * up + first_only * down

    def log_against(self, pairs: Any, first_only: Any, second_only: Any) -> tuple[Any, Any]:   # ints or arrays
        """(log evidence against "first better by the difference", against "second better by it") after these
        counts; a direction closes once its evidence reaches ``-log_futility_bound`` (module docstring)."""
        if self.futility is FutilityRule.DISCORDANT_SPRT:
            log_first, log_second = self.log_e(first_only, second_only)
            return -log_first, -log_second
        d = self.min_difference
        concordant = pairs - first_only - second_only
        if self.futility is FutilityRule.PAIRED_BETTING:
            bet = self.bet
            for_first, against_first, agree = math.log1p(bet * (d - 1)), math.log1p(bet * (d + 1)), math.log1p(bet * d)
            return (first_only * for_first + second_only * against_first + concordant * agree,
                    second_only * for_first + first_only * against_first + concordant * agree)
        if not self.futility_bets:
            raise ValueError("a futility mixture needs its bets")
        # log of the mean of W over the bets: each W is a test supermartingale against "better by d", so is the mean
        first_terms, second_terms = [], []
        for bet in self.futility_bets:
            for_first, against_first, agree = math.log1p(bet * (d - 1)), math.log1p(bet * (d + 1)), math.log1p(bet * d)
            first_terms.append(first_only * for_first + second_only * against_first + concordant * agree)
            second_terms.append(second_only * for_first + first_only * against_first + concordant * agree)
        spread = math.log(len(self.futility_bets))
        first_mix = functools.reduce(np.logaddexp, first_terms) - spread   # pairwise: far faster than .reduce
        second_mix = functools.reduce(np.logaddexp, second_terms) - spread
        return (first_mix if np.ndim(first_mix) else float(first_mix),
                second_mix if np.ndim(second_mix) else float(second_mix))

    def closes(self, pairs: Any, first_only: Any, second_only: Any) -> tuple[Any, Any]:
        """Whether each direction's futility evidence has reached its bound at these counts."""
        against_first, against_second = self.log_against(pairs, first_only, second_only)
        return (_at_or_above(against_first, -self.log_futility_bound),
                _at_or_above(against_second, -self.log_futility_bound))

    def fixed_sample_pairs_worst(self) -> int:
        """Pairs McNemar's fixed-sample test needs for the same power when every pair is discordant (the dependence
        the cap is sized for): the honest fixed-n baseline of a design that guarantees its power there."""
        return mcnemar_fixed_pairs_worst(self.alpha / self.comparisons, self.power, self.min_difference)

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


LOG_FLOOR = -700.0   # log e below this is shown as this (e is then far below any bound; keeps reports finite)


def log_mixture(wins: Any, losses: Any, a: float, b: float) -> Any:
    """log of ``2^n * integral over theta >= 1/2 of theta^wins (1 - theta)^losses`` under the Beta(a, b) prior
    truncated to theta >= 1/2: the mixture e-value for "this direction better" after `wins` discordant pairs
    for it and `losses` against (n = wins + losses). It equals the product over discordant pairs of
    ``2 p_t^x (1 - p_t)^(1 - x)`` where p_t is the posterior mean of theta from the pairs before t (the
    predictable plug-in bet), so it is a test martingale when theta = 1/2 and a supermartingale when
    theta < 1/2; and it is a function of the counts, so the exact walks stay exact."""
    from scipy.special import betainc, betaln  # here: loading a protocol imports this module, not SciPy

    wins, losses = np.asarray(wins, dtype=float), np.asarray(losses, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.log(betainc(losses + b, wins + a, 0.5)) - math.log(float(betainc(b, a, 0.5)))
        value = (wins + losses) * math.log(2) + betaln(wins + a, losses + b) - betaln(a, b) + tail
    value = np.maximum(np.nan_to_num(value, nan=LOG_FLOOR, neginf=LOG_FLOOR), LOG_FLOOR)
    return value if value.ndim else float(value)


def mixture_prior(min_difference: float) -> tuple[float, float]:
    """(a, b) of the mixture's Beta prior: centred on the least favourable independent rates' discordant odds."""
    high, low = least_favourable(min_difference)
    centre = high * high / (high * high + low * low)
    return PRIOR_STRENGTH * centre, PRIOR_STRENGTH * (1 - centre)


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


def futility_bets(min_difference: float) -> tuple[float, float]:
    """The two fractions `PAIRED_BETTING_MIXTURE` averages: the Kelly bet when both arms succeed half the time
    independently (`kelly_bet`) and when every pair is discordant (D = +-1 with probability 1/2 each: the
    Kelly fraction is d / (1 - d^2)). One fixed bet is tuned to one dependence and crawls at the other (the
    independent one, 0.40 for d = 0.2, gains 0.003 nats a pair when every pair is discordant, a seventh of
    what d / (1 - d^2) = 0.21 gains there); their mean pays log 2 once and then grows at the better rate."""
    d = min_difference
    return kelly_bet(d), d / (1 - d * d)


def check_cap(cap: int, efficacy: EfficacyRule) -> None:
    """Refuse a cap the exact calculations cannot check within about a second, naming the limit."""
    limit = MAX_PAIRS_SEARCHED if efficacy is EfficacyRule.MIXTURE else MAX_PAIRS_CALIBRATED
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= limit:
        raise ValueError(f"cap: {cap!r} pairs must be a whole number 1..{limit} (the largest cap whose power "
                         "can be checked exactly)")


def mixture_design(alpha: float, power: float, min_difference: float, comparisons: int, cap: int,
                   futility: FutilityRule = FutilityRule.PAIRED_BETTING_MIXTURE) -> SequentialDesign:
    """The anytime-valid test (what new comparisons lock): the mixture against Ville's bound 2 K / alpha in each
    direction, paired-betting futility (non-binding: ignoring it never raises the error), by default the mixture
    of two bets (`futility_bets`); `FutilityRule.PAIRED_BETTING` is the single bet sheets locked before it hold."""
    check_design_inputs(alpha, power, min_difference, comparisons)
    check_cap(cap, EfficacyRule.MIXTURE)
    if futility is FutilityRule.DISCORDANT_SPRT:
        raise ValueError("the mixture locks paired-betting futility")
    a, b = mixture_prior(min_difference)
    bound = math.log(2 * comparisons / alpha)
    bets = futility_bets(min_difference) if futility is FutilityRule.PAIRED_BETTING_MIXTURE else None
    return SequentialDesign(alpha, power, min_difference, comparisons, cap, bound, futility,
                            kelly_bet(min_difference), EfficacyRule.MIXTURE, a, b, bets)


def design(alpha: float, power: float, min_difference: float, comparisons: int, cap: int,
           futility: FutilityRule = FutilityRule.PAIRED_BETTING) -> SequentialDesign:
    """The old test for this cap (sheets locked before the mixture, and the benchmark's "before"): a point-
    alternative SPRT whose bound is the lowest whose error, looked at after every pair up to the cap, is at most
    alpha / K even if every pair were discordant and futility stops the run: a truncated sequential test with
    binding futility, valid up to the cap only. Never above Ville's bound.
    """
    check_design_inputs(alpha, power, min_difference, comparisons)
    check_cap(cap, EfficacyRule.CALIBRATED_SPRT)
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
    discordant one could have used.
    """
    first, second, _ = discordant_walk(design, 0.5, design.cap)
    return first[-1] + second[-1]


def efficacy_thresholds(design: SequentialDesign, pairs: int) -> np.ndarray:
    """For n = 1..pairs discordant pairs, the fewest won by the first arm at which "first better" is reached
    (n + 1: not reachable at n). Both tests are symmetric, so "second better" is reached when the second won
    at least as many. e_first(s, n - s) rises with s, so a bisection on s, vectorised over n."""
    n: np.ndarray = np.arange(1, pairs + 1)
    low: np.ndarray = np.zeros_like(n)
    high: np.ndarray = n + 1
    while np.any(low < high):
        middle = (low + high) // 2
        log_first, _ = design.log_e(middle, n - middle)
        open_ = low < high
        reached = open_ & _at_or_above(np.asarray(log_first), design.log_efficacy_bound)
        high = np.where(reached, middle, high)
        low = np.where(open_ & ~reached, middle + 1, low)
    return high


def discordant_walk(design: SequentialDesign, theta: float, pairs: int, until_first: float | None = None,
                    futility: bool = True) -> tuple[list[float], list[float], float]:
    """The exact walk when every pair is discordant (only the first arm succeeded with probability `theta`, only
    the second otherwise): cumulative P(first named better), P(second named better) by pair 1..pairs, and the
    expected pairs used. With s + f = n the state is one-dimensional, mass[closed_first, closed_second, s], and
    each pair's boundaries are thresholds on s (every e-value and futility statistic is monotone in s at fixed
    n), so the walk is O(pairs^2) and a cap of a few thousand takes well under a second. `until_first`: stop
    once P(first better) reaches it (what sizing a cap needs). `futility=False`: as if futility were ignored."""
    size = pairs + 1
    mass: np.ndarray = np.zeros((2, 2, size))
    mass[0, 0, 0] = 1.0
    thresholds = efficacy_thresholds(design, pairs)
    first = second = expected = 0.0
    first_by: list[float] = []
    second_by: list[float] = []
    for n in range(1, pairs + 1):
        k = n + 1
        live = mass[:, :, :k]
        expected += float(live.sum())
        moved = live * (1 - theta)
        moved[:, :, 1:] += live[:, :, :-1] * theta
        live[...] = moved
        s = np.arange(k)
        up_first = int(thresholds[n - 1])           # first better from here up
        down_second = max(0, n - up_first + 1)      # second better below here: n - s >= the threshold
        first += float(live[0, :, up_first:].sum())
        live[0, :, up_first:] = 0.0
        second += float(live[:, 0, :down_second].sum())
        live[:, 0, :down_second] = 0.0
        if futility:
            low_first, low_second = design.closes(n, s, n - s)
            closing_first = live[0] * low_first
            live[0] -= closing_first
            live[1] += closing_first
            closing_second = live[:, 0] * low_second
            live[:, 0] -= closing_second
            live[:, 1] += closing_second
            live[1, 1] = 0.0
        first_by.append(first)
        second_by.append(second)
        if until_first is not None and first >= until_first:
            break
    return first_by, second_by, expected


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


def mcnemar_fixed_pairs_worst(alpha: float, power: float, min_difference: float) -> int:
    """The fewest pairs whose exact McNemar test (two-sided alpha) has the power when every pair is discordant: then
    it is the exact sign test on n pairs at theta = (1 + d) / 2 (199 for d = 0.2 at alpha 0.05 and power 0.8;
    Connor's normal approximation, 194, falls short of it there: 0.76). Searched upward from that approximation."""
    from scipy.stats import binom  # here: loading a protocol imports this module, not SciPy

    z_alpha = NormalDist().inv_cdf(1 - alpha / 2)
    z_beta = NormalDist().inv_cdf(power)
    d = min_difference
    theta = (1 + d) / 2
    n = max(1, math.floor((z_alpha + z_beta * math.sqrt(1 - d * d)) ** 2 / (d * d)) - 5)
    while True:
        k = int(binom.isf(alpha / 2, n, 0.5)) + 1   # the fewest A-only pairs with P(>= k | 1/2) <= alpha / 2
        if binom.sf(k - 1, n, 0.5) > alpha / 2:
            k += 1
        if binom.sf(k - 1, n, theta) >= power:
            return n
        n += 1


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
    """The old design's power at the least favourable independent rates (what its cap was sized on)."""
    only_first, only_second = discordance(*least_favourable(design.min_difference))
    return operating_characteristics(design, only_first, only_second, design.cap, until_first=design.power).first_better


def worst_dependence_theta(min_difference: float) -> float:
    """The discordant odds when every pair is discordant (the arms as negatively dependent as they can be, one
    succeeding exactly where the other fails) with the declared difference: the hardest case for the
    mixture, since a pair then carries the least information about the difference (d^2 / 2 psi for a share
    psi of discordant pairs)."""
    return (1 + min_difference) / 2


def power_at_worst_dependence(design: SequentialDesign) -> float:
    """P(the better arm named) by the cap when it leads by the declared difference and every pair is discordant:
    the power the lock checks for new comparisons, whatever the dependence between the arms and whatever
    the interaction with the start position (positions drawn per block make pairs independent draws)."""
    first_by, _, _ = discordant_walk(design, worst_dependence_theta(design.min_difference), design.cap,
                                     until_first=design.power)
    return first_by[-1]


@functools.lru_cache(maxsize=64)
def minimum_cap(alpha: float, power: float, min_difference: float, comparisons: int,
                futility: FutilityRule | None = None,
                efficacy: EfficacyRule = EfficacyRule.MIXTURE) -> int | None:
    """The fewest pairs per comparison whose test reaches the power (MIXTURE: at the worst dependence; the old
    CALIBRATED_SPRT: at the least favourable independent rates), or None if no cap up to the checked limit does.
    Remembered per design (a pure function, ~15 ms a walk): a protocol's check, its lock and a resume's check of
    the locked design each ask for the same one.

    MIXTURE: its boundaries do not depend on the cap, so one walk, stopped once the power is reached, gives
    the power of every cap at once. CALIBRATED_SPRT: searched upward from the fixed-sample n, doubling, then
    bisecting, recalibrating the bound for each candidate. `futility`: None for each test's own default
    (the mixture's `PAIRED_BETTING_MIXTURE`, the old test's `PAIRED_BETTING`)."""
    check_design_inputs(alpha, power, min_difference, comparisons)
    if efficacy is EfficacyRule.MIXTURE:
        rule = mixture_design(alpha, power, min_difference, comparisons, MAX_PAIRS_SEARCHED,
                              futility or FutilityRule.PAIRED_BETTING_MIXTURE)
        first_by, _, _ = discordant_walk(rule, worst_dependence_theta(min_difference), MAX_PAIRS_SEARCHED,
                                         until_first=power)
        return len(first_by) if first_by[-1] >= power else None

    old_futility = futility or FutilityRule.PAIRED_BETTING

    def reaches(cap: int) -> bool:
        return power_at_least_favourable(design(alpha, power, min_difference, comparisons, cap, old_futility)) >= power

    fixed = mcnemar_fixed_pairs(alpha / comparisons, power, *least_favourable(min_difference))
    low, high = fixed - 1, fixed
    if high > MAX_PAIRS_CALIBRATED:
        return None
    while not reaches(high):
        if high >= MAX_PAIRS_CALIBRATED:
            return None
        low, high = high, min(2 * high, MAX_PAIRS_CALIBRATED)
    while high - low > 1:
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle
    return high


def design_for_cap(alpha: float, power: float, min_difference: float, comparisons: int,
                   cap: int) -> tuple[SequentialDesign | None, int | None]:
    """What a comparison locks for this cap: (design, None), or (None, the smallest cap that would do; None if
    none up to the checked limit). The mixture of futility bets when its exact walk reaches the power at this
    cap; otherwise the single bet when it does (a cap sized for it before the mixture existed keeps working:
    both are valid whatever futility does, so which one is a pre-registered choice fixed by the protocol)."""
    known = []
    for futility in (FutilityRule.PAIRED_BETTING_MIXTURE, FutilityRule.PAIRED_BETTING):
        needed = minimum_cap(alpha, power, min_difference, comparisons, futility)
        if needed is not None and needed <= cap:
            return mixture_design(alpha, power, min_difference, comparisons, cap, futility), None
        if needed is not None:
            known.append(needed)
    return None, min(known) if known else None


def locked_design(alpha: float, power: float, min_difference: float, comparisons: int,
                  cap: int) -> SequentialDesign:
    """The design a comparison locks for a declared cap, or ValueError saying why not and which cap would do:
    the one check both `harness protocol check` and `harness run` apply, so a protocol that checks clean runs."""
    check_cap(cap, EfficacyRule.MIXTURE)
    design, needed = design_for_cap(alpha, power, min_difference, comparisons, cap)
    if design is None:
        would = (f"max_trials_per_arm: {needed} would" if needed is not None
                 else f"no cap up to {MAX_PAIRS_SEARCHED} would; declare a larger min_difference")
        raise ValueError(f"{cap} cannot reach power {power} for a difference of {min_difference} at alpha {alpha} "
                         f"over {comparisons} comparison(s) whatever the dependence between the arms (the hardest: "
                         f"one succeeds exactly where the other fails); {would}")
    return design


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
    # e-values through the thresholds on discordant counts (both tests are symmetric and monotone): no
    # special function evaluated per simulated pair
    thresholds = np.concatenate([[1], efficacy_thresholds(design, cap)])   # index: discordant pairs so far
    discordant = first_only + second_only
    reached = thresholds[discordant]
    up_first_hit = (discordant > 0) & (first_only >= reached)
    up_second_hit = (discordant > 0) & (second_only >= reached)
    low_first, low_second = design.closes(np.arange(1, first.shape[1] + 1)[None, :], first_only, second_only)
    never = cap + 1

    def first_time(hit: np.ndarray) -> np.ndarray:
        return np.where(hit.any(axis=1), np.argmax(hit, axis=1), never)

    up_first = first_time(up_first_hit)
    up_second = first_time(up_second_hit)
    closed_first = first_time(low_first)
    closed_second = first_time(low_second)
    # a direction's efficacy is checked before that pair closes it (as `advance` does)
    wins_first = np.where(up_first <= closed_first, up_first, never)
    wins_second = np.where(up_second <= closed_second, up_second, never)
    futile = np.maximum(closed_first, closed_second)
    at = np.minimum(np.minimum(wins_first, wins_second), np.minimum(futile, cap - 1))
    code = np.select([wins_first == at, wins_second == at, futile == at], [1, -1, 0], default=2)
    return code, at + 1


@dataclass(frozen=True)
class ComparisonTrace:
    """One declared comparison replayed block by block: its state after each complete block."""

    first: str
    second: str
    states: tuple[ComparisonState, ...]

    @property
    def final(self) -> ComparisonState:
        return self.states[-1] if self.states else ComparisonState()

    def winner(self) -> str | None:
        decision = self.final.decision
        if decision is Decision.FIRST_BETTER:
            return self.first
        if decision is Decision.SECOND_BETTER:
            return self.second
        return None
