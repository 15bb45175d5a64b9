"""Which scoresheet a `harness run` writes: lock a new one or load and check the one to resume."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from harness.app.async_inference import async_record, hold_to_locked_async
from harness.app.rtc_inference import hold_to_locked_rtc, rtc_record
from harness.errors import HarnessInputError, StaleRunError
from harness.models.checkpoint import checkpoint_name
from harness.models.evidence_audit import check_evidence
from harness.models.protocol import Protocol
from harness.models.render_profile import DEFAULT_PROFILE, RenderProfile
from harness.models.run_request import RunRequest
from harness.models.run_settings import (
    BuiltinPolicy,
    ChunkLatency,
    InferenceEngine,
    InferenceThreads,
    RobotKind,
    RunSettings,
    latency_record,
    latency_text,
)
from harness.models.scoresheet import Scoresheet, build_locked, check_resumable, load_scoresheet, new_scoresheet
from harness.policies.hub import checkpoint_folder, hub_ref, policy_fingerprint

log = logging.getLogger(__name__)

_BUILTINS = "|".join(BuiltinPolicy)

def _slug(policy_ref: str) -> str:
    """A built-in by its name; a checkpoint folder by its training run and step, so every checkpoint of
    a `lerobot-train` run (each folder named `pretrained_model`) gets its own scoresheet."""
    name = policy_ref if BuiltinPolicy.named(policy_ref) is not None else checkpoint_name(policy_ref).label
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _find_sheet(protocol_path: Path, request: RunRequest, policy_ref: str | None) -> Path | None:
    if request.scoresheet:
        return request.scoresheet
    folder = Path("scoresheets")
    if policy_ref:
        return folder / f"{protocol_path.stem}-{_slug(policy_ref)}.yaml"
    candidates = sorted(folder.glob(f"{protocol_path.stem}-*.yaml"))
    if len(candidates) > 1:
        names = ", ".join(str(c) for c in candidates)
        raise HarnessInputError(protocol_path, "--policy", f"several runs of this protocol ({names}); name one")
    return candidates[0] if candidates else None


def sheet_path(request: RunRequest, protocol: Protocol, protocol_path: Path) -> Path:
    """Where this run's scoresheet is (or will be), so its writer lock can be taken before it is read."""
    policy_flag = request.policy
    path = _find_sheet(protocol_path, request, policy_flag or (None if request.resume else protocol.run.policy))
    if path is not None:
        return path
    policy_ref = policy_flag or protocol.run.policy
    if not policy_ref:
        raise HarnessInputError(protocol_path, "run.policy", f"no policy: pass --policy PATH|{_BUILTINS}")
    return Path("scoresheets") / f"{protocol_path.stem}-{_slug(policy_ref)}.yaml"


def check_same_inference(sheet: Scoresheet, request: RunRequest) -> None:
    """A resume runs with the latency and inference engine the sheet locked; asking for others is refused
    (not asking keeps the locked ones)."""
    asked, locked = request.latency, sheet.latency_ms
    field = "locked.latency_ms" if "latency_ms" in sheet.locked_data else "settings.latency_ms"
    if asked is not None and asked != locked:
        raise StaleRunError(sheet.path, field, f"this run's latency is {latency_text(locked)}, not "
                                               f"{latency_text(asked)}; start a new scoresheet to change it")
    engine = request.inference.engine
    if engine is not None and engine != sheet.inference_engine:
        raise StaleRunError(sheet.path, "locked.inference", f"this run's inference engine is "
                                                            f"{sheet.inference_engine}, not {engine}")


def render_profile_from(request: RunRequest, robot: RobotKind, checkpoint: str | None) -> RenderProfile | None:
    """The profile a new simulated run locks (`--render-profile`, else the default); a checkpoint trained on
    frames drawn otherwise is stated in one line on stderr. None for a real arm, whose cameras draw nothing."""
    asked = request.render_profile
    if not robot.simulated:
        if asked:
            raise HarnessInputError(None, "--render-profile", "the render profile is for the simulated arm's "
                                                              "cameras; a real arm's cameras are real")
        return None
    profile = RenderProfile(asked) if asked else DEFAULT_PROFILE
    if checkpoint is not None:
        from harness.data.render_provenance import profile_statement

        statement = profile_statement(profile, checkpoint)
        if statement:
            log.warning("%s", statement)
    return profile


def check_same_render_profile(sheet: Scoresheet, request: RunRequest) -> None:
    """A resume draws the policy's frames as the sheet locked; asking for another profile is refused."""
    asked = request.render_profile
    if asked and RenderProfile(asked) is not sheet.render_profile:
        field = "locked.render_profile" if "render_profile" in sheet.locked_data else "locked"
        raise StaleRunError(sheet.path, field, f"this run draws with render profile {sheet.render_profile.value}, "
                                               f"not {asked}; start a new scoresheet to change it")


def resolve_sheet(request: RunRequest, protocol: Protocol, protocol_path: Path,
                  path: Path | None = None, create: bool = True) -> tuple[Scoresheet, bool]:
    """Lock a new scoresheet, or load and check the one to resume; True when it is new. What the request
    leaves unset comes from the protocol's `run:` section (robot, policy, port, cameras, rename map).

    `create=False` leaves a new sheet unwritten: `harness run` writes it (`Scoresheet.create`)
    only once the policy has loaded and the robot has connected, so a refused run leaves nothing.
    """
    policy_flag = request.policy
    asked_robot = request.robot.kind
    if path is None:
        path = _find_sheet(protocol_path, request, policy_flag or (None if request.resume else protocol.run.policy))
    if path is not None and path.exists():
        if not request.resume:
            raise HarnessInputError(path, None, "this run already has a scoresheet; add --resume to continue it")
        sheet = load_scoresheet(path)
        check_evidence(sheet, [request.runs_dir / path.stem])   # before this run moves an unrecorded folder aside
        check_resumable(sheet, protocol_path, policy_flag, policy_fingerprint)
        if asked_robot and asked_robot != sheet.locked.robot:
            raise HarnessInputError(path, "robot", f"locked to '{sheet.locked.robot}', not '{asked_robot}'")
        check_same_inference(sheet, request)
        check_same_render_profile(sheet, request)
        hold_to_locked_async(sheet, request)
        hold_to_locked_rtc(sheet, request)
        # How this machine reaches the arm is not locked: a resume after a replug (another serial port, or a
        # rehearsal's new emulator and camera socket) runs on what it is given, for this session.
        reach = {"port": request.robot.port, "cameras": dict(request.robot.cameras)}
        if reach := {key: value for key, value in reach.items() if value}:
            sheet.settings = sheet.settings.model_copy(update=reach)
        return sheet, False
    policy_ref = policy_flag or protocol.run.policy
    if not policy_ref:
        raise HarnessInputError(protocol_path, "run.policy", f"no policy: pass --policy PATH|{_BUILTINS}")
    kind = asked_robot or protocol.run.robot
    if kind is None:
        raise HarnessInputError(protocol_path, "run.robot", f"no robot: pass --robot {'|'.join(RobotKind)}")
    robot = RobotKind(kind)
    builtin = BuiltinPolicy.named(policy_ref)
    if builtin is None and not Path(policy_ref).is_dir() and hub_ref(policy_ref) is None:
        raise HarnessInputError(None, "--policy", f"'{policy_ref}' is neither a built-in policy, a folder nor a "
                                                  "Hugging Face Hub id (ORG/NAME[@REVISION])")
    fingerprint = policy_fingerprint(policy_ref)   # a Hub id: resolved (cache first, downloaded if allowed) now
    path = path or Path("scoresheets") / f"{protocol_path.stem}-{_slug(policy_ref)}.yaml"
    rename_map = request.rename_map if request.rename_map is not None else dict(protocol.run.rename_map)
    latency = request.latency
    async_block = async_record(request, policy_ref, robot)   # --policy-server: LeRobot's async engine
    engine = (InferenceEngine(async_block["engine"]) if async_block
              else InferenceEngine(request.inference.engine or InferenceEngine.SYNC))
    if engine is InferenceEngine.RTC and builtin is not None:
        raise HarnessInputError(None, "--inference", f"rtc: the built-in '{policy_ref}' policy has no Real-Time "
                                                     "Chunking (LeRobot's RTC engine needs a policy that supports it)")
    rtc_block = rtc_record(request, engine, policy_ref, robot)   # --inference rtc: its settings, locked
    threads = None
    if builtin is None:   # what inference ran with: torch threads (the engine is locked)
        from harness.policies.lerobot_policy import ThreadPolicy, available_cores

        threads = InferenceThreads(**ThreadPolicy.for_cores(available_cores(), reserved=1).record())
    if latency is not None and not robot.simulated:
        raise HarnessInputError(None, "--latency-ms", "the latency model is for the simulated arm; a real arm has "
                                                      "its own latency")
    if isinstance(latency, ChunkLatency) and engine is not InferenceEngine.SYNC:
        raise HarnessInputError(None, "--latency-chunk-ms", f"not with the {engine} engine: its chunks are computed "
                                                            "beside the loop, the arm never waits for one")
    settings = RunSettings(port=request.robot.port or protocol.run.port, robot_id=request.robot.robot_id,
                           cameras=dict(request.robot.cameras) or dict(protocol.run.cameras), rename_map=rename_map,
                           latency_ms=latency, **({"inference": threads} if threads is not None else {}))
    optional: dict[str, Any] = {"latency_ms": latency_record(latency),
                "inference": async_block or {"engine": engine.value, **(rtc_block or {})}}
    # what the sheet is, set by the command that builds the run (never a `harness run` flag): a rehearsal on the
    # emulated arm (`app.rehearse_command`) or a twin of another sheet (`app.twin`)
    optional.update(request.provenance or {})
    profile = render_profile_from(request, robot, checkpoint_folder(policy_ref) if builtin is None else None)
    if profile is not None:
        optional["render_profile"] = profile.value
    sheet = new_scoresheet(path, build_locked(protocol, protocol_path, policy_ref, robot, optional, fingerprint),
                            settings)
    return (sheet.create() if create else sheet), True


def trials_to_run(sheet: Scoresheet, max_trials: int | None) -> str:
    """What this run will do, in words: `--max-trials` stops it short of the protocol's pending trials."""
    pending = len(sheet.pending_trials())
    if max_trials is None or max_trials >= pending:
        return f"{pending} of {sheet.locked.trial_count} trials to run"
    return (f"{max_trials} trials to run (--max-trials; {pending} of the protocol's {sheet.locked.trial_count} "
            "pending)")
