"""Outcome proposals against the simulator's judge, over a finished simulated run of any policy (issue 29).

`benchmarks/proposal_bench.py` measured the agreement on scripted open-loop plays only (the expert, replay,
failures made on purpose). A learned policy fails in its own ways (it hesitates, regrasps, drifts, lets go
late), so this takes a finished simulated run, `harness run ... --no-video` of any policy, and gives the
real-arm proposer, for every scored attempt, exactly what a real arm would have given it:

- the joint positions each control step in LeRobot units: the attempt's state trajectory (`sim_state.npz`)
  converted as the simulated robot reports them. These are the observations the engine saw, all but the
  first (the state before the first action is not in the trajectory; the arm is at its start pose then);
- the final top frame at 640x480: the evidence folder's `final_top.png`, or drawn from the trajectory's
  final frame request (pixel-equal) when it is absent or of another size;
- the bowl rim calibrated once per scene, as `harness rehearse` does: a rendered top frame of the empty
  table (arm at the protocol's start pose) and one with the cube on its trained spot go through
  `harness measure --auto` (its own parser and handler), and the proposer is built from the files it
  wrote by `harness run`'s own code (`app.operator_parts.placement_files`, `run.operator_trial.Proposer`).

The proposal is compared with the judge's label recorded in the scoresheet (voids are not compared).
Prints a confusion table (judge rows, proposal columns) with the agreement per judge label and overall,
as markdown, and the disagreeing attempts with the proposal's reasons; progress and time left on stderr.

Run: .venv/bin/python benchmarks/proposal_agreement.py SCORESHEET [SCORESHEET ...] [--runs-dir RUNS]
     [--protocol PROTOCOL] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.errors import HarnessError, HarnessInputError
from harness.models.protocol import JOINT_NAMES, Protocol, file_sha256, load_protocol
from harness.models.scoresheet import Scoresheet, load_scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import TAXONOMY, Label
from harness.run.operator_trial import Proposer
from harness.run.proposal import so101_grasp_point
from harness.sim.scene import SceneGeometry
from harness.sim.trajectory import Trajectory
from harness.sim.units import from_sim
from harness.sim.world import SimWorld

NO_PROPOSAL = "no proposal"   # the proposer's evidence contradicted itself: nothing proposed
FINAL_SIZE = (640, 480)   # the real arm's top camera as `harness rehearse` opens it (its --camera-size default)


@dataclass(frozen=True)
class Compared:
    """One scored attempt: the judge's label beside the proposal made from a real arm's evidence."""

    sheet: str
    trial: int
    attempt: int
    judge: str
    proposed: str
    reasons: list[str]
    judge_detail: str
    final_frame: str          # "stored" (the folder's final_top.png) or "drawn" (from the trajectory)
    steps_seen: int

    @property
    def agrees(self) -> bool:
        return self.judge == self.proposed


# --- where a run's files are ------------------------------------------------------------------------


def run_root(sheet_path: Path) -> Path:
    """The folder a run was started in: `harness run` writes scoresheets/<name>.yaml and runs/<name>/ there."""
    resolved = sheet_path.resolve()
    return resolved.parent.parent if resolved.parent.name == "scoresheets" else resolved.parent


def run_folder(sheet_path: Path, runs_dir: Path | None) -> Path:
    folder = (runs_dir if runs_dir is not None else run_root(sheet_path) / "runs") / sheet_path.stem
    if not folder.is_dir():
        raise HarnessInputError(folder, "--runs-dir", "no such run folder (name the runs folder the run wrote to)")
    return folder


def locked_protocol(sheet: Scoresheet, sheet_path: Path, override: Path | None) -> tuple[Path, Protocol]:
    """The protocol the sheet was locked against (its scene is what the proposer measures against): the given
    file, else the locked path as written, from here or from the folder the run was started in; its bytes
    must be the locked ones."""
    locked = Path(sheet.locked.protocol_file)
    candidates = [override] if override is not None else [locked, run_root(sheet_path) / locked]
    for path in candidates:
        if path.is_file():
            if file_sha256(path) != sheet.locked.protocol_sha256:
                raise HarnessInputError(path, "protocol_sha256", f"not the protocol {sheet_path} was locked "
                                                                 "against (its bytes changed)")
            return path, load_protocol(path)
    raise HarnessInputError(candidates[-1], "--protocol", f"not found: name the protocol {sheet_path} was "
                                                          "locked against")


def check_scene(protocol: Protocol, protocol_path: Path, geometry: SceneGeometry) -> None:
    """The proposer measures against the protocol's bowl and cube; the trajectory's table must have them."""
    from harness.sim.scene import scene_mismatch

    mismatch = scene_mismatch(protocol.scene, geometry)
    if mismatch is not None:
        field, shown = mismatch
        raise HarnessInputError(protocol_path, field, f"the run's simulated table has {shown} cm")


def trial_trajectory(folder: Path) -> Trajectory:
    from harness.run.replay import trajectory_of

    return trajectory_of(folder)


# --- what a real arm gives the proposer ---------------------------------------------------------------


def observed_joints(trajectory: Trajectory, world: SimWorld) -> list[dict[str, float]]:
    """The joint positions (LeRobot units) the loop observed at steps 1..S-1: the state after each step but
    the last, converted as the simulated robot reports it."""
    arm = trajectory.qpos[:-1, world.qpos_idx]
    return [{name: from_sim(name, float(v)) for name, v in zip(JOINT_NAMES, row, strict=True)} for row in arm]


def final_top_frame(folder: Path, trajectory: Trajectory, world: SimWorld) -> tuple[np.ndarray, str]:
    """The final top frame at 640x480: the stored one, or drawn from the trajectory when it is not there at
    that size."""
    stored = folder / "final_top.png"
    if stored.is_file():
        with Image.open(stored) as image:
            if image.size == FINAL_SIZE:
                return np.asarray(image.convert("RGB")), "stored"
    return world.render_request(trajectory.final_request("top", FINAL_SIZE)), "drawn"


def calibrated_proposer(world: SimWorld, protocol: Protocol, folder: Path) -> Proposer:
    """The desk's two photos rendered in the run's scene, `harness measure --auto` on them, and the proposer
    `harness run --bowl-calibration ... --trained-spot ...` builds from its files."""
    from harness.app.measure_command import run_measure
    from harness.app.operator_parts import placement_files
    from harness.app.rehearse_command import RehearsalFiles, desk_measure
    from harness.app.rehearse_operator import OFF_TABLE_CM

    files = RehearsalFiles(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x, y = protocol.scene.trained_cube_xy_cm
    world.set_arm(protocol.start_pose)
    world.place_cube(((x + OFF_TABLE_CM[0]) / 100, (y + OFF_TABLE_CM[1]) / 100), 0.0)
    Image.fromarray(world.render("top", *FINAL_SIZE)).save(files.empty_table)
    world.place_cube((x / 100, y / 100), 0.0)
    Image.fromarray(world.render("top", *FINAL_SIZE)).save(files.trained_spot)
    with contextlib.redirect_stdout(sys.stderr):   # stdout carries the tables
        if run_measure(desk_measure(protocol, files, files.trained_spot, calibrate=True)) != 0:
            raise HarnessInputError(files.trained_spot, None, "the cube on its trained spot was not measured")
    from harness.models.run_request import PlacementRequest

    placement = placement_files(PlacementRequest(bowl_calibration=files.calibration, trained_spot=files.trained_spot),
                                protocol)
    if placement is None:
        raise HarnessInputError(files.calibration, None, "no bowl calibration was written")
    return Proposer(placement.view, so101_grasp_point(), fps=protocol.fps)


# --- the comparison -----------------------------------------------------------------------------------


@dataclass
class Sheet:
    path: Path
    sheet: Scoresheet
    folder: Path
    protocol_path: Path
    protocol: Protocol

    @property
    def scored(self) -> list[Attempt]:
        return [a for a in self.sheet.attempts if a.outcome != Label.VOID]

    @property
    def voids(self) -> int:
        return len(self.sheet.attempts) - len(self.scored)


def open_sheet(path: Path, runs_dir: Path | None, protocol: Path | None) -> Sheet:
    if not path.is_file():
        raise HarnessInputError(path, "SCORESHEET", "no such scoresheet")
    sheet = load_scoresheet(path)
    if sheet.locked.robot != "sim":
        raise HarnessInputError(path, "robot", f"{sheet.locked.robot}: only a simulated run has the judge and the "
                                               "state trajectories this compares")
    protocol_path, loaded = locked_protocol(sheet, path, protocol)
    return Sheet(path, sheet, run_folder(path, runs_dir), protocol_path, loaded)


class Proposers:
    """One world and one calibrated proposer per simulated table (a run's trials share one)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.built: dict[str, tuple[SimWorld, Proposer]] = {}

    def get(self, trajectory: Trajectory, sheet: Sheet) -> tuple[SimWorld, Proposer]:
        geometry = trajectory.geometry
        key = json.dumps([asdict(geometry), sheet.protocol.scene.model_dump(mode="json"),
                          sheet.protocol.start_pose], sort_keys=True, default=str)
        if key not in self.built:
            check_scene(sheet.protocol, sheet.protocol_path, geometry)
            world = SimWorld(geometry, control_fps=int(trajectory.meta["control_fps"]))
            proposer = calibrated_proposer(world, sheet.protocol, self.workdir / f"desk-{len(self.built) + 1}")
            self.built[key] = (world, proposer)
        return self.built[key]

    def close(self) -> None:
        for world, _ in self.built.values():
            world.close()


def compare(sheets: list[Sheet], workdir: Path, out: Any = sys.stderr) -> list[Compared]:
    """Every scored attempt's proposal beside its judge's label, with progress and time left on `out`."""
    work = [(s, a) for s in sheets for a in s.scored]
    for s in sheets:   # every evidence folder there before the first proposal is made
        for a in s.scored:
            folder = s.folder / f"trial-{a.trial_index:03d}-a{a.attempt}"
            if not folder.is_dir():
                raise HarnessInputError(folder, None, "no evidence folder for this scored attempt")
    proposers = Proposers(workdir)
    results: list[Compared] = []
    proposing_s = 0.0   # the time left counts proposals, not the calibration each new table needs
    try:
        for k, (s, a) in enumerate(work, 1):
            folder = s.folder / f"trial-{a.trial_index:03d}-a{a.attempt}"
            t0 = time.perf_counter()
            trajectory = trial_trajectory(folder)
            tables = len(proposers.built)
            world, proposer = proposers.get(trajectory, s)
            if len(proposers.built) > tables:
                print(f"calibrated the bowl rim on {s.path.stem}'s simulated table", file=out, flush=True)
                t0 = time.perf_counter()
            trace = proposer.trace()
            joints = observed_joints(trajectory, world)
            for observation in joints:
                trace.see(observation)
            frame, source = final_top_frame(folder, trajectory, world)
            proposal = proposer.propose(trace, frame)
            proposed = proposal.label.value if proposal.label is not None else NO_PROPOSAL
            result = Compared(s.path.stem, a.trial_index, a.attempt, a.label, proposed,
                              [r.value for r in proposal.reasons],
                              a.judge.detail if a.judge is not None else "", source,
                              len(joints))
            results.append(result)
            proposing_s += time.perf_counter() - t0
            left = proposing_s / k * (len(work) - k)
            print(f"[{k:>4}/{len(work)}] {s.path.stem} trial {a.trial_index:>3} a{a.attempt}: judge {a.label}, "
                  f"proposed {result.proposed}{'' if result.agrees else '  DISAGREE'}"
                  f"  (about {int(left // 60)} min {int(left % 60):02d} s left)", file=out, flush=True)
    finally:
        proposers.close()
    return results


# --- the tables ---------------------------------------------------------------------------------------


def markdown(results: list[Compared], sheets: list[Sheet]) -> str:
    labels = list(TAXONOMY)
    columns = [*labels, NO_PROPOSAL]   # the proposer refused: its evidence disagreed
    confusion = Counter((r.judge, r.proposed) for r in results)
    lines = []
    for s in sheets:
        planned = len(s.sheet.locked.trials)
        done = "" if s.sheet.complete else f" (the run is not finished: {planned - len(s.sheet.pending_trials())} " \
                                            f"of {planned} trials scored)"
        lines.append(f"- `{s.path}`: policy `{s.sheet.locked.policy.ref}`, protocol `{s.protocol_path}`, "
                     f"{len(s.scored)} scored attempt{'s' * (len(s.scored) != 1)}{done} compared, "
                     f"{s.voids} void{'s' * (s.voids != 1)} not compared")
    lines += ["", "| judge \\ proposed | " + " | ".join(columns) + " | agreement |",
              "|---|" + "---:|" * (len(columns) + 1)]
    for judge in labels:
        row = [confusion[(judge, p)] for p in columns]
        n = sum(row)
        share = f"{confusion[(judge, judge)]}/{n}" if n else "-"
        lines.append(f"| {judge} | " + " | ".join(str(c) for c in row) + f" | {share} |")
    agreed = sum(r.agrees for r in results)
    total = len(results)
    lines.append("")
    lines.append(f"Overall agreement {agreed}/{total}" + (f" = {100 * agreed / total:.0f}%" if total else ""))
    false_success = sum(r.proposed == Label.SUCCESS and r.judge != Label.SUCCESS for r in results)
    missed_success = sum(r.judge == Label.SUCCESS and r.proposed != Label.SUCCESS for r in results)
    lines.append(f"Success proposed for a judged failure: {false_success}; a judged success proposed as a "
                 f"failure: {missed_success}")
    drawn = sum(r.final_frame == "drawn" for r in results)
    lines.append(f"Final frames: {total - drawn} stored, {drawn} drawn from the trajectory")
    disagree = [r for r in results if not r.agrees]
    if disagree:
        lines += ["", "Disagreements:", "", "| sheet | trial | attempt | judge | proposed | proposal's reasons | "
                  "judge's detail |", "|---|---:|---:|---|---|---|---|"]
        for r in disagree:
            lines.append(f"| {r.sheet} | {r.trial} | {r.attempt} | {r.judge} | {r.proposed} | "
                         f"{'; '.join(r.reasons)} | {r.judge_detail} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scoresheets", nargs="+", metavar="SCORESHEET", help="a finished simulated run's scoresheet")
    parser.add_argument("--runs-dir", help="the runs folder holding runs/<sheet name>/ (default: the runs folder "
                                           "beside the scoresheet's scoresheets/ folder)")
    parser.add_argument("--protocol", help="the protocol the sheets were locked against (default: the locked path)")
    parser.add_argument("--json", help="also write every compared attempt to this JSON file")
    args = parser.parse_args(argv)
    try:
        runs_dir = Path(args.runs_dir) if args.runs_dir else None
        protocol = Path(args.protocol) if args.protocol else None
        sheets = [open_sheet(Path(p), runs_dir, protocol) for p in args.scoresheets]
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="proposal-agreement-") as tmp:
            results = compare(sheets, Path(tmp))
        took = time.perf_counter() - began
    except HarnessError as err:
        print(err.cli_message(), file=sys.stderr)
        return err.exit_code
    print(f"Proposal vs judge over {len(results)} scored attempts ({took:.0f} s):\n")
    print(markdown(results, sheets))
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(r), "agrees": r.agrees} for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
