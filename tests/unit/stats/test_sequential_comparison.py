"""The blind comparison's statistics and schedule: error rates, power, the cap check, the seal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.models.comparison import (
    ArmIdentity,
    PositionRule,
    SealBroken,
    SealedMapping,
    arm_codes,
    block_order,
    build_schedule,
    default_comparisons,
    replay,
    run_finished,
    seal,
    unseal,
)
from harness.stats import sequential as sq
from harness.stats.sequential import ComparisonState, Decision, advance, design, discordance, operating_characteristics

# d = 0.3 keeps every cap small (tens of pairs) so these tests stay fast on a loaded machine.
ALPHA, POWER, DIFF = 0.05, 0.8, 0.3


@pytest.fixture(scope="module")
def cap() -> int:
    """The old design's cap (point SPRT calibrated to the cap): what sheets locked before the mixture use."""
    found = sq.minimum_cap(ALPHA, POWER, DIFF, 1, efficacy=sq.EfficacyRule.CALIBRATED_SPRT)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def mixture_cap() -> int:
    found = sq.minimum_cap(ALPHA, POWER, DIFF, 1)
    assert found is not None
    return found


def test_boundaries_are_villes_and_the_design_point_is_least_favourable(cap):
    rule = design(ALPHA, POWER, DIFF, 1, cap)
    # Ville's inequality: a test martingale crosses 1/a with probability at most a; two directions, alpha/2 each
    assert rule.log_ville_bound == pytest.approx(math.log(2 / ALPHA))
    assert 0 < rule.log_efficacy_bound <= rule.log_ville_bound
    assert rule.log_futility_bound == pytest.approx(math.log(1 - POWER))
    # 0.65 against 0.35: P(only the better | one) = 0.65^2 / (0.65^2 + 0.35^2)
    assert rule.theta1 == pytest.approx(0.4225 / (0.4225 + 0.1225))
    # any other rates with the same difference give larger discordant odds
    for low in (0.05, 0.2, 0.5, 0.65):
        first_only, second_only = discordance(low + DIFF, low)
        assert first_only / (first_only + second_only) >= rule.theta1 - 1e-12


@pytest.mark.slow
def test_agreeing_arms_reach_futility_in_under_half_the_fixed_sample_trials_and_the_power_holds(cap):
    """Two policies that both succeed 80 % of the time mostly agree; paired betting learns from the agreement
    (a test on discordant pairs alone barely saves anything there). At every pair of rates with the declared
    difference the power stays at least the declared one, and futility is wrongly declared at most 1 - power."""
    rule = design(ALPHA, POWER, DIFF, 1, cap)
    assert rule.futility is sq.FutilityRule.PAIRED_BETTING
    fixed = rule.fixed_sample_pairs()
    agreeing = operating_characteristics(rule, *discordance(0.8, 0.8), cap)
    assert agreeing.expected_pairs < fixed / 2 and agreeing.first_better + agreeing.second_better <= ALPHA
    legacy_cap = sq.minimum_cap(ALPHA, POWER, DIFF, 1, sq.FutilityRule.DISCORDANT_SPRT, sq.EfficacyRule.CALIBRATED_SPRT)
    legacy = design(ALPHA, POWER, DIFF, 1, legacy_cap, sq.FutilityRule.DISCORDANT_SPRT)
    assert operating_characteristics(legacy, *discordance(0.8, 0.8), legacy_cap).expected_pairs > 0.9 * fixed
    for low in np.arange(0.0, 1 - DIFF + 1e-9, 0.1):
        better = operating_characteristics(rule, *discordance(low + DIFF, low), cap)
        assert better.first_better >= POWER and better.futility <= 1 - POWER, low


def test_the_futility_bet_is_kellys_and_a_supermartingale_under_the_alternative():
    """lambda maximises the expected log growth when both arms succeed half the time; under "A better by d" each
    pair's factor has mean at most 1, whatever the rates (the bet is valid for the whole alternative)."""
    bet = sq.kelly_bet(DIFF)

    def growth(b: float) -> float:
        return 0.5 * math.log1p(b * DIFF) + 0.25 * math.log1p(b * (DIFF - 1)) + 0.25 * math.log1p(b * (DIFF + 1))

    assert 0 < bet < 1 / (1 - DIFF)
    assert growth(bet) > max(growth(bet - 0.02), growth(bet + 0.02))
    for low in np.arange(0.0, 1 - DIFF + 1e-9, 0.05):
        a_only, b_only = discordance(low + DIFF, low)
        factor = a_only * (1 + bet * (DIFF - 1)) + b_only * (1 + bet * (DIFF + 1)) + (1 - a_only - b_only) * (
            1 + bet * DIFF)
        assert factor <= 1 + 1e-12


def test_a_sheet_locked_before_paired_betting_keeps_its_futility_rule():
    from harness.models.locked import LockedDesign

    old = LockedDesign(alpha=ALPHA, power=POWER, min_difference=DIFF, comparisons=1, cap=63, log_efficacy_bound=3.3,
                       fixed_sample_pairs=46)
    rule = sq.SequentialDesign(**old.model_dump(exclude={"fixed_sample_pairs"}))
    assert rule.futility is sq.FutilityRule.DISCORDANT_SPRT
    # four agreeing pairs: evidence against a difference for paired betting, nothing for the discordant test
    assert ComparisonState(pairs=4).log_against(rule) == (0.0, 0.0)
    assert min(ComparisonState(pairs=4).log_against(design(ALPHA, POWER, DIFF, 1, 76))) > 0


def test_fixed_sample_mcnemar_reaches_its_power_by_exact_enumeration():
    n = sq.mcnemar_fixed_pairs(ALPHA, POWER, 0.65, 0.35)
    # exact power of the exact McNemar test at n pairs, by the distribution of discordant counts
    from harness.stats.estimates import mcnemar_exact
    b_p, c_p = discordance(0.65, 0.35)
    power = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if mcnemar_exact(b, c) <= ALPHA and b > c:
                power += (math.comb(n, b) * math.comb(n - b, c) * b_p**b * c_p**c * (1 - b_p - c_p) ** (n - b - c))
    assert 0.75 <= power <= 0.9, (n, power)


@pytest.mark.parametrize("efficacy", list(sq.EfficacyRule))
def test_exact_walk_simulation_and_state_machine_agree(cap, mixture_cap, efficacy):
    if efficacy is sq.EfficacyRule.MIXTURE:
        cap = mixture_cap
        rule = sq.mixture_design(ALPHA, POWER, DIFF, 1, cap)
    else:
        rule = design(ALPHA, POWER, DIFF, 1, cap)
    rng = np.random.default_rng(7)
    first = rng.random((4000, cap)) < 0.65
    second = rng.random((4000, cap)) < 0.35
    code, used = sq.simulate(rule, first, second, cap)
    for row in range(60):   # the state machine, one pair at a time, decides the same at the same pair
        state = ComparisonState()
        while not state.decision.final:
            state = advance(rule, state, bool(first[row, state.pairs]), bool(second[row, state.pairs]), cap)
        expected = {Decision.FIRST_BETTER: 1, Decision.SECOND_BETTER: -1, Decision.FUTILITY: 0, Decision.CAP: 2}
        assert (expected[state.decision], state.pairs) == (code[row], used[row])
    exact = operating_characteristics(rule, *discordance(0.65, 0.35), cap)
    assert np.mean(code == 1) == pytest.approx(exact.first_better, abs=0.03)
    assert np.mean(used) == pytest.approx(exact.expected_pairs, rel=0.05)
    assert exact.first_better >= POWER


@pytest.mark.parametrize("rate", [0.3, 0.5, 0.8])
def test_type_one_error_at_most_alpha_in_simulation(cap, rate):
    rule = design(ALPHA, POWER, DIFF, 1, cap)
    rng = np.random.default_rng(int(rate * 100))
    runs = 3000
    code, _ = sq.simulate(rule, rng.random((runs, cap)) < rate, rng.random((runs, cap)) < rate, cap)
    errors = np.mean(np.abs(code) == 1)
    assert errors <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert sq.worst_case_type_one_error(rule) <= ALPHA


@pytest.mark.slow
def test_a_cap_too_small_for_the_power_is_found_and_the_minimum_is_tight(cap, mixture_cap):
    assert sq.power_at_least_favourable(design(ALPHA, POWER, DIFF, 1, cap)) >= POWER
    assert sq.power_at_least_favourable(design(ALPHA, POWER, DIFF, 1, cap - 1)) < POWER
    assert sq.power_at_worst_dependence(sq.mixture_design(ALPHA, POWER, DIFF, 1, mixture_cap)) >= POWER
    assert sq.power_at_worst_dependence(sq.mixture_design(ALPHA, POWER, DIFF, 1, mixture_cap - 1)) < POWER
    # more declared comparisons (Bonferroni) need more pairs
    assert sq.minimum_cap(ALPHA, POWER, DIFF, 3) > mixture_cap


def test_the_old_design_loses_its_power_when_the_arms_are_negatively_dependent(cap):
    """0.6 against 0.4, one succeeding exactly where the other fails: the point SPRT's drift is nearly zero and its
    power at its cap falls to about half, and no cap up to the checked limit brings it back to 0.8. The mixture
    the lock uses now is sized at this very case."""
    old = design(ALPHA, POWER, 0.2, 1, sq.minimum_cap(ALPHA, POWER, 0.2, 1, efficacy=sq.EfficacyRule.CALIBRATED_SPRT))
    assert sq.power_at_least_favourable(old) >= POWER
    first_by, _, _ = sq.discordant_walk(old, 0.6, old.cap)
    assert first_by[-1] < 0.55
    first_by, _, _ = sq.discordant_walk(old, 0.6, 2000)
    assert first_by[-1] < POWER
    new_cap = sq.minimum_cap(ALPHA, POWER, 0.2, 1)
    assert new_cap is not None
    assert sq.discordant_walk(sq.mixture_design(ALPHA, POWER, 0.2, 1, new_cap), 0.6, new_cap)[0][-1] >= POWER


@pytest.mark.slow
def test_the_mixture_keeps_its_power_at_every_dependence_and_is_weakest_when_every_pair_is_discordant(mixture_cap):
    """Every pair of rates with the declared difference, from the most negatively dependent arms (fewest
    agreements) through independent to the most positively dependent: the power at the cap stays at least the
    declared one, and the every-pair-discordant case the lock sizes on is the lowest of them."""
    rule = sq.mixture_design(ALPHA, POWER, DIFF, 1, mixture_cap)
    worst = sq.power_at_worst_dependence(rule)
    for low in (0.1, 0.35, 0.6):
        high = low + DIFF
        for both in (max(0.0, high + low - 1), high * low, low):   # P(both succeed): negative, independent, positive
            found = operating_characteristics(rule, high - both, low - both, mixture_cap)
            assert found.first_better >= POWER and found.first_better >= worst - 1e-9, (low, both)


def test_the_mixture_is_anytime_valid_past_the_cap_and_with_futility_ignored():
    """Ville's bound: the type I error stays at most alpha however long the run goes on and whether or not
    futility stops it (the old design's calibration holds only up to its cap with futility binding)."""
    long = sq.MAX_PAIRS_SEARCHED
    rule = sq.mixture_design(ALPHA, POWER, DIFF, 1, long)
    first, second, _ = sq.discordant_walk(rule, 0.5, long, futility=False)
    assert first[-1] + second[-1] <= ALPHA
    assert rule.log_efficacy_bound == pytest.approx(math.log(2 / ALPHA))


def test_the_mixture_equals_betting_on_the_plug_in_odds_from_the_pairs_so_far():
    """The mixture's e-value after a sequence of discordant pairs is the product of 2 p_t^x (1 - p_t)^(1 - x),
    p_t the posterior mean of theta (truncated to theta >= 1/2) from the pairs before t: a predictable bet."""
    from scipy import integrate

    rule = sq.mixture_design(ALPHA, POWER, DIFF, 1, 100)
    a, b = rule.prior_a, rule.prior_b
    assert a is not None and b is not None
    outcomes = [1, 1, 0, 1, 0, 0, 1, 1, 1]
    log_product, wins, losses = 0.0, 0, 0
    for x in outcomes:
        def moment(power: int, w: int = wins, f: int = losses) -> float:
            return integrate.quad(lambda t: t ** (a - 1 + w + power) * (1 - t) ** (b - 1 + f), 0.5, 1)[0]

        plug_in = moment(1) / moment(0)
        log_product += math.log(2 * (plug_in if x else 1 - plug_in))
        wins, losses = wins + x, losses + 1 - x
        assert rule.log_e(wins, losses)[0] == pytest.approx(log_product, rel=1e-6)


def test_the_design_search_answers_or_refuses_naming_the_limit():
    # how fast it answers is benchmarks/design_search_bench.py's (about a second alone), not a timed test's
    assert sq.minimum_cap(ALPHA, POWER, 0.01, 1) is None            # no cap up to the limit
    assert sq.minimum_cap(ALPHA, POWER, 0.1, 1) is not None
    for cap in (sq.MAX_PAIRS_SEARCHED + 1, 100_000, True):
        with pytest.raises(ValueError, match=str(sq.MAX_PAIRS_SEARCHED)):
            sq.mixture_design(ALPHA, POWER, DIFF, 1, cap)


@pytest.mark.parametrize("bad", [0.0, 1.0, float("nan"), float("inf"), -0.1, True])
def test_design_refuses_nonsense_numbers(bad):
    with pytest.raises(ValueError):
        design(bad, POWER, DIFF, 1, 50)
    with pytest.raises(ValueError):
        design(ALPHA, POWER, bad, 1, 50)


def test_schedule_is_a_pure_function_of_the_seed_and_balanced():
    codes = arm_codes(3)
    positions = [4, 9, 2]
    first = build_schedule(11, codes, positions, 12, PositionRule.CYCLE)   # a sheet locked before the draw
    assert first == build_schedule(11, codes, positions, 12, PositionRule.CYCLE)
    assert build_schedule(11, codes, positions, 5, PositionRule.CYCLE) == first[:15]   # resuming never reshuffles
    assert first != build_schedule(12, codes, positions, 12, PositionRule.CYCLE)
    for block in range(12):
        slots = [s for s in first if s.block == block]
        assert sorted(s.arm for s in slots) == list(codes)           # every arm once per block
        assert {s.position for s in slots} == {positions[block % 3]}  # at one start position
    orders = {block_order(11, b, codes) for b in range(40)}
    assert len(orders) > 3                                           # the order inside a block is randomized
    assert [s.number for s in first] == list(range(1, 37))


def test_seal_hides_the_policies_and_detects_tampering():
    mapping = {"A": ArmIdentity(ref="outputs/act_cube/checkpoints/001500", fingerprint="sha256:ab"),
               "B": ArmIdentity(ref="expert", fingerprint="builtin:expert")}
    sealed = seal(mapping)
    text = sealed.model_dump_json()
    for word in ("act_cube", "001500", "expert", "builtin"):
        assert word not in text
    assert unseal(sealed) == mapping
    assert seal(mapping).commitment != sealed.commitment           # a fresh salt each time
    flipped = bytearray(__import__("base64").b64decode(sealed.sealed))
    flipped[3] ^= 1
    tampered = SealedMapping(salt=sealed.salt, sealed=__import__("base64").b64encode(bytes(flipped)).decode(),
                             commitment=sealed.commitment)
    with pytest.raises(SealBroken):
        unseal(tampered)


def test_replay_stops_each_comparison_and_the_run_when_all_have(cap):
    rule = design(ALPHA, POWER, DIFF, 1, cap)
    blocks = [{"A": True, "B": False} for _ in range(cap)]
    traces = replay(rule, default_comparisons(("A", "B")), blocks)
    assert traces[0].winner() == "A" and run_finished(traces)
    assert len(traces[0].states) < cap
    assert not run_finished(replay(rule, (("A", "B"),), blocks[:1]))


def test_the_futility_mixture_stops_equal_arms_that_always_disagree_far_sooner():
    """Equal arms, one succeeding exactly where the other fails (every pair discordant, theta 1/2): the single bet,
    tuned for independent arms, gains almost nothing a pair there; the mean of it and the every-pair-discordant
    Kelly bet closes both directions in far fewer pairs (exact walks, no simulation), at the same error."""
    cap = sq.MAX_PAIRS_SEARCHED // 5
    single = sq.mixture_design(ALPHA, POWER, DIFF, 1, cap, sq.FutilityRule.PAIRED_BETTING)
    mixed = sq.mixture_design(ALPHA, POWER, DIFF, 1, cap)
    assert mixed.futility is sq.FutilityRule.PAIRED_BETTING_MIXTURE
    _, _, pairs_single = sq.discordant_walk(single, 0.5, cap)
    first_mixed, second_mixed, pairs_mixed = sq.discordant_walk(mixed, 0.5, cap)
    assert pairs_mixed < 0.75 * pairs_single, (pairs_mixed, pairs_single)
    assert first_mixed[-1] + second_mixed[-1] <= ALPHA


def test_each_futility_bet_is_a_supermartingale_against_a_difference_of_the_declared_size():
    """Under "A better by d" every pair's factor has mean at most 1 for both bets the mixture averages, at every
    rate and every dependence (negative, independent, positive), so their mean is a test supermartingale too:
    futility closes the better arm's direction with probability at most 1 - power (Ville)."""
    for bet in sq.futility_bets(DIFF):
        assert 0 < bet < 1 / (1 - DIFF)
        for low in np.arange(0.0, 1 - DIFF + 1e-9, 0.05):
            high = low + DIFF
            for both in (max(0.0, high + low - 1), high * low, low):
                a_only, b_only = high - both, low - both
                factor = a_only * (1 + bet * (DIFF - 1)) + b_only * (1 + bet * (DIFF + 1)) + (1 - a_only - b_only) * (
                    1 + bet * DIFF)
                assert factor <= 1 + 1e-12, (bet, low, both)


def test_the_lock_keeps_a_cap_sized_for_the_single_bet_and_names_the_smallest_cap_otherwise():
    """For d = 0.2 the mixture needs 547 pairs, the single bet 541: a protocol declaring 541 (sized before the
    mixture) still locks, with the single bet it was sized for; 547 locks the mixture; 540 is refused naming 541."""
    mixed_cap = sq.minimum_cap(ALPHA, POWER, 0.2, 1)
    single_cap = sq.minimum_cap(ALPHA, POWER, 0.2, 1, sq.FutilityRule.PAIRED_BETTING)
    assert mixed_cap is not None and single_cap is not None
    rule, _ = sq.design_for_cap(ALPHA, POWER, 0.2, 1, max(mixed_cap, single_cap))
    assert rule is not None and rule.futility is sq.FutilityRule.PAIRED_BETTING_MIXTURE
    if single_cap < mixed_cap:
        rule, _ = sq.design_for_cap(ALPHA, POWER, 0.2, 1, single_cap)
        assert rule is not None and rule.futility is sq.FutilityRule.PAIRED_BETTING
    for found in (rule,):
        assert found is not None and sq.power_at_worst_dependence(found) >= POWER
    refused, needed = sq.design_for_cap(ALPHA, POWER, 0.2, 1, min(mixed_cap, single_cap) - 1)
    assert refused is None and needed == min(mixed_cap, single_cap)


def test_a_sheet_locked_with_one_futility_bet_resumes_with_it():
    """The lock records the rule's name and its bets: a sheet locked with `paired-betting` (no `futility_bets`) is
    read back as the single bet, every count giving the very evidence it gave when locked."""
    from harness.models.locked import LockedDesign

    single = sq.mixture_design(ALPHA, POWER, DIFF, 1, 241, sq.FutilityRule.PAIRED_BETTING)
    locked = LockedDesign(alpha=ALPHA, power=POWER, min_difference=DIFF, comparisons=1, cap=241,
                          log_efficacy_bound=single.log_efficacy_bound, fixed_sample_pairs=46,
                          futility="paired-betting", futility_bet=single.futility_bet, efficacy="beta-mixture",
                          prior_a=single.prior_a, prior_b=single.prior_b)
    again = sq.SequentialDesign(**locked.model_dump(exclude={"fixed_sample_pairs"}))
    assert again.futility is sq.FutilityRule.PAIRED_BETTING and again.futility_bets is None
    mixed = sq.mixture_design(ALPHA, POWER, DIFF, 1, 241)
    relocked = LockedDesign(**{**locked.model_dump(), "futility": "paired-betting-mixture",
                               "futility_bets": list(mixed.futility_bets or ())})
    mixed_again = sq.SequentialDesign(**relocked.model_dump(exclude={"fixed_sample_pairs"}))
    for counts in ((10, 3, 3), (40, 20, 20), (7, 0, 0)):
        assert again.log_against(*counts) == pytest.approx(single.log_against(*counts))
        assert mixed_again.log_against(*counts) == pytest.approx(mixed.log_against(*counts))
        assert again.log_against(*counts) != pytest.approx(mixed.log_against(*counts))


def test_the_honest_fixed_n_has_the_power_when_every_pair_is_discordant():
    """The honest fixed-n baseline: the fewest pairs whose exact McNemar test (every pair discordant: the exact sign
    test at theta = (1 + d) / 2) has the declared power there; one pair fewer, or the independent-arms n, has not."""
    from scipy.stats import binom

    for diff in (0.2, 0.3):
        rule = sq.mixture_design(ALPHA, POWER, diff, 1, 100)
        theta = (1 + diff) / 2

        def power(n: int, theta: float = theta) -> float:
            # reject when the A-only count is at least the smallest k with P(>= k | 1/2) <= alpha / 2
            k = next(k for k in range(n + 2) if binom.sf(k - 1, n, 0.5) <= ALPHA / 2)
            return float(binom.sf(k - 1, n, theta))

        n = rule.fixed_sample_pairs_worst()
        assert power(n) >= POWER and power(n - 1) < POWER
        assert power(rule.fixed_sample_pairs()) < POWER - 0.1
