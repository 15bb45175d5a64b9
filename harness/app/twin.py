"""`harness twin REAL_SHEET`: every scored attempt of a real-arm run, run again in the simulated arm.

The twin runs the same policy (checked by its fingerprint), the same protocol (its scene checked against the
table the real run stood on), the same inference engine and settings, from each attempt's measured cube start
(the planned one where none was measured), with the simulated arm's latency model set to the latency the real arm
saw (the median observation-to-action time its attempts recorded, and for a chunking policy the stall at each new
chunk): the arm holds its last command that long, as the paced real arm did, and the twin is reproducible whatever
the load here. Nothing here runs a trial: the twin is a protocol of its own (one trial per scored real attempt, the
same trial numbers) run as a `RunRequest` on the simulated arm, as `harness run --robot sim` runs it, so locking,
resume, evidence and `--workers` on Ray are the run's.
The twin sheet's locked `twin_of` names the real sheet and its lock hash; `reports.fidelity` pairs them.
"""

from __future__ import annotations

import sys
from contextlib import suppress
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from harness.errors import HarnessInputError, StaleRunError
from harness.models.locked import LockedInference
from harness.models.protocol import (
    MAX_TRIALS,
    Protocol,
    Trial,
    file_sha256,
    load_protocol,
    parse_protocol,
    workspace_problem,
)
from harness.models.run_settings import BuiltinPolicy, ChunkLatency, InferenceEngine, RobotKind
from harness.models.scoresheet import Scoresheet, load_scoresheet, policy_fingerprint
from harness.models.sheet_records import Attempt, LoopStats
from harness.models.twin_request import TwinRequest
from harness.stats.ppi import TWIN_EXTRA_BASE

if TYPE_CHECKING:
    from harness.models.run_request import RunRequest


class StartSource(StrEnum):
    """Where a twin trial's cube start came from."""

    MEASURED = "measured"   # the top camera's reading at the real trial's start
    PLANNED = "planned"     # the protocol's planned start (nothing measured, e.g. an operator's override)
    PLANNED_OUT_OF_REACH = "planned (the measured start is outside the workspace)"


@dataclass(frozen=True)
class TwinStart:
    trial: Trial
    source: StartSource


def twin_start(attempt: Attempt, protocol: Protocol) -> TwinStart:
    """The cube start a twin trial uses for a real attempt."""
    planned = protocol.trial(attempt.trial_index)
    measured = attempt.measured_start or {}
    dx, dy = measured.get("dx_cm"), measured.get("dy_cm")
    if not isinstance(dx, int | float) or not isinstance(dy, int | float):
        return TwinStart(planned, StartSource.PLANNED)
    if workspace_problem(protocol.scene, float(dx), float(dy)) is not None:
        return TwinStart(planned, StartSource.PLANNED_OUT_OF_REACH)
    yaw = measured.get("yaw_deg")
    yaw = float(yaw) if isinstance(yaw, int | float) else planned.yaw_deg
    yaw = (yaw + 180.0) % 360.0 - 180.0
    return TwinStart(Trial(index=attempt.trial_index, dx_cm=float(dx), dy_cm=float(dy), yaw_deg=yaw),
                     StartSource.MEASURED)


def twin_cameras(real: Scoresheet) -> dict[str, str]:
    """The real run's cameras as simulated ones at the size they delivered (`sim@WxH`, `app.parts.sim_camera_size`):
    the policy saw frames of that size on the arm, whatever size it was trained at, so the twin's policy does too."""
    from harness.robots.camera_spec import parse_camera_spec

    specs = {name: parse_camera_spec(source, f"settings.cameras.{name}")
             for name, source in real.settings.cameras.items()}
    return {name: f"sim@{spec.width}x{spec.height}" for name, spec in specs.items()}


def twin_protocol(real: Scoresheet, protocol: Protocol, extra: int = 0) -> Protocol:
    """The real protocol with one trial per scored real attempt, at its start; every trial run (no early stop:
    the twin mirrors the attempts there are), its cameras at the real ones' size. `extra`: that many more
    trials at the protocol's own starts, drawn at random (with replacement, from a generator seeded by the real
    sheet's lock hash, so a resume draws the same), numbered from `TWIN_EXTRA_BASE`: the twin's own success rate
    for the twin-assisted estimate (`harness.stats.ppi`), independent of the real attempts' starts."""
    trials = [twin_start(attempt, protocol).trial for attempt in real.scored_attempts()]
    if extra:
        if max(t.index for t in protocol.trials) >= TWIN_EXTRA_BASE:
            raise HarnessInputError(real.locked.protocol_file, "trials", f"trial indices reach {TWIN_EXTRA_BASE}, "
                                    "where --extra numbers its trials")
        rng = np.random.default_rng(int(real.lock["sha256"][:16], 16))
        drawn = rng.integers(0, len(protocol.trials), size=extra)
        trials += [protocol.trials[int(i)].model_copy(update={"index": TWIN_EXTRA_BASE + k})
                   for k, i in enumerate(drawn)]
    data = protocol.model_dump(mode="json")
    data.update(name=f"{protocol.name} (twin of {real.path.name})"[:200], generator=None, trials=trials,
                stopping_rule={"kind": "fixed"}, run={"robot": RobotKind.SIM.value, "policy": real.locked.policy.ref,
                                                      "cameras": twin_cameras(real)})
    return Protocol.model_validate(data)


def protocol_text(protocol: Protocol) -> str:
    return ("# Written by `harness twin`: the real run's protocol, one trial per scored real attempt at its measured\n"
            "# start (docs/twin.md). Locked by the twin scoresheet: do not edit.\n"
            + yaml.safe_dump(protocol.model_dump(mode="json", exclude_none=True), sort_keys=False))


def twin_latency(real: Scoresheet) -> float | str | ChunkLatency:
    """The latency the twin's arm is given: what the real arm saw (`latency_seen`), so the twin holds each command
    as long as the real arm did, whatever this machine's load."""
    return latency_seen([a.loop for a in real.scored_attempts()], real.inference.engine)


def latency_seen(loops: list[LoopStats], engine: InferenceEngine) -> float | str | ChunkLatency:
    """The latency a paced real arm saw over its attempts' loop statistics. Each action landed the median of the
    attempts' observation-to-action p50 (wall clock) after its observation. A chunking policy under LeRobot's
    synchronous engine also stalled the arm for a whole inference at each new chunk: then a `ChunkLatency`, whose
    computed actions land `chunk_stall_ms` late and whose episode is counted in commands, as the paced loop counts
    it. "measured" (the policy's own compute time here) where the real sheet recorded none."""
    seen = [loop.obs_to_action_ms_p50 for loop in loops
            if loop.obs_to_action_ms_p50 is not None and loop.obs_to_action_clock == "wall"]
    if not seen:
        return "measured"
    step = round(_median(seen), 1)
    chunk = chunk_stall_ms(loops, engine)
    return step if chunk is None else ChunkLatency(step_ms=step, chunk_ms=chunk)


def chunk_stall_ms(loops: list[LoopStats], engine: InferenceEngine) -> float | None:
    """How long a paced real arm held its last command when its policy computed a new chunk: the median over the
    attempts of the policy's own time per chunk plus the robot's I/O of a step (the observation read and the action
    written, as in every observation-to-action time). None for a policy that did not chunk, and under RTC or
    LeRobot's policy server, whose chunks come beside the loop (the arm never waits for one)."""
    if engine is not InferenceEngine.SYNC:
        return None
    stalls = [loop.inference_ms_p50 + loop.robot_io_ms_p50 for loop in loops
              if loop.chunk_switches and loop.inference_ms_p50 is not None and loop.obs_to_action_clock == "wall"]
    return round(_median(stalls), 1) if stalls else None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def inference_settings(inference: LockedInference) -> dict[str, Any]:
    """The request's `inference` part that asks for the engine and settings the real sheet locked (the
    request's field names are the locked block's, but for the server's address)."""
    if inference.engine is InferenceEngine.RTC:
        from harness.app.rtc_inference import RTC_FLAGS

        return {"engine": InferenceEngine.RTC, **{name: getattr(inference, name) for name in RTC_FLAGS
                                                  if getattr(inference, name) is not None}}
    if inference.engine is InferenceEngine.ASYNC:
        locked = {"policy_server": inference.server, "actions_per_chunk": inference.actions_per_chunk,
                  "chunk_size_threshold": inference.chunk_size_threshold, "aggregate_fn": inference.aggregate_fn}
        return {name: value for name, value in locked.items() if value is not None}
    return {}


@dataclass(frozen=True)
class TwinPlan:
    """A twin run, every input checked; nothing written yet."""

    real: Scoresheet
    protocol: Protocol
    twin: Protocol
    twin_protocol_path: Path
    scoresheet: Path
    runs_dir: Path
    resume: bool

    @property
    def provenance(self) -> dict[str, Any]:
        return {"twin_of": {"real_sheet": str(self.real.path), "real_lock_sha256": self.real.lock["sha256"]}}


def check_real_sheet(real: Scoresheet) -> None:
    """The refusals of a sheet that cannot be mirrored (module docstring), each one line naming the field."""
    locked = real.locked
    if locked.twin_of is not None:
        raise HarnessInputError(real.path, "locked.twin_of", f"already a twin (of {locked.twin_of.real_sheet}); "
                                                             "give the real sheet it mirrors")
    if locked.robot.simulated:
        raise HarnessInputError(real.path, "locked.robot", "a simulated run: there is no real arm to mirror "
                                                           "(give a sheet of --robot so101 or of harness rehearse)")
    policy = locked.policy
    builtin = BuiltinPolicy.named(policy.ref)
    if builtin is not None and not (builtin is BuiltinPolicy.EXPERT and locked.rehearsal is not None):
        raise HarnessInputError(real.path, "locked.policy.ref", f"'{policy.ref}' is a built-in; a real run's "
                                                                "policy is a checkpoint folder")
    if builtin is None and not Path(policy.ref).is_dir():
        raise HarnessInputError(real.path, "locked.policy.ref", f"the policy folder {policy.ref} is gone: the twin "
                                                                "must run the checkpoint the real run ran")
    if policy_fingerprint(policy.ref) != policy.fingerprint:
        raise StaleRunError(real.path, "locked.policy.fingerprint", f"the files of {policy.ref} changed since the "
                                                                    "real run: the twin would run another policy")
    if not real.scored_attempts():
        raise HarnessInputError(real.path, "attempts", "no scored attempt to mirror")


def check_twin_table(real: Scoresheet, protocol: Protocol, protocol_path: Path) -> None:
    """The twin builds its table from the protocol's scene. A rehearsal stood on the emulated arm's table: a
    protocol laid out otherwise would put the twin's bowl where the rehearsed one was not."""
    if real.locked.rehearsal is None:
        return
    from harness.sim.scene import SceneGeometry, scene_mismatch

    mismatch = scene_mismatch(protocol.scene, SceneGeometry())
    if mismatch is not None:
        field, shown = mismatch
        raise HarnessInputError(protocol_path, field, f"the rehearsed table has {shown} cm; the twin's table "
                                                      "(from this protocol) does not match it")


def plan_twin(request: TwinRequest) -> TwinPlan:
    """Every check before anything is written: bad input is one line and exit 2."""
    if request.max_trials is not None and request.max_trials < 1:
        raise HarnessInputError(None, "--max-trials", f"{request.max_trials}: must be at least 1")
    real_path = request.real_sheet
    if not real_path.exists():   # a folder, a device or a pipe: load_scoresheet says which, in one line
        raise HarnessInputError(real_path, None, "no such scoresheet")
    real = load_scoresheet(real_path)
    check_real_sheet(real)
    protocol_path = Path(real.locked.protocol_file)
    if not protocol_path.is_file():
        raise HarnessInputError(real.path, "locked.protocol_file", f"{protocol_path} is gone: the twin runs the "
                                                                   "real run's protocol")
    if file_sha256(protocol_path) != real.locked.protocol_sha256:
        raise StaleRunError(protocol_path, "protocol_sha256", f"changed since {real.path} was locked")
    protocol = load_protocol(protocol_path)
    check_twin_table(real, protocol, protocol_path)
    if request.extra is not None and not 0 <= request.extra <= MAX_TRIALS:
        raise HarnessInputError(None, "--extra", f"{request.extra}: must be 0..{MAX_TRIALS}")
    twin = twin_protocol(real, protocol, request.extra or 0)
    stem = real_path.stem
    scoresheet = request.scoresheet or real_path.with_name(f"{stem}-twin.yaml")
    if scoresheet.resolve() == real_path.resolve():
        raise HarnessInputError(scoresheet, "--scoresheet", "is the real sheet itself")
    twin_path = request.twins_dir / f"{scoresheet.stem}.protocol.yaml"
    plan = TwinPlan(real, protocol, twin, twin_path, scoresheet, request.runs_dir, request.resume)
    if scoresheet.exists():
        if not request.resume:
            raise HarnessInputError(scoresheet, None, "this twin already has a scoresheet; add --resume to continue it")
        check_resumed_twin(plan)
    elif twin_path.exists() and twin_path.read_text() != protocol_text(twin):
        raise HarnessInputError(twin_path, None, "a different twin protocol is already here (another twin's?); "
                                                 "move it or give --twins-dir")
    return plan


def check_resumed_twin(plan: TwinPlan) -> None:
    """A twin is resumed only against the real sheet, and the real attempts, it was locked with."""
    sheet = load_scoresheet(plan.scoresheet)
    mirrored = sheet.locked.twin_of
    if mirrored is None:
        raise HarnessInputError(plan.scoresheet, "locked.twin_of", "not a twin scoresheet")
    if Path(mirrored.real_sheet).resolve() != plan.real.path.resolve():
        raise StaleRunError(plan.scoresheet, "locked.twin_of.real_sheet", f"mirrors {mirrored.real_sheet}, not "
                                                                          f"{plan.real.path}")
    if mirrored.real_lock_sha256 != plan.real.lock["sha256"]:
        raise StaleRunError(plan.scoresheet, "locked.twin_of.real_lock_sha256", "the real sheet at that path is "
                                                                                "another run than the one mirrored")
    if not plan.twin_protocol_path.is_file() or plan.twin_protocol_path.read_text() != protocol_text(plan.twin):
        raise StaleRunError(plan.twin_protocol_path, "trials", f"the real sheet's scored attempts, or --extra, "
                                                               f"changed since the twin was locked "
                                                               f"({sheet.locked.trial_count} trials); resume with the "
                                                               "same --extra, or start a new twin (--scoresheet)")


def twin_request(plan: TwinPlan, asked: TwinRequest) -> RunRequest:
    """The twin's run as a request, built from the real sheet; the twin's own flags (`--workers`, `--device`,
    `--max-trials`) read as `harness run` reads them, a bad one refused in one line naming it."""
    from harness.models.run_request import RunRequest

    real = plan.real
    # LeRobot's policy server: the twin's arm waits on the server's real round trips, as the real one did
    asynchronous = real.inference.engine is InferenceEngine.ASYNC
    latency = twin_latency(real) if not plan.resume and not asynchronous else None
    rename_map = dict(real.settings.rename_map) if real.settings.rename_map else None
    run = {"protocol": plan.twin_protocol_path, "robot": {"kind": RobotKind.SIM},
           "policies": (real.locked.policy.ref,), "scoresheet": plan.scoresheet, "runs_dir": plan.runs_dir,
           "headless": True, "latency": latency, "rename_map": rename_map,
           "inference": inference_settings(real.inference), "resume": plan.resume, "provenance": plan.provenance}
    return RunRequest.model_validate_flags(run, {"workers": asked.workers, "device": asked.device,
                                                 "max_trials": asked.max_trials})


def run_twin(asked: TwinRequest, out: Any = None) -> int:
    """`harness twin`, from its request: planned (every check, nothing written), then run as a `RunRequest`."""
    return _run_plan(plan_twin(asked), asked, out)


def _run_plan(plan: TwinPlan, asked: TwinRequest, out: Any = None) -> int:
    from harness.app.rehearse_command import say_command
    from harness.app.run_command import run_request

    out = out or sys.stdout
    wrote_protocol = not plan.twin_protocol_path.exists()
    made_folder = not plan.twin_protocol_path.parent.exists()
    # refused here, before anything is written, if a flag is wrong; locked with the sheet: its `twin_of`
    request = twin_request(plan, asked)
    if wrote_protocol:
        plan.twin_protocol_path.parent.mkdir(parents=True, exist_ok=True)
        parse_protocol(protocol_text(plan.twin), plan.twin_protocol_path)
        plan.twin_protocol_path.write_text(protocol_text(plan.twin))
    real = plan.real
    sources = [twin_start(a, plan.protocol).source for a in real.scored_attempts()]
    measured = sum(1 for s in sources if s is StartSource.MEASURED)
    gap = real.locked.rehearsal.gap.describe() if real.locked.rehearsal is not None else None
    print(f"twin of {real.path} ({'rehearsal, ' + gap if gap else 'real arm'}): {len(sources)} scored attempts, "
          f"{measured} from their measured start, {len(sources) - measured} from the planned one", file=out,
          flush=True)
    say_command(request.command_line(), out)   # the `harness run` line that asks for the same run
    try:
        return run_request(request)
    finally:
        if wrote_protocol and not plan.scoresheet.exists():   # refused before the twin was locked: leave nothing
            plan.twin_protocol_path.unlink(missing_ok=True)
            if made_folder:
                with suppress(OSError):
                    plan.twin_protocol_path.parent.rmdir()
