"""A blind comparison's report: each declared comparison's e-values against their boundaries per block,
the decision, the trials used against the fixed-sample design, and, once the run has ended (or after an
explicit, recorded unblinding), which policy each arm code was.
"""

from __future__ import annotations

import io
import json
import statistics
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessInputError
from harness.models.anatomy import TrialAnatomy, describe
from harness.models.comparison import CodeRule, PositionRule, decision_text, unseal
from harness.models.protocol import SecondaryOutcome
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Label
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.reports.graded import GradedJson, graded_blocks, graded_json, graded_null_text
from harness.stats.estimates import mean_interval
from harness.stats.sequential import ComparisonTrace, EfficacyRule, FutilityRule, SequentialDesign


def legacy_unblinding_path(sheet: Scoresheet) -> Path:
    """Where sheets written before the unblinding was a chain record kept it (read, never written now)."""
    return sheet.path.with_name(sheet.path.name + ".unblinded.json")


def unblindings(sheet: Scoresheet) -> list[dict[str, object]]:
    """Every early unblinding: the records in the sheet's chain, and any an older harness wrote beside it."""
    records: list[dict[str, object]] = [u.model_dump(exclude={"chain_sha256"}) for u in sheet.unblindings]
    path = legacy_unblinding_path(sheet)
    if not path.exists():
        return records
    try:
        legacy = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessInputError(path, None, f"unreadable unblinding record ({exc})") from None
    return [*(legacy if isinstance(legacy, list) else []), *records]


def may_reveal(sheet: Scoresheet, reveal: bool, unblind: bool) -> bool:
    """Whether the arms may be named: the run has ended, it was not blind, it was unblinded before, or
    `unblind` asks for it now (recorded in the sheet's chain before anything is shown). `reveal` on a run still
    open and blind, without `unblind`, is refused."""
    comparison = sheet.locked.require_comparison()
    ended = sheet.complete
    if ended or not comparison.blind or unblindings(sheet):
        return True
    if unblind:
        sheet.add_unblinding(datetime.now(UTC).isoformat(timespec="seconds"),
                             "unblinded early with harness report --unblind, while the run was open")
        return True
    if reveal:
        raise HarnessInputError(sheet.path, "--reveal", "the comparison is still open and blind: its arms are "
                                "revealed when it ends; pass --unblind to unblind it now (recorded)")
    return False


TIMING_FIELDS = ("achieved_fps", "policy_latency_ms_p50", "policy_latency_ms_p95", "policy_latency_ms_max",
                 "robot_io_ms_p50", "robot_io_ms_p95", "obs_to_action_ms_p50", "obs_to_action_ms_p95",
                 "obs_to_action_ms_max", "inference_ms_p50", "episode_s")
# counts per trial that a slower policy drives up (deadlines missed, late actions, chunks started and the delay
# RTC spent on latency): pooled like the timing, as whole numbers
TIMING_COUNT_FIELDS = ("missed_deadlines", "queue_underruns", "chunk_switches", "rtc_delay_steps_max",
                       "rtc_delay_steps_p50")


def pooled_timing(sheet: Scoresheet) -> Scoresheet:
    """The sheet as a report may show it while a blind comparison is open and sealed: every attempt's timing
    (loop rate, policy and robot latencies, episode length on the arm's clock, the counts a slower policy drives
    up such as missed deadlines, the attempt's wall time) replaced by the median over all attempts of
    every arm, and likewise each trial's time to first motion, so no figure, table or JSON field per trial says
    which arm is the slower policy. Never saved."""
    if not sheet.records:
        return sheet

    def pooled(values: list[float | None]) -> float | None:   # the median (of the middle two: no one arm's own)
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    loop = {name: pooled([getattr(a.loop, name) for a in sheet.records]) for name in TIMING_FIELDS}
    for name in TIMING_COUNT_FIELDS:
        count = pooled([getattr(a.loop, name) for a in sheet.records])
        loop[name] = None if count is None else round(count)
    loop = {name: value for name, value in loop.items() if value is not None}
    duration = pooled([a.duration_s for a in sheet.records])
    # the time to first motion is the first action's inference more than behaviour: pooled too, and the trace's
    # one-line summary said again without it (and without the bowl, which the locked block does not hold)
    first_motion = pooled([a.anatomy.first_motion_s for a in sheet.records if a.anatomy is not None])

    def anatomy(a: Attempt) -> TrialAnatomy | None:
        if a.anatomy is None or a.anatomy.first_motion_s is None:
            return a.anatomy
        withheld = a.anatomy.model_copy(update={"first_motion_s": first_motion})
        return withheld.model_copy(update={"summary": describe(withheld, None, timing_withheld=True)})

    records = [a.model_copy(update={"loop": a.loop.model_copy(update=loop), "duration_s": duration,
                                    "anatomy": anatomy(a)}) for a in sheet.records]
    return Scoresheet(sheet.path, sheet.locked_data, sheet.lock, sheet.settings, records, sheet.measurements,
                      None, sheet.unblindings)


def _design(sheet: Scoresheet) -> SequentialDesign:
    return SequentialDesign(**sheet.locked.require_comparison().design.model_dump(exclude={"fixed_sample_pairs"}))


def statistic_plot(sheet: Scoresheet, traces: list[ComparisonTrace]) -> bytes:
    design = _design(sheet)
    fig, axes = plt.subplots(len(traces), 1, figsize=(6.8, 2.8 * len(traces)), squeeze=False)
    for ax, trace in zip(axes[:, 0], traces, strict=True):
        blocks = [0] + [state.pairs for state in trace.states]
        first = [0.0] + [state.log_e(design)[0] for state in trace.states]
        second = [0.0] + [state.log_e(design)[1] for state in trace.states]
        ax.plot(blocks, first, marker=".", color="#1f77b4", label=f"log e: {trace.first} better")
        ax.plot(blocks, second, marker=".", color="#d62728", label=f"log e: {trace.second} better")
        ax.axhline(design.log_efficacy_bound, color="#2ca02c", linestyle="--", label="decide (efficacy bound)")
        if design.futility is FutilityRule.DISCORDANT_SPRT:
            ax.axhline(design.log_futility_bound, color="#7f7f7f", linestyle=":", label="direction closes (futility)")
        else:   # paired betting: each direction's evidence against a difference of the declared size
            against = [(0.0, 0.0)] + [state.log_against(design) for state in trace.states]
            ax.plot(blocks, [a for a, _ in against], linestyle=":", color="#1f77b4",
                    label=f"log evidence against '{trace.first} better by {design.min_difference:g}'")
            ax.plot(blocks, [b for _, b in against], linestyle=":", color="#d62728",
                    label=f"log evidence against '{trace.second} better by {design.min_difference:g}'")
            ax.axhline(-design.log_futility_bound, color="#7f7f7f", linestyle=":",
                       label="direction closes (futility)")
        ax.axvline(design.cap, color="#444", linewidth=0.8, label=f"cap ({design.cap} blocks)")
        ax.set_xlabel("block (one trial per arm)")
        ax.set_ylabel("log e-value")
        winner = trace.winner()
        ax.set_title(f"{trace.first} vs {trace.second}: " + (f"{winner} better" if winner else
                                                             trace.final.decision.value))
        marks = (first, second)
        if design.futility is not FutilityRule.DISCORDANT_SPRT:
            marks = ([a for a, _ in against], [b for _, b in against])
        for closed, values, colour in (("closed_first", marks[0], "#1f77b4"),
                                       ("closed_second", marks[1], "#d62728")):
            at = next((i for i, state in enumerate(trace.states) if getattr(state, closed)), None)
            if at is not None:
                ax.plot([blocks[at + 1]], [values[at + 1]], marker="x", markersize=9, color=colour)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def comparison_blocks(sheet: Scoresheet, revealed: bool) -> list[Block]:
    comparison = sheet.locked.require_comparison()
    traces = sheet.comparison.traces()
    schedule = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    rows = []
    mapping = unseal(comparison.sealed) if revealed else {}
    secondary = declared_secondary(sheet)
    for code in comparison.arms:
        scored = [a for a in sheet.scored_attempts() if schedule.get(a.trial_index) == code]
        voids = sum(1 for a in sheet.attempts if a.label is Label.VOID and schedule.get(a.trial_index) == code)
        wins = sum(1 for a in scored if a.label is Label.SUCCESS)
        rows.append([code, mapping[code].ref if revealed else "(sealed)", f"{wins}/{len(scored)}", str(voids),
                     *([_secondary_text(placement_secondary(sheet, scored))] if secondary else [])])
    design = comparison.design
    used = max((trace.final.pairs for trace in traces), default=0)
    status = sheet.stopped_by_rule() or ("ended: every block run" if sheet.complete else "still open")
    decided = decision_text(traces, sheet.comparison.outcome()) if traces and traces[0].states else status
    blocks: list[Block] = [
        Heading("Blind comparison"),
        Para(f"Decision: {decided}. "
             f"{'Ended' if sheet.complete else 'Still open'}; {used} blocks used of at most {design.cap}: "
             f"{used * len(comparison.arms)} trials, against {design.fixed_sample_pairs * len(comparison.arms)} for "
             f"McNemar's fixed-sample design (sized for independent arms) at alpha {design.alpha} and power "
             f"{design.power} for a difference of "
             f"{design.min_difference} ({len(comparison.comparisons)} declared comparison(s), error controlled "
             "over all of them)."),
        Table(["arm", "policy", "successes", "voids (re-run)",
               *(["placement error, cm (secondary)"] if secondary else [])], rows),
        Para(f"Mapping sealed at the lock, commitment sha256 {comparison.sealed.commitment[:16]}...; "
             + ("revealed (" + ("the run has ended" if sheet.complete else
                                "not blind" if not comparison.blind else "unblinded early, recorded") + ")."
                if revealed else "sealed until the run ends (harness report --unblind reveals it now, recorded).")),
    ]
    blocks.append(Para(null_text(sheet)))
    old = old_rules(sheet)
    if old:
        blocks.append(Para("Locked under older rules, and resumed as locked: " + "; ".join(old) + "."))
    blocks[2:2] = graded_blocks(sheet)   # a graded primary outcome: what it is and what it says
    if secondary:
        blocks.append(Para("Secondary outcome, declared in the stopping rule before trial 1 and never a reason to "
                           "stop: placement error (cm, the distance from the bowl's centre) over each arm's "
                           "successes, mean with its 95% t interval."))
    if traces and traces[0].states and comparison.graded is None:   # the plot draws the success test's e-values
        blocks.append(Figure("comparison_statistic", statistic_plot(sheet, traces),
                             "Each direction's log e-value per block against the efficacy bound (a decision), and the "
                             "futility bound (that direction closes, x; both closed: no difference of that size)."))
    return blocks


def null_text(sheet: Scoresheet) -> str:
    """The hypothesis the decision tests, in the words a user reads, and the power it was sized for."""
    comparison = sheet.locked.require_comparison()
    design = comparison.design
    if comparison.graded is not None:
        return graded_null_text(comparison.graded.outcome.kind, len(comparison.positions),
                                comparison.position_rule is PositionRule.DRAWN, design.alpha)
    if comparison.position_rule is PositionRule.DRAWN:
        null = ("What 'better' means here: the test rejects 'equal average success over the protocol's "
                f"{len(comparison.positions)} start positions' (each block's position drawn at random from them).")
    else:
        null = ("What 'better' means here: the test rejects 'equal success at every one of the protocol's "
                f"{len(comparison.positions)} start positions' (the positions were cycled in order).")
    if design.efficacy is EfficacyRule.MIXTURE:
        test = (f" The test is anytime-valid (a mixture over the discordant odds against Ville's bound): its error "
                f"stays at most alpha {design.alpha} however long the run goes, and its cap gives power "
                f"{design.power} at a difference of {design.min_difference} whatever the dependence between the "
                "arms.")
    else:
        test = (f" The test is a truncated sequential test with binding futility (its bound calibrated to the cap of "
                f"{design.cap}); its power {design.power} assumed independent arms.")
    return null + test


def old_rules(sheet: Scoresheet) -> list[str]:
    """One line for each rule a sheet was locked under that newer sheets no longer use (it resumes as locked)."""
    comparison = sheet.locked.require_comparison()
    lines = []
    if comparison.codes is CodeRule.FLAG_ORDER:
        lines.append("codes in flag order (A is the first policy named, so whoever typed the command knew the "
                     "mapping)")
    if comparison.position_rule is PositionRule.CYCLE:
        lines.append("start positions cycled in the protocol's order (alpha holds only if the arms are equal at "
                     "every position)")
    if comparison.design.futility is FutilityRule.DISCORDANT_SPRT:
        lines.append("futility on discordant pairs only (discordant-sprt)")
    return lines


def declared_secondary(sheet: Scoresheet) -> bool:
    """Whether the locked stopping rule declared placement error a secondary outcome."""
    return SecondaryOutcome.PLACEMENT_ERROR_CM in (sheet.locked.stopping_rule.secondary or [])


class SecondaryJson(BaseModel):
    model_config = ConfigDict(frozen=True)
    n: int = Field(description="this arm's successes with a placement error")
    mean: float | None
    low95: float | None = Field(description="95% t interval for the mean; null with fewer than two values")
    high95: float | None


def placement_secondary(sheet: Scoresheet, scored: list[Attempt]) -> SecondaryJson:
    errors = [e for a in scored if a.label is Label.SUCCESS and (e := sheet.placement_error(a)) is not None]
    found = mean_interval(errors)
    if found is None:
        return SecondaryJson(n=0, mean=None, low95=None, high95=None)
    mean, low, high = found
    return SecondaryJson(n=len(errors), mean=mean, low95=low, high95=high)


def _secondary_text(value: SecondaryJson) -> str:
    if value.mean is None:
        return "no measured successes"
    if value.low95 is None or value.high95 is None:
        return f"{value.mean:.2f} (1 success)"
    return f"{value.mean:.2f} [{value.low95:.2f}, {value.high95:.2f}] over {value.n}"


def comparison_text(blocks: list[Block]) -> str:
    lines = []
    for block in blocks:
        if isinstance(block, Heading | Para):
            lines.append(block.text)
        elif isinstance(block, Table):
            lines.append("  ".join(f"{h:<12}" for h in block.headers))
            lines += ["  ".join(f"{c:<12}" for c in row) for row in block.rows]
    return "\n".join(lines)


class ArmJson(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: str
    policy: str | None = Field(description="the policy's path or built-in name; null while the mapping is sealed")
    fingerprint: str | None = Field(None, description="the policy's files' hash; null while sealed")
    successes: int
    scored: int
    voids: int
    placement_error_cm: SecondaryJson | None = Field(None, description="the declared secondary outcome over this "
                                                                       "arm's successes; null when not declared")


class DeclaredComparisonJson(BaseModel):
    model_config = ConfigDict(frozen=True)
    first: str
    second: str
    decision: str = Field(description="continue, first better, second better, no difference of that size, or cap "
                                      "reached without a decision")
    winner: str | None
    blocks: int = Field(description="blocks (pairs) this comparison used")
    first_only: int = Field(description="pairs where only the first arm succeeded (a graded outcome: where it "
                                        "scored higher)")
    second_only: int
    log_e_first: list[float] | None = Field(description="log e-value for 'first better' after each block; null on "
                                                        "a graded outcome (see graded)")
    log_e_second: list[float] | None
    log_against_first: list[float] | None = Field(description="log evidence against 'first better by "
                                                              "min_difference' after each block (futility closes it "
                                                              "at -log_futility_bound); null on a graded outcome")
    log_against_second: list[float] | None


class BlindComparisonJson(BaseModel):
    """A blind comparison's decision, arms and test (`harness report --json` on a comparison's scoresheet)."""

    model_config = ConfigDict(frozen=True)
    ended: bool
    revealed: bool
    unblinded_early: bool = Field(description="an explicit, recorded unblinding happened while the run was open")
    commitment: str = Field(description="sha256 commitment of the sealed arm mapping, locked before trial 1")
    alpha: float
    power: float
    min_difference: float
    max_trials_per_arm: int
    fixed_sample_trials_per_arm: int = Field(description="McNemar's fixed-sample design at the same alpha and power")
    log_efficacy_bound: float | None = Field(description="the success test's; null on a graded outcome (see "
                                                         "graded.log_efficacy_bound)")
    log_futility_bound: float | None = Field(description="the success test's (negative: evidence against); null on "
                                                         "a graded outcome (see graded.log_futility_bound)")
    futility: str | None = Field(description="paired-betting-mixture (two bets on every pair, concordant ones too, "
                                             "averaged), paired-betting (one bet; a cap sized for it) or "
                                             "discordant-sprt (sheets locked before paired betting); null on a "
                                             "graded outcome")
    secondary: list[str] = Field(description="secondary outcomes declared in the stopping rule (never a stop)")
    null_hypothesis: str = Field(description="what the decision rejects, in words")
    old_rules: list[str] = Field(description="rules this sheet was locked under that newer sheets no longer use "
                                             "(it resumes with them); empty for a sheet locked today")
    arms: list[ArmJson]
    comparisons: list[DeclaredComparisonJson] = Field(description="the decisions; on a graded outcome the e-value "
                                                                  "lists are null (see graded)")
    graded: GradedJson | None = Field(None, description="the graded primary outcome and its test; null for success")


def comparison_json(sheet: Scoresheet, revealed: bool) -> BlindComparisonJson:
    comparison = sheet.locked.require_comparison()
    design = _design(sheet)
    schedule = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    mapping = unseal(comparison.sealed) if revealed else {}
    arms = []
    for code in comparison.arms:
        scored = [a for a in sheet.scored_attempts() if schedule.get(a.trial_index) == code]
        arms.append(ArmJson(
            code=code, policy=mapping[code].ref if revealed else None,
            fingerprint=mapping[code].fingerprint if revealed else None,
            successes=sum(1 for a in scored if a.label is Label.SUCCESS), scored=len(scored),
            voids=sum(1 for a in sheet.attempts if a.label is Label.VOID and schedule.get(a.trial_index) == code),
            placement_error_cm=placement_secondary(sheet, scored) if declared_secondary(sheet) else None))
    on_success = comparison.graded is None
    declared = [DeclaredComparisonJson(
        first=trace.first, second=trace.second, decision=trace.final.decision.value, winner=trace.winner(),
        blocks=trace.final.pairs, first_only=trace.final.first_only, second_only=trace.final.second_only,
        log_e_first=[round(state.log_e(design)[0], 6) for state in trace.states] if on_success else None,
        log_e_second=[round(state.log_e(design)[1], 6) for state in trace.states] if on_success else None,
        log_against_first=[round(state.log_against(design)[0], 6) for state in trace.states] if on_success else None,
        log_against_second=([round(state.log_against(design)[1], 6) for state in trace.states]
                            if on_success else None))
        for trace in sheet.comparison.traces()]
    return BlindComparisonJson(
        ended=sheet.complete, revealed=revealed, unblinded_early=bool(unblindings(sheet)),
        commitment=comparison.sealed.commitment, alpha=design.alpha, power=design.power,
        min_difference=design.min_difference, max_trials_per_arm=design.cap,
        fixed_sample_trials_per_arm=comparison.design.fixed_sample_pairs,
        log_efficacy_bound=design.log_efficacy_bound if on_success else None,
        log_futility_bound=design.log_futility_bound if on_success else None,
        futility=design.futility.value if on_success else None,
        secondary=[o.value for o in sheet.locked.stopping_rule.secondary or []],
        null_hypothesis=null_text(sheet), old_rules=old_rules(sheet), arms=arms, comparisons=declared,
        graded=graded_json(sheet))
