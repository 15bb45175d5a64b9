"""The numbers a user asks first: how often, how it fails, how close."""

from __future__ import annotations

from typing import Any

from harness.models.scoresheet import Scoresheet
from harness.models.stats import describe, wilson_interval
from harness.models.taxonomy import FAILURE_MODES


def summarize(sheet: Scoresheet) -> dict[str, Any]:
    scored = sheet.scored_attempts()
    n = len(scored)
    k = sum(1 for a in scored if a.outcome == "success")
    low, high = wilson_interval(k, n)
    errors = [e for a in scored if a.outcome == "success" and (e := sheet.placement_error(a)) is not None]
    return {
        "scoresheet": str(sheet.path),
        "task": sheet.locked["task"],
        "policy": sheet.locked["policy"],
        "robot": sheet.locked["robot"],
        "trials_planned": sheet.locked["trial_count"],
        "trials_scored": n,
        "success": {"k": k, "n": n, "rate": k / n if n else None, "wilson95": [low, high]},
        "failure_modes": {mode: sum(1 for a in scored if a.failure_mode == mode) for mode in FAILURE_MODES},
        "placement_error_cm": describe(errors),
        "voids": [
            {"trial": a.trial_index, "attempt": a.attempt, "reason": a.void_reason}
            for a in sheet.attempts if a.outcome == "void"
        ],
        "stopped_by_rule": sheet.stopped_by_rule(),
        "lock_sha256": sheet.lock["sha256"],
        "protocol_sha256": sheet.locked["protocol_sha256"],
    }


def format_summary(summary: dict[str, Any]) -> str:
    s = summary["success"]
    lines = [
        f"Scoresheet  {summary['scoresheet']}",
        f"Task        {summary['task']}",
        f"Policy      {summary['policy']['ref']}  ({summary['policy']['fingerprint'][:23]})",
        f"Robot       {summary['robot']}",
        f"Trials      {summary['trials_scored']} scored of {summary['trials_planned']} planned",
    ]
    if s["n"]:
        lines.append(
            f"Success     {s['k']}/{s['n']} = {100 * s['rate']:.1f}%  "
            f"(95% Wilson {100 * s['wilson95'][0]:.1f}-{100 * s['wilson95'][1]:.1f}%)"
        )
    else:
        lines.append("Success     no trials scored yet")
    lines.append("Failures    " + ", ".join(f"{m} {c}" for m, c in summary["failure_modes"].items()))
    err = summary["placement_error_cm"]
    if err:
        lines.append(
            f"Placement   mean {err['mean']:.2f} cm, median {err['median']:.2f} cm, max {err['max']:.2f} cm "
            f"over {err['n']} successes"
        )
    else:
        lines.append("Placement   no measured successes")
    if summary["stopped_by_rule"]:
        lines.append(f"Stopped     by the pre-registered rule: {summary['stopped_by_rule']}")
    voids = summary["voids"]
    lines.append(f"Voids       {len(voids)}")
    lines.extend(f"  trial {v['trial']} attempt {v['attempt']}: {v['reason']}" for v in voids)
    return "\n".join(lines)
