"""A graded comparison's section: the primary outcome as locked (what it is, where it was read from), each arm's
mean score, the paired betting test's decision and wealths, and the trials a fixed-n test on success alone would
have needed at the same alpha and power (`harness.models.graded`, `harness.stats.betting`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.models.comparison import block_outcomes
from harness.models.graded import PrimaryOutcome
from harness.models.scoresheet import Scoresheet
from harness.reports.blocks import Block, Para, Table
from harness.stats import betting
from harness.stats.estimates import mean_interval


class GradedArmJson(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: str
    scored: int
    mean_score: float | None = Field(description="the primary outcome on [0, 1] (progress / 4; 1 - time / limit, 0 "
                                                 "for a failure), over this arm's scored trials")
    low95: float | None = Field(description="95% t interval of the mean score (descriptive; the decision is the "
                                            "test's); null with fewer than two trials")
    high95: float | None


class GradedComparisonJson(BaseModel):
    model_config = ConfigDict(frozen=True)
    first: str
    second: str
    decision: str
    blocks: int
    mean_difference: float | None = Field(description="mean of first minus second score over the pairs used")
    log_wealth_first: list[float] = Field(description="log of the betting wealth on 'first scores higher' after "
                                                      "each block; decides at log_efficacy_bound")
    log_wealth_second: list[float]
    log_against_first: list[float] = Field(description="log wealth against 'first better by min_difference'; "
                                                       "closes that direction at log_futility_bound")
    log_against_second: list[float]


class GradedJson(BaseModel):
    """A comparison on a graded primary outcome (`blind_comparison.graded`; null for one on success)."""

    model_config = ConfigDict(frozen=True)
    outcome: str = Field(description="progress or time_to_success, declared in the stopping rule")
    definition: str
    source: str = Field(description="judge (simulated arm) or operator+anatomy (a real or emulated arm)")
    episode_limit_s: float
    test: str = Field(description="the paired betting test and its bet")
    log_efficacy_bound: float
    log_futility_bound: float
    trials_used: int = Field(description="trials over every arm so far")
    fixed_binary_trials: int = Field(description="trials over every arm McNemar's fixed-sample test on success "
                                                 "needs at the same alpha and power for min_difference")
    arms: list[GradedArmJson]
    comparisons: list[GradedComparisonJson]


def graded_json(sheet: Scoresheet) -> GradedJson | None:
    comparison = sheet.locked.require_comparison()
    if comparison.graded is None:
        return None
    outcome, design = comparison.graded.outcome, sheet.comparison.betting_design()
    schedule = sheet.comparison.schedule()
    blocks = block_outcomes(schedule, sheet.comparison.graded_score)
    arms = []
    arm_of = {slot.number: slot.arm for slot in schedule}
    for code in comparison.arms:
        scores = [s for a in sheet.scored_attempts() if arm_of.get(a.trial_index) == code
                  and (s := sheet.comparison.graded_score(a.trial_index)) is not None]
        found = mean_interval(scores)
        mean = sum(scores) / len(scores) if scores else None
        low, high = (found[1], found[2]) if found is not None else (None, None)
        arms.append(GradedArmJson(code=code, scored=len(scores), mean_score=mean, low95=low, high95=high))
    rows = []
    used = 0
    for first, second in comparison.comparisons:
        states = betting.replay(design, [(b[first], b[second]) for b in blocks])
        used = max(used, len(states))
        rows.append(GradedComparisonJson(
            first=first, second=second, decision=betting.decision(states[-1]).value if states else "continue",
            blocks=len(states), mean_difference=float(states[-1].mean()) if states else None,
            log_wealth_first=[round(float(s.log_for_first), 6) for s in states],
            log_wealth_second=[round(float(s.log_for_second), 6) for s in states],
            log_against_first=[round(float(s.log_against_first), 6) for s in states],
            log_against_second=[round(float(s.log_against_second), 6) for s in states]))
    count = len(comparison.arms)
    return GradedJson(
        outcome=outcome.kind.value, definition=outcome.definition, source=outcome.source.value,
        episode_limit_s=outcome.episode_limit_s,
        test=f"paired betting (a mixture of {len(design.bets)} fixed bets, {min(design.bets):g} to "
             f"{max(design.bets):g} of the wealth a pair; Ville's bound)",
        log_efficacy_bound=design.log_efficacy_bound, log_futility_bound=design.log_futility_bound,
        trials_used=used * count, fixed_binary_trials=comparison.design.fixed_sample_pairs * count,
        arms=arms, comparisons=rows)


def graded_null_text(kind: PrimaryOutcome, positions: int, drawn: bool, alpha: float) -> str:
    """What a graded comparison's decision rejects, in a user's words: equal average score on the locked outcome
    (not equal success, which a comparison on success tests), and the paired betting test's error guarantee."""
    score = "progress (0-4)" if kind is PrimaryOutcome.PROGRESS else "time-to-success score"
    where = (f"over the protocol's {positions} start positions' (each block's position drawn at random from them)"
             if drawn else f"at every one of the protocol's {positions} start positions' (the positions were "
             "cycled in order)")
    return (f"What 'better' means here: the test rejects 'equal average {score} {where}, the primary outcome "
            "locked before trial 1. The test is anytime-valid paired betting on each block's difference in score "
            f"(Ville's bound): its error stays at most alpha {alpha} however long the run goes.")


def _mean_text(kind: PrimaryOutcome, value: GradedArmJson, limit_s: float) -> str:
    if value.mean_score is None:
        return "no scored trials"
    if kind is PrimaryOutcome.PROGRESS:
        text = f"{value.mean_score * 4:.2f} of 4"
        if value.low95 is not None and value.high95 is not None:
            text += f" [{value.low95 * 4:.2f}, {value.high95 * 4:.2f}]"
        return text
    # time to success: the mean share of the episode a success left unused, in seconds (a failure leaves none)
    return f"done {value.mean_score * limit_s:.1f} s before the {limit_s:g} s limit on average (a failure: 0 s)"


def graded_blocks(sheet: Scoresheet) -> list[Block]:
    """Plain words first: what was compared, what it says, and what success alone would have cost."""
    found = graded_json(sheet)
    if found is None:
        return []
    kind = PrimaryOutcome(found.outcome)
    what = ("how far each attempt got (progress, 0-4)" if kind is PrimaryOutcome.PROGRESS
            else "how soon each attempt succeeded (time to success; a failure counts as the whole episode)")
    blocks: list[Block] = [
        Para(f"Primary outcome: {what}, declared in the stopping rule before trial 1 and locked. Definition: "
             f"{found.definition}. Read from: {found.source}. The test: {found.test}; it stops when the betting "
             "wealth on one arm scoring higher, averaged over the protocol's start positions, reaches "
             f"e^{found.log_efficacy_bound:.2f}, or when both directions have been shown not to differ by the "
             f"declared size. Trials used: {found.trials_used}; a fixed-sample test on success alone, at the same "
             f"alpha and power, needs {found.fixed_binary_trials}."),
        Table(["arm", f"mean {found.outcome} (95% interval)", "scored"],
              [[arm.code, _mean_text(kind, arm, found.episode_limit_s), str(arm.scored)] for arm in found.arms]),
    ]
    return blocks


def graded_line(sheet: Scoresheet) -> str | None:
    """The run's last words on a graded comparison (arm codes only, as the tally): each arm's mean on the locked
    outcome, the thing the decision is about; None for a comparison on success."""
    found = graded_json(sheet)
    if found is None:
        return None
    kind = PrimaryOutcome(found.outcome)
    arms = ", ".join(f"{arm.code} {_mean_text(kind, arm, found.episode_limit_s)} over {arm.scored}"
                     for arm in found.arms)
    return f"{found.outcome} per arm (the primary outcome, mean with its 95% interval): {arms}"
