"""The numbers a user asks first: how often, how it fails, how close.

`RunSummary` is the head of what `harness report --json` prints for a run (`reports.analysis.RunAnalysis`
adds the rest), inside a `ReportJson` envelope whose `schema` names the version (`harness.report/1`);
docs/report-json.md holds its JSON Schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from harness.models.locked import LockedPolicy
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import FAILURE_MODES, Label
from harness.stats.estimates import describe, wilson_interval

REPORT_SCHEMA: Final = "harness.report/1"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuccessRate(_Frozen):
    k: int = Field(description="successful trials")
    n: int = Field(description="scored trials (voids excluded)")
    rate: float | None = Field(description="k/n; null before any trial is scored")
    wilson95: tuple[float, float] = Field(description="95% Wilson score interval for the rate")


class PlacementError(_Frozen):
    n: int = Field(description="successes with a placement error (simulator truth or `harness measure`)")
    mean: float
    median: float
    max: float


class VoidRow(_Frozen):
    trial: int
    attempt: int
    reason: str | None


class ArmSummary(_Frozen):
    """One arm of a blind comparison, named by its code only (which policy it is stays sealed while blind)."""

    code: str = Field(description="the arm's code, A, B, ...")
    success: SuccessRate
    failure_modes: dict[str, int] = Field(description="this arm's scored failures per failure mode")
    placement_error_cm: PlacementError | None = Field(description="over this arm's successes; null when none")
    voids: int = Field(description="this arm's voided attempts (each run again)")


class RunSummary(_Frozen):
    scoresheet: str
    task: str
    policy: LockedPolicy
    robot: str
    trials_planned: int
    trials_scored: int
    success: SuccessRate
    failure_modes: dict[str, int] = Field(description="scored failures per failure mode, every mode listed")
    placement_error_cm: PlacementError | None = Field(description="over successes; null when none is measured")
    voids: list[VoidRow]
    stopped_by_rule: str | None = Field(description="why the pre-registered stopping rule ended the run early")
    lock_sha256: str
    protocol_sha256: str
    arms: list[ArmSummary] | None = Field(None, description="a blind comparison: each arm's own tally by its code "
                                                            "(the run-wide figures above mix the arms); null for "
                                                            "a single policy's run")


def _success(scored: list[Attempt]) -> SuccessRate:
    n = len(scored)
    k = sum(1 for a in scored if a.label is Label.SUCCESS)
    low, high = wilson_interval(k, n)
    return SuccessRate(k=k, n=n, rate=k / n if n else None, wilson95=(low, high))


def _placement(sheet: Scoresheet, scored: list[Attempt]) -> PlacementError | None:
    described = describe([e for a in scored if a.label is Label.SUCCESS
                          and (e := sheet.placement_error(a)) is not None])
    return PlacementError(**described) if described else None


def arm_summaries(sheet: Scoresheet) -> list[ArmSummary] | None:
    """Each arm's tally by code, for a blind comparison's sheet (None for a single policy's)."""
    comparison = sheet.locked.comparison
    if comparison is None:
        return None
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    arms = []
    for code in comparison.arms:
        scored = [a for a in sheet.scored_attempts() if arm_of.get(a.trial_index) == code]
        arms.append(ArmSummary(
            code=code, success=_success(scored),
            failure_modes={mode: sum(1 for a in scored if a.failure_mode == mode) for mode in FAILURE_MODES},
            placement_error_cm=_placement(sheet, scored),
            voids=sum(1 for a in sheet.attempts if a.label is Label.VOID and arm_of.get(a.trial_index) == code)))
    return arms


def summarize(sheet: Scoresheet) -> RunSummary:
    scored = sheet.scored_attempts()
    n = len(scored)
    locked = sheet.locked
    return RunSummary(
        scoresheet=str(sheet.path),
        task=locked.task,
        policy=locked.policy,
        robot=locked.robot,
        trials_planned=locked.trial_count,
        trials_scored=n,
        success=_success(scored),
        failure_modes={mode: sum(1 for a in scored if a.failure_mode == mode) for mode in FAILURE_MODES},
        placement_error_cm=_placement(sheet, scored),
        voids=[VoidRow(trial=a.trial_index, attempt=a.attempt, reason=a.void_reason)
               for a in sheet.attempts if a.label is Label.VOID],
        stopped_by_rule=sheet.stopped_by_rule(),
        lock_sha256=sheet.lock["sha256"],
        protocol_sha256=locked.protocol_sha256,
        arms=arm_summaries(sheet),
    )


def _success_text(s: SuccessRate) -> str:
    if not s.n or s.rate is None:
        return "no trials scored yet"
    return f"{s.k}/{s.n} = {100 * s.rate:.1f}%  (95% Wilson {100 * s.wilson95[0]:.1f}-{100 * s.wilson95[1]:.1f}%)"


def _placement_text(err: PlacementError | None) -> str:
    if not err:
        return "no measured successes"
    return (f"mean {err.mean:.2f} cm, median {err.median:.2f} cm, max {err.max:.2f} cm over {err.n} "
            f"success{'' if err.n == 1 else 'es'}")


def format_summary(summary: RunSummary) -> str:
    s = summary.success
    lines = [
        f"Scoresheet  {summary.scoresheet}",
        f"Task        {summary.task}",
        f"Policy      {summary.policy.ref}  ({summary.policy.fingerprint[:23]})",
        f"Robot       {summary.robot}",
        f"Trials      {summary.trials_scored} scored of {summary.trials_planned} planned",
    ]
    if summary.arms is not None:   # a comparison: one line per arm, by code (the arms never mixed in one figure)
        columns: list[tuple[str, Callable[[ArmSummary], str]]] = [
            ("Success", lambda arm: _success_text(arm.success)),
            ("Failures", lambda arm: ", ".join(f"{m} {c}" for m, c in arm.failure_modes.items())),
            ("Placement", lambda arm: _placement_text(arm.placement_error_cm))]
        for label, text in columns:
            lines += [f"{label if i == 0 else '':<12}{arm.code}: {text(arm)}" for i, arm in enumerate(summary.arms)]
    else:
        lines.append(f"Success     {_success_text(s)}")
        lines.append("Failures    " + ", ".join(f"{m} {c}" for m, c in summary.failure_modes.items()))
        lines.append(f"Placement   {_placement_text(summary.placement_error_cm)}")
    if summary.stopped_by_rule:
        lines.append(f"Stopped     by the pre-registered rule: {summary.stopped_by_rule}")
    lines.append(f"Voids       {len(summary.voids)}")
    lines.extend(f"  trial {v.trial} attempt {v.attempt}: {v.reason}" for v in summary.voids)
    return "\n".join(lines)
