"""The numbers a user asks first: how often, how it fails, how close.

`RunSummary` is the head of what `harness report --json` prints for a run (`reports.analysis.RunAnalysis`
adds the rest), inside a `ReportJson` envelope whose `schema` names the version (`harness.report/1`);
docs/report-json.md holds its JSON Schema.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from harness.models.locked import LockedPolicy
from harness.models.scoresheet import Scoresheet
from harness.models.stats import describe, wilson_interval
from harness.models.taxonomy import FAILURE_MODES, Label

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


def summarize(sheet: Scoresheet) -> RunSummary:
    scored = sheet.scored_attempts()
    n = len(scored)
    k = sum(1 for a in scored if a.label is Label.SUCCESS)
    low, high = wilson_interval(k, n)
    errors = [e for a in scored if a.label is Label.SUCCESS and (e := sheet.placement_error(a)) is not None]
    described = describe(errors)
    locked = sheet.locked
    return RunSummary(
        scoresheet=str(sheet.path),
        task=locked.task,
        policy=locked.policy,
        robot=locked.robot,
        trials_planned=locked.trial_count,
        trials_scored=n,
        success=SuccessRate(k=k, n=n, rate=k / n if n else None, wilson95=(low, high)),
        failure_modes={mode: sum(1 for a in scored if a.failure_mode == mode) for mode in FAILURE_MODES},
        placement_error_cm=PlacementError(**described) if described else None,
        voids=[VoidRow(trial=a.trial_index, attempt=a.attempt, reason=a.void_reason)
               for a in sheet.attempts if a.label is Label.VOID],
        stopped_by_rule=sheet.stopped_by_rule(),
        lock_sha256=sheet.lock["sha256"],
        protocol_sha256=locked.protocol_sha256,
    )


def format_summary(summary: RunSummary) -> str:
    s = summary.success
    lines = [
        f"Scoresheet  {summary.scoresheet}",
        f"Task        {summary.task}",
        f"Policy      {summary.policy.ref}  ({summary.policy.fingerprint[:23]})",
        f"Robot       {summary.robot}",
        f"Trials      {summary.trials_scored} scored of {summary.trials_planned} planned",
    ]
    if s.n and s.rate is not None:
        lines.append(
            f"Success     {s.k}/{s.n} = {100 * s.rate:.1f}%  "
            f"(95% Wilson {100 * s.wilson95[0]:.1f}-{100 * s.wilson95[1]:.1f}%)"
        )
    else:
        lines.append("Success     no trials scored yet")
    lines.append("Failures    " + ", ".join(f"{m} {c}" for m, c in summary.failure_modes.items()))
    err = summary.placement_error_cm
    if err:
        lines.append(
            f"Placement   mean {err.mean:.2f} cm, median {err.median:.2f} cm, max {err.max:.2f} cm "
            f"over {err.n} successes"
        )
    else:
        lines.append("Placement   no measured successes")
    if summary.stopped_by_rule:
        lines.append(f"Stopped     by the pre-registered rule: {summary.stopped_by_rule}")
    lines.append(f"Voids       {len(summary.voids)}")
    lines.extend(f"  trial {v.trial} attempt {v.attempt}: {v.reason}" for v in summary.voids)
    return "\n".join(lines)
