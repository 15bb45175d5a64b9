"""`harness rehearse`: the whole real-arm flow on the emulated arm, through the commands a desk uses.

A person with a real SO-101 makes two files before the first trial (the bowl's rim calibration from a
top-camera photo of the empty table, and a photo with the cube on its trained spot), runs
`harness run --robot so101 --bowl-calibration ... --trained-spot ...` and, after it, `harness measure`
on the run's folder. A rehearsal does exactly that, on `harness emulate-bus --sim`'s arm and cameras:

1. the emulated servos drive the simulated arm, its cameras served as on `emulate-bus --sim`, all in a process
   of their own (`emulator.rig_process`: the servos answer whatever the policy does to this one's interpreter lock);
2. LeRobot's SO-101 follower (the same one `harness run` connects) takes the arm to the protocol's start
   pose; its top camera photographs the empty table and the cube on its trained spot;
3. `harness measure --auto` (its handler, given its `MeasureRequest`) calibrates the rim on the empty table and
   measures the trained spot, writing the calibration into the rehearsal's folder;
4. `harness run --robot so101` (its `RunRequest`: the rehearsal's run flags with the desk's robot, port,
   cameras and files over them, run by `run_request`) runs the trials: guided placement, the policy, the
   proposal, the score, written to a normal locked scoresheet and runs folder;
5. `harness measure` on that runs folder records each trial's final placement in the scoresheet.

Only the operator is the rehearsal's own (`app.rehearse_operator`): a person typing the emulator's
console commands, or a scripted one for CI. Nothing here re-implements a step; each is the command's.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from harness.errors import HarnessInputError, StartPoseMissed
from harness.models.frame_size import parse_size
from harness.models.measure_request import MeasureRequest
from harness.models.protocol import Protocol, load_protocol
from harness.models.reality_gap import RealityGap, parse_gap
from harness.models.run_request import RUN_FLAGS, RunRequest, WorkersRequest, check_policy_refs
from harness.models.run_settings import RobotKind
from harness.run.clock import Clock, MonotonicClock
from harness.scratch import make as make_scratch
from harness.scratch import remove as remove_scratch

ROBOT_ID = "emulated_follower"   # the emulated arm's calibration (calibration/emulated_follower.json)
# the `harness run` settings a rehearsal decides itself (the emulated desk's); it takes every other run flag
REHEARSAL_OWNS = ("protocol", "policy", "robot", "port", "robot_id", "camera", "bowl_calibration", "trained_spot",
                  "scoresheet", "runs_dir", "resume", "headless", "realtime", "inject_dropout", "workers",
                  "no_driver_worker", "address", "ray_dashboard")


class OperatorKind(StrEnum):
    """Who places the cube and scores: a person at the terminal, or the scripted operator (CI)."""

    PERSON = "person"
    SCRIPTED = "scripted"


@dataclass(frozen=True)
class RehearsalFiles:
    """What a desk makes before its first trial, in the rehearsal's folder."""

    folder: Path

    @property
    def empty_table(self) -> Path:
        return self.folder / "empty_table.png"

    @property
    def trained_spot(self) -> Path:
        return self.folder / "trained_spot.png"

    @property
    def calibration(self) -> Path:
        return self.folder / "bowl_top.yaml"   # and bowl_top.png beside it, as `harness measure` writes


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = parse_size(text, example="640x480")
    except ValueError as exc:
        raise HarnessInputError(None, "--camera-size", str(exc)) from None
    if not (64 <= width <= 1920 and 48 <= height <= 1080):
        raise HarnessInputError(None, "--camera-size", f"'{text}': 64x48 .. 1920x1080")
    return width, height


def policy_cameras(policy: Path) -> list[str]:
    """The robot's cameras a LeRobot checkpoint reads (its config's `observation.images.*`, renamed back through
    the rename map it was trained with; SmolVLA's padded cameras left blank, as `harness run` leaves them), and
    always `top`, which the placement guide and the proposals watch. Unreadable: both simulated cameras (the run
    then says)."""
    from harness.policies.lerobot_policy import (
        EMPTY_CAMERA_PREFIX,
        IMAGE_PREFIX,
        normalize_rename_map,
        saved_rename_map,
    )

    try:
        config = json.loads((policy / "config.json").read_text())
        features = config.get("input_features") or {}
        inverse = {v: k for k, v in normalize_rename_map(saved_rename_map(policy)).items()}
        pads = bool(inverse) and (config.get("empty_cameras") or 0) > 0
        names = {inverse.get(k, k).removeprefix(IMAGE_PREFIX) for k in features
                 if k.startswith(IMAGE_PREFIX) and not k.startswith(EMPTY_CAMERA_PREFIX)
                 and not (pads and k not in inverse)}
    except (OSError, ValueError, AttributeError, TypeError):
        names = {"wrist"}
    return sorted(names | {"top"})


def check_scene(protocol: Protocol, protocol_path: Path) -> None:
    """The emulated table is the simulator's default one; a protocol laid out differently cannot be rehearsed
    on it (its guide and proposals would measure against a bowl where there is none)."""
    from harness.sim.scene import SceneGeometry, scene_mismatch

    mismatch = scene_mismatch(protocol.scene, SceneGeometry())
    if mismatch is not None:
        field, shown = mismatch
        raise HarnessInputError(protocol_path, field, f"the emulated table has {shown} cm; a rehearsal needs "
                                                      "the protocol's scene to match it")


def fresh_frame(camera: Any, frames: int = 3) -> np.ndarray:
    """A frame drawn after the scene last changed: the camera's next few, the last kept."""
    frame = camera.read()
    for _ in range(frames - 1):
        frame = camera.read()
    return np.asarray(frame)


def photograph_desk(rig: Any, protocol: Protocol, camera_source: str, files: RehearsalFiles,
                    out: Any = None, clock: Clock | None = None) -> None:
    """Steps 1-2 of a desk: the arm at its start pose (LeRobot's follower, as `harness run` connects it, moved
    and checked by the run's own `ArmMotion`), a top photo of the cleared table and one with the cube on its
    trained spot. Torque is off again on every way out."""
    from harness.app.parts import guard_follower
    from harness.robots.so101 import make_so101_follower
    from harness.run.arm_motion import ArmMotion

    robot = make_so101_follower(rig.port, {"top": camera_source}, fps=protocol.fps, robot_id=ROBOT_ID)
    robot.connect()
    try:
        motion = ArmMotion(guard_follower(robot), protocol.fps, clock or MonotonicClock(), paced=True)
        motion.move_to(protocol.start_pose, 2.0)
        try:
            motion.verify_start_pose(protocol.start_pose, settle_s=5.0)
        except StartPoseMissed as missed:
            raise HarnessInputError(None, "start_pose",
                                    f"the emulated arm did not reach it: {missed.detail}") from missed
        camera = robot.cameras["top"]
        from harness.app.rehearse_operator import OFF_TABLE_CM

        rig.place_cube(*OFF_TABLE_CM)
        files.folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(fresh_frame(camera)).save(files.empty_table)
        rig.place_cube(0.0, 0.0, 0.0)
        Image.fromarray(fresh_frame(camera)).save(files.trained_spot)
        rig.place_cube(*OFF_TABLE_CM)   # the run starts on a cleared table (its empty-scene reference)
    finally:
        with suppress(Exception):
            robot.release_torque()
        with suppress(Exception):
            robot.disconnect()
    print(f"photographed the empty table ({files.empty_table}) and the cube on its trained spot "
          f"({files.trained_spot})", file=out or sys.stdout, flush=True)


def say_command(argv: Sequence[str], out: Any = None) -> None:
    """`out` is looked up when called (None: the stdout of that moment), never bound when this module loads."""
    print("$ harness " + shlex.join(argv), file=out or sys.stdout, flush=True)


@dataclass(frozen=True)
class Rehearsal:
    """One rehearsal's settings, checked before the emulator starts."""

    protocol_path: Path
    protocol: Protocol
    policies: tuple[Path, ...]   # two or more: a blind comparison, rehearsed as the operator will see it
    operator: OperatorKind
    files: RehearsalFiles
    scoresheet: Path
    runs_dir: Path
    size: tuple[int, int]
    placement_error_cm: float
    seed: int
    run: RunRequest   # the rehearsal's run flags; `desk_request` puts the desk's own settings over them
    resume: bool = False   # continue the rehearsal's scoresheet with the desk's files it already made
    gap: RealityGap = field(default_factory=RealityGap)   # how the emulated arm differs from the twin (`--gap`)


def plan_rehearsal(args: argparse.Namespace) -> Rehearsal:
    """Every flag checked, nothing written: bad input is one line and exit 2."""
    from harness.app.build import check_policy_fits_robot, check_run_request
    from harness.app.sheet import _slug

    protocol_path = Path(args.protocol)
    protocol = load_protocol(protocol_path)
    check_scene(protocol, protocol_path)
    refs = [args.policy] if isinstance(args.policy, str) else list(args.policy)
    check_policy_refs(refs)
    for ref in refs:
        check_policy_fits_robot(ref, RobotKind.SO101, emulated_truth=True)   # the expert reads the emulator
        if not Path(ref).is_dir() and not is_expert(ref):
            raise HarnessInputError(ref, "--policy", "not a folder (a LeRobot pretrained_model folder)")
    policies = tuple(Path(ref) for ref in refs)
    size = _size(args.camera_size)
    error = args.placement_error_cm
    if not (math.isfinite(error) and 0.0 <= error <= 5.0):
        raise HarnessInputError(None, "--placement-error-cm", f"{error}: must be within 0..5 cm")
    passed = {dest: value for dest, value in vars(args).items() if dest in RUN_FLAGS and dest not in REHEARSAL_OWNS}
    run = RunRequest.from_flags(passed | {"protocol": protocol_path})
    check_run_request(run)
    operator = OperatorKind(args.operator)
    if operator is OperatorKind.PERSON and not sys.stdin.isatty():
        raise HarnessInputError(None, "--operator", "person needs a terminal to type at; use --operator scripted")
    for policy in policies:
        if not is_expert(policy):
            check_policy_folder(policy)
    gap = parse_gap(getattr(args, "gap", None))
    # a comparison's names say only that it is one: its sheet and folders must not name a policy
    name = f"{protocol_path.stem}-{'comparison' if len(policies) > 1 else _slug(str(policies[0]))}-rehearsal"
    name += f"-gap-{gap.slug()}" if not gap.none else ""
    scoresheet = Path("scoresheets") / f"{name}.yaml"
    folder = Path(args.rehearsal_dir) if args.rehearsal_dir else Path("rehearsals") / name
    if folder.exists() and not folder.is_dir():
        raise HarnessInputError(folder, "--rehearsal-dir", "is a file, not a folder")
    files = RehearsalFiles(folder)
    resume = bool(getattr(args, "resume", False))
    if scoresheet.exists() and not resume:
        raise HarnessInputError(scoresheet, None, "this rehearsal already has a scoresheet; pass --resume to "
                                                  "continue it, or move it away to rehearse again")
    if resume:
        if not scoresheet.exists():
            raise HarnessInputError(scoresheet, "--resume", "no scoresheet to resume: rehearse without --resume")
        missing = [p.name for p in (files.calibration, files.trained_spot) if not p.is_file()]
        if missing:
            raise HarnessInputError(folder, "--resume", f"the desk's {', '.join(missing)} is missing: the rehearsal "
                                                        "it resumes made it; pass the same --rehearsal-dir")
    return Rehearsal(protocol_path, protocol, policies, operator, files, scoresheet, Path("runs"),
                     size, error, args.seed, run, resume, gap)


def check_policy_folder(policy: Path) -> None:
    """A LeRobot pretrained_model folder, and one whose cameras the emulated arm has, refused in one line before
    anything starts or is written: its config.json names a policy type LeRobot knows, its weights are there."""
    from harness.sim.config_sim_camera import SIM_CAMERAS

    config_path = policy / "config.json"
    try:
        config = json.loads(config_path.read_text())
        kind = config["type"]
    except FileNotFoundError:
        raise HarnessInputError(policy, "--policy", "not a LeRobot policy folder (no config.json)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessInputError(config_path, "type", f"not a LeRobot policy config ({type(exc).__name__})") from None
    from lerobot.policies.factory import get_policy_class

    try:
        get_policy_class(kind)
    except (ValueError, ImportError, NotImplementedError, TypeError):
        raise HarnessInputError(config_path, "type", f"{kind!r} is not a policy type LeRobot knows") from None
    if not (policy / "model.safetensors").is_file():
        raise HarnessInputError(policy, "--policy", "no model.safetensors: not a saved LeRobot policy")
    unknown = [name for name in policy_cameras(policy) if name not in SIM_CAMERAS]
    if unknown:
        raise HarnessInputError(policy, "input_features", f"reads camera {', '.join(unknown)}, which the emulated arm "
                                f"does not have ({', '.join(SIM_CAMERAS)}); a checkpoint trained with a rename map "
                                "(lerobot-train --rename_map) names the robot's cameras")


def desk_request(plan: Rehearsal, port: str, camera_source: str) -> RunRequest:
    """The run on the emulated desk: the rehearsal's run flags with what the rehearsal decides over them."""
    return plan.run.updated(
        protocol=plan.protocol_path, policies=tuple(str(p) for p in plan.policies), scoresheet=plan.scoresheet,
        runs_dir=plan.runs_dir, headless=True, resume=plan.resume, realtime=False, inject_dropout=None,
        workers=WorkersRequest().model_dump(),
        robot={"kind": RobotKind.SO101, "port": port, "robot_id": ROBOT_ID,
               "cameras": {name: camera_source for name in run_cameras(plan.policies)}},
        placement={"bowl_calibration": plan.files.calibration, "trained_spot": plan.files.trained_spot})


def desk_measure(protocol: Protocol, files: RehearsalFiles, inputs: Path, calibrate: bool) -> MeasureRequest:
    """`harness measure` as a desk runs it with the protocol's bowl and cube: `calibrate`, the rim found on the
    empty table and saved into the desk's folder (then the trained spot measured); else that calibration used
    on a run's folder."""
    return MeasureRequest(inputs=(str(inputs),), bowl_cm=protocol.scene.bowl_diameter_cm,
                          cube_cm=protocol.scene.cube_edge_cm, calibration=files.calibration, auto=calibrate,
                          calibrate_on=files.empty_table if calibrate else None)


def measure_command_line(request: MeasureRequest) -> list[str]:
    """What a desk would type for the same measure (shown, never parsed)."""
    return ["measure", *request.inputs, *(["--auto"] if request.auto else []),
            *([f"--calibrate-on={request.calibrate_on}"] if request.calibrate_on else []),
            f"--bowl-cm={request.bowl_cm:g}", f"--cube-cm={request.cube_cm:g}", f"--calibration={request.calibration}"]


def run_cameras(policies: tuple[Path, ...]) -> list[str]:
    """The cameras the run connects: the first checkpoint's (`policy_cameras`), or only the top one when every
    policy is the expert (it reads no camera; the placement guide and the proposals watch the top one)."""
    learned = [policy for policy in policies if not is_expert(policy)]
    return policy_cameras(learned[0]) if learned else ["top"]


def is_expert(policy: str | Path) -> bool:
    from harness.models.run_settings import BuiltinPolicy

    return BuiltinPolicy.named(str(policy)) is BuiltinPolicy.EXPERT


def _parts(plan: Rehearsal, rig: Any) -> Any:
    """The run's parts: the rehearsal's operator, and the emulated arm's simulator, so the built-in expert can
    plan from the cube's true pose on it (`policies.scripted.EmulatedArmExpert`)."""
    from harness.app.parts import Parts, make_policy
    from harness.policies.scripted import EmulatedArmExpert

    def policy(ref: str, *rest: Any) -> Any:
        return EmulatedArmExpert(rig.truth) if is_expert(ref) else make_policy(ref, *rest)

    return Parts(policy=policy, observer=_operator_factory(plan, rig), emulated_truth=rig.truth)


def _operator_factory(plan: Rehearsal, rig: Any) -> Callable[[Any, bool], Any]:
    from harness.app.rehearse_operator import ConsoleOperator, ScriptedOperator

    def make(front_end: Any, operator_scores: bool) -> Any:
        if plan.operator is OperatorKind.SCRIPTED:
            return ScriptedOperator(rig, plan.placement_error_cm, plan.seed)
        return ConsoleOperator(rig)

    return make


def rehearse(plan: Rehearsal, out: Any = None) -> int:
    """Bring up the emulated arm, make the desk's files, run the trials, measure them (module docstring)."""
    out = out or sys.stdout
    from harness.app.measure_command import run_measure
    from harness.app.rehearse_operator import CONSOLE_HINT, OFF_TABLE_CM
    from harness.app.run_command import run_request
    from harness.emulator.remote_rig import open_rig_process

    protocol, files = plan.protocol, plan.files
    width, height = plan.size
    tmp = make_scratch("rehearse", remove_at_exit=False)   # removed below, or at the next start if killed
    try:
        socket = tmp / "cameras.sock"
        with open_rig_process(socket, plan.gap, protocol.scene.trained_cube_xy_cm) as rig:
            print(f"Emulated STS3215 bus on {rig.port}; simulated cameras on {socket}", file=out, flush=True)
            source = f"sim:{socket}@{width}x{height}"
            if plan.resume:   # the desk's files are the ones its first session made, as on a real desk
                rig.place_cube(*OFF_TABLE_CM)
                print(f"resuming with the desk's files in {files.folder}", file=out, flush=True)
            else:
                photograph_desk(rig, protocol, source, files, out)
                measure = desk_measure(protocol, files, files.trained_spot, calibrate=True)
                say_command(measure_command_line(measure), out)
                if run_measure(measure) != 0:
                    raise HarnessInputError(files.trained_spot, None, "the cube on its trained spot was not measured")
            request = desk_request(plan, rig.port, source)
            say_command(request.command_line(), out)
            if plan.operator is OperatorKind.PERSON:
                print(CONSOLE_HINT, file=out, flush=True)
            if not plan.gap.none:
                print(f"reality gap (recorded in the scoresheet): {plan.gap.describe()}", file=out, flush=True)
            parts = _parts(plan, rig)
            code = run_request(request.updated(provenance={"rehearsal": {"gap": plan.gap.declared()}}), parts)
            if code != 0:
                return code
    finally:
        remove_scratch(tmp)
    measure_run = desk_measure(protocol, files, plan.runs_dir / plan.scoresheet.stem, calibrate=False)
    say_command(measure_command_line(measure_run), out)
    run_measure(measure_run)   # a trial whose cube left the view is "not measured", said
    print(f"rehearsal done: scoresheet {plan.scoresheet}, evidence {plan.runs_dir / plan.scoresheet.stem}, "
          f"desk files {files.folder}", file=out, flush=True)
    return 0


def rehearse_from_args(args: argparse.Namespace) -> int:
    return rehearse(plan_rehearsal(args))
