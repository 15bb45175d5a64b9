"""Failure anatomy recomputed from each attempt's recorded trace with the current rules, the sheet untouched.

Why: an anatomy is stored with its attempt when the attempt is recorded, with the rules of that day
(`TrialAnatomy.rules`); when the rules change (issue 37: rules 1 could not see a learned policy's grasp),
a locked scoresheet must not be rewritten, but its report should be able to say what the current rules read
in the same traces. The trace is the evidence folder's `trajectory.parquet` (positions, commands, and since
rules 2 the gripper's load); a simulated attempt recorded before the load was logged gets it from its
`sim_state.npz` (`Trajectory.gripper_loads`). An attempt without a trace keeps its stored anatomy, and the
report says how many did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.anatomy import TrialAnatomy
from harness.models.evidence_audit import evidence_folder_name
from harness.models.protocol import Scene, load_protocol
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.run.anatomy import GraspPoints, anatomy_from_rows
from harness.sim.trajectory import TRAJECTORY_FILE, load_trajectory
from harness.sim.units import GRIPPER_LOAD_KEY

TRACE_FILE = "trajectory.parquet"


@dataclass
class Reanalysis:
    """What a re-analysis changed, in memory: `sheet` is a copy whose final attempts carry the recomputed
    anatomy (never saved); `recomputed` and `kept` count attempts, `kept_why` says why some were not."""

    sheet: Scoresheet
    recomputed: int = 0
    loads_from_state: int = 0
    kept: int = 0
    kept_why: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        why = "; ".join(f"{n} {reason}" for reason, n in self.kept_why.items())
        state = f" ({self.loads_from_state} with the gripper load from the simulator state)" \
            if self.loads_from_state else ""
        kept = f"; {self.kept} kept as stored: {why}" if self.kept else ""
        return f"{self.sheet.path.name}: anatomy recomputed for {self.recomputed} attempts{state}{kept}"


def run_folder_candidates(sheet: Scoresheet, runs: Path | None) -> list[Path]:
    """Where a sheet's evidence folders may be: `runs` as given (a run folder, or the runs root holding one named
    after the sheet), else `runs/<sheet>` beside the current folder or the sheet's folder's parent."""
    name = sheet.path.stem
    if runs is not None:
        return [runs, runs / name]
    return [Path("runs") / name, sheet.path.parent.parent / "runs" / name, sheet.path.parent / "runs" / name]


def evidence_folder(sheet: Scoresheet, attempt: Attempt, runs: Path | None) -> Path | None:
    """The attempt's evidence folder, found from its artifacts or the run folder's naming
    (`trial-NNN-aN`); None when no candidate holds its trace."""
    trial = evidence_folder_name(attempt.trial_index, attempt.attempt)
    candidates = [folder / trial for folder in run_folder_candidates(sheet, runs)]
    recorded = attempt.artifacts.get(TRACE_FILE)
    if recorded and runs is None:
        candidates.insert(0, Path(recorded).parent)
    return next((c for c in candidates if (c / TRACE_FILE).is_file()), None)


def trace_rows(folder: Path) -> tuple[list[dict[str, Any]], bool]:
    """The recorded rows, with the gripper's load from the simulator state when the rows lack it; and whether
    it came from there."""
    import pandas as pd

    path = folder / TRACE_FILE
    try:
        rows = pd.read_parquet(path).to_dict("records")
    except (OSError, ValueError) as exc:
        raise HarnessInputError(path, None, f"not a readable trace ({type(exc).__name__})") from None
    key = f"obs.{GRIPPER_LOAD_KEY}"
    if rows and key not in rows[0] and (folder / TRAJECTORY_FILE).is_file():
        loads = load_trajectory(folder / TRAJECTORY_FILE).gripper_loads()
        if len(loads) == len(rows):
            for row, load in zip(rows, loads, strict=True):
                row[key] = float(load)
            return rows, True
    return rows, False


def _scene(sheet: Scoresheet) -> Scene:
    """The protocol's scene (trained spot, bowl) when its file is still readable, else the default scene."""
    for path in (Path(sheet.locked.protocol_file), sheet.path.parent / Path(sheet.locked.protocol_file).name):
        if path.is_file():
            try:
                return load_protocol(path).scene
            except HarnessInputError:
                break
    return Scene()


def reanalyze(sheet: Scoresheet, runs: Path | None = None, fk: GraspPoints | None = None) -> Reanalysis:
    """Recompute every final attempt's anatomy from its trace; the sheet on disk is never written."""
    from harness.models.scoresheet import Scoresheet as Sheet

    scene = _scene(sheet)
    stall = next((a.anatomy.stall_limit_s for a in sheet.attempts if a.anatomy is not None), 5.0)
    planned = {t.index: (t.dx_cm, t.dy_cm) for t in sheet.locked.trials}
    fk = fk or GraspPoints()
    result = Reanalysis(sheet)
    attempts: list[Attempt] = []
    finals = {id(a) for i in sheet.trial_indices if (a := sheet.final_attempt(i)) is not None}
    for attempt in sheet.attempts:
        if id(attempt) not in finals:
            attempts.append(attempt)
            continue
        anatomy, why, from_state = _recompute(sheet, attempt, runs, fk, scene, stall, planned)
        if anatomy is None:
            result.kept += 1
            result.kept_why[why] = result.kept_why.get(why, 0) + 1
            attempts.append(attempt)
            continue
        result.recomputed += 1
        result.loads_from_state += from_state
        attempts.append(attempt.model_copy(update={"anatomy": anatomy}))
    result.sheet = Sheet(sheet.path, sheet.locked_data, sheet.lock, sheet.settings, attempts, sheet.measurements,
                         sheet.stored)
    return result


def _recompute(sheet: Scoresheet, attempt: Attempt, runs: Path | None, fk: GraspPoints, scene: Scene,
               stall: float, planned: dict[int, tuple[float, float]]) -> tuple[TrialAnatomy | None, str, bool]:
    folder = evidence_folder(sheet, attempt, runs)
    if folder is None:
        return None, "no recorded trace found", False
    rows, from_state = trace_rows(folder)
    start = attempt.measured_start or {}
    if start.get("dx_cm") is not None and start.get("dy_cm") is not None:
        cube = (float(start["dx_cm"]), float(start["dy_cm"]))
    else:
        cube = planned.get(attempt.trial_index, (0.0, 0.0))
    anatomy = anatomy_from_rows(rows, fk, scene.trained_cube_xy_cm, cube, scene.bowl_xy_cm, stall)
    if anatomy is None:
        return None, "an empty trace", False
    return anatomy, "", from_state
