"""One row per trial, joined from a scoresheet's locked plan and its final attempts."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.models.protocol import Protocol, file_sha256, load_protocol
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import TAXONOMY, Label

OUTCOME_COLOURS = {**{label: Label(label).hex for label in TAXONOMY}, "pending": "#9e9e9e"}


@dataclass(frozen=True)
class TrialRow:
    index: int
    dx_cm: float
    dy_cm: float
    label: str                       # success, a failure mode, or pending
    placement_error_cm: float | None
    voids: int
    policy_ms_p50: float | None
    policy_ms_p95: float | None
    missed_deadlines: int | None
    steps: int | None
    placement_uncertainty_cm: float | None = None   # 95 % half-width when the error was measured from pixels
    io_ms_p50: float | None = None                  # robot I/O per step: read + write (sim: rendering, physics)
    io_ms_p95: float | None = None
    busy_ms_mean: float | None = None               # policy + robot I/O per step, mean
    wall_ms_per_step: float | None = None           # the attempt's wall time over its steps
    measured_dxy_cm: tuple[float, float] | None = None   # real arm: where the top camera saw the cube start
    proposed_label: str | None = None                # real arm: the label proposed from evidence

    @property
    def distance_cm(self) -> float:
        """Offset from the trained position: the measured start when the top camera measured it."""
        if self.measured_dxy_cm is not None:
            return math.hypot(*self.measured_dxy_cm)
        return self.planned_distance_cm

    @property
    def planned_distance_cm(self) -> float:
        return math.hypot(self.dx_cm, self.dy_cm)


def trial_rows(sheet: Scoresheet) -> list[TrialRow]:
    rows = []
    voided = Counter(a.trial_index for a in sheet.attempts if a.label is Label.VOID)
    for trial in sheet.locked.trials:
        final = sheet.final_attempt(trial.index)
        voids = voided[trial.index]
        rows.append(TrialRow(
            index=trial.index, dx_cm=trial.dx_cm, dy_cm=trial.dy_cm,
            label=final.label if final else "pending",
            placement_error_cm=sheet.placement_error(final) if final else None,
            voids=voids,
            policy_ms_p50=final.loop.policy_latency_ms_p50 if final else None,
            policy_ms_p95=final.loop.policy_latency_ms_p95 if final else None,
            missed_deadlines=final.loop.missed_deadlines if final else None,
            steps=final.loop.steps if final else None,
            placement_uncertainty_cm=_pixel_uncertainty(sheet, final) if final else None,
            io_ms_p50=final.loop.robot_io_ms_p50 if final else None,
            io_ms_p95=final.loop.robot_io_ms_p95 if final else None,
            busy_ms_mean=1000 / final.loop.achieved_fps if final and final.loop.achieved_fps else None,
            wall_ms_per_step=(1000 * final.duration_s / final.loop.steps
                              if final and final.loop.steps and final.duration_s else None),
            measured_dxy_cm=_measured_start(final),
            proposed_label=str(final.proposal["label"]) if final and final.proposal and final.proposal.get("label")
            else None,   # label None: the evidence disagreed, nothing was proposed
        ))
    return rows


def _measured_start(attempt: Attempt | None) -> tuple[float, float] | None:
    start = attempt.measured_start if attempt else None
    if not start or start.get("dx_cm") is None or start.get("dy_cm") is None:
        return None
    return (float(start["dx_cm"]), float(start["dy_cm"]))


def _pixel_uncertainty(sheet: Scoresheet, attempt: Attempt) -> float | None:
    """The uncertainty of the pixel measurement the placement error comes from (none for the simulator's truth;
    a real arm's error measured at the trial's end carries its own, kept with the proposal)."""
    if attempt.placement_error_cm is not None:
        value = (attempt.proposal or {}).get("uncertainty_cm")
        return float(value) if value is not None else None
    for m in reversed(sheet.measurements):
        if (m.trial_index, m.attempt) == (attempt.trial_index, attempt.attempt):
            return m.uncertainty_cm
    return None


def locked_protocol(sheet: Scoresheet) -> Protocol | None:
    """The protocol the sheet was locked against, if its file is still there and unchanged."""
    path = Path(sheet.locked.protocol_file)
    if not path.is_file() or file_sha256(path) != sheet.locked.protocol_sha256:
        return None
    return load_protocol(path)
