"""`RunRequest`: everything one `harness run` asks for, typed, validated and frozen.

It is built once, from the command line (`RunRequest.from_flags(vars(args))`), from a sweep cell (its
condition's settings over the sweep's own) or from a rehearsal (its flags over the emulated desk's), and is
then handed down as it is: to the scoresheet's resolution, to the engine's composition and to Ray workers,
which receive it pickled. Nothing below the command handlers reads parsed arguments, and nothing builds an
argument list to parse it again.

A field left at None was not asked for: on `--resume` the scoresheet's locked value stands (asking for another
is refused), and on a new sheet the protocol's `run:` section (robot, policy, port, cameras, rename map) or the
harness's default fills it.

Each `harness run` flag is written once, as a `Flag` on the field it sets (its spelling, help, and how its text
becomes the field's value and back); its type, choices and default come from the field. `RUN_FLAGS` collects them
(by argparse destination), and from it `app.commands.run.add_run_flags` builds the parser (`harness rehearse`'s
too), a sweep condition takes any flag the sweep does not decide, and `RunRequest.command_line` types a request
as the `harness run` line a person would give it (a rehearsal and a twin show it).
`tests/e2e/test_run_request.py` follows every flag from the parser to the request, to the shown line and back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import HarnessInputError
from harness.models.frame_size import parse_size, size_text
from harness.models.render_profile import RenderProfile
from harness.models.run_settings import ChunkLatency, InferenceEngine, Latency, RobotKind

VideoChoice = Literal["failures", "all", "none"]
RecordCodec = Literal["h264", "libsvtav1", "hevc"]
AttentionSchedule = Literal["ZEROS", "ONES", "LINEAR", "EXP"]
MAX_WORKERS = 256


# how a flag's value, as argparse (str, int, float, bool, lists) or a sweep file's YAML (also numbers, lists, maps)
# gives it, becomes its fields' values (`parse`), and how their values are typed again (`show`: what argparse would
# hold for the flag; None or False: not given)

def _parse_same(value: Any) -> tuple[Any, ...]:
    return (value,)


def _parse_path(value: Any) -> tuple[Any, ...]:
    return (Path(value) if value not in (None, "") else None,)


def _parse_size(text: Any) -> tuple[Any, ...]:
    if isinstance(text, list | tuple):
        return (tuple(text),)
    return (parse_size(text),)


def _parse_record_size(text: Any) -> tuple[Any, ...]:
    return (parse_size(text, example="128x96"),)


def _parse_dropout(text: Any) -> tuple[Any, ...]:
    if not text:
        return (None,)
    trial_s, _, step_s = str(text).partition(":")
    try:
        return ((int(trial_s), int(step_s or 0)),)
    except ValueError:
        raise ValueError(f"'{text}' is not TRIAL:STEP") from None


def _parse_tolerance(text: Any) -> tuple[Any, ...]:
    try:
        cm, deg = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"{str(text)!r} is not CM,DEG (e.g. 0.5,10)") from None
    if not (math.isfinite(cm) and math.isfinite(deg)) or cm <= 0 or deg <= 0:
        raise ValueError(f"{str(text)!r}: both must be positive numbers")
    return ((cm, deg),)


def _parse_rename_map(value: Any) -> tuple[Any, ...]:
    if value is None or value == "":
        return (None,)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("must be a JSON object of names, e.g. '{\"top\": \"camera1\"}'")
    return (value,)


def _parse_cameras(items: Any) -> tuple[Any, ...]:
    items = [items] if isinstance(items, str) else list(items or [])
    cameras = {}
    for item in items:
        name, sep, source = str(item).partition("=")
        if not sep or not name or not source:
            raise ValueError(f"'{item}' is not NAME=SOURCE (e.g. top=0)")
        cameras[name] = source
    return (cameras,)


def check_policy_refs(refs: Iterable[str]) -> None:
    """Each `--policy` (of `run`, `collect`, `rehearse`) names something: an empty one is a slip (`--policy
    "$UNSET"`), and taken as "none given" it would run the protocol's own policy without a word."""
    if any(not ref.strip() for ref in refs):
        raise HarnessInputError(None, "--policy", "empty: name a policy folder, a Hub id or a built-in (expert, "
                                "replay); leave --policy out for the protocol's run.policy")


def _parse_policies(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ((),)
    return (tuple(str(v) for v in value) if isinstance(value, list | tuple) else (str(value),),)


def _parse_record_dataset(value: Any) -> tuple[Any, ...]:
    """None: off; "" (the flag alone): on, in the default folder; a folder."""
    if value is None or value is False:
        return (False, None)
    if value is True or value == "":
        return (True, None)
    return (True, Path(value))


def _parse_workers(value: Any) -> tuple[Any, ...]:
    if value == "auto":
        return (value,)
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a number or auto")
    try:
        return (int(value),)
    except (TypeError, ValueError):
        raise ValueError(f"'{value}' is not a number or auto") from None


def _parse_not(value: Any) -> tuple[Any, ...]:
    return (not value,)


def _show_same(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    return str(value) if isinstance(value, Path) else value


def _show_not(value: Any) -> Any:
    return not value


def _show_size(value: tuple[int, int]) -> Any:
    return size_text(value)


def _show_tolerance(value: tuple[float, float]) -> Any:
    return f"{value[0]:g},{value[1]:g}"


def _show_dropout(value: tuple[int, int] | None) -> Any:
    return None if value is None else f"{value[0]}:{value[1]}"


def _show_rename_map(value: dict[str, str] | None) -> Any:
    return None if value is None else json.dumps(value, sort_keys=True)


def _show_cameras(value: dict[str, str]) -> Any:
    return [f"{name}={source}" for name, source in value.items()]


def _show_policies(value: tuple[str, ...]) -> Any:
    return list(value) or None


def _show_record_dataset(record: bool, folder: Path | None) -> Any:
    return (str(folder) if folder is not None else True) if record else None


def _show_latency_ms(value: Latency) -> Any:
    if isinstance(value, ChunkLatency):
        return value.step_ms
    return value if isinstance(value, float | int) else None


def _show_latency_measured(value: Latency) -> Any:
    return value if value == "measured" else None


def _show_latency_chunk_ms(value: Latency) -> Any:
    return value.chunk_ms if isinstance(value, ChunkLatency) else None


@dataclass(frozen=True)
class Flag:
    """A `harness run` flag, written once, on the request field it sets (in the field's `Annotated` metadata):
    its spelling and help, and what the field's type does not already say. Its argparse type (int, float, a
    yes/no switch), its choices (a `Literal` or an enum) and its default (the field's, typed as `show` types it)
    come from the field; `RUN_FLAGS` collects them, `app.commands.run.add_run_flags` adds them to a parser, sweep
    conditions take them by destination, and `RunRequest.command_line` types a request back as them."""

    flag: str                              # --max-trials; a positional's name
    help: str | None = None
    metavar: str | None = None
    dest: str | None = None                # the argparse destination; None: the flag's name with underscores
    parse: Callable[[Any], tuple[Any, ...]] = _parse_same
    show: Callable[..., Any] = _show_same
    also: tuple[str, ...] = ()             # more fields (paths from the request) the flag sets
    repeat: bool = False                   # given once per item (argparse's append)
    optional_value: bool = False           # --record-dataset [DIR]: the flag alone means its default
    early: bool = False                    # `parse` checks the text as argparse reads it (a bad one: a usage error)
    type: Callable[[str], Any] | None = None        # None: int or float where the field is one
    choices: tuple[str, ...] | None = None          # None: the field's Literal or enum values
    staged_as: str | None = None   # set through a staging key first (two flags for one field: `_fold_latency`)


class RequestPart(BaseModel):
    """A frozen, strict part of the request (and the request itself); its fields may carry `Flag`s."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RobotRequest(RequestPart):
    """Which arm, and how this machine reaches it; unset: the protocol's `run:` section."""

    kind: Annotated[RobotKind | None, Flag("--robot", "robot target (default: protocol's run section)")] = None
    # a real arm's serial port
    port: Annotated[str | None, Flag("--port", "serial port of a real arm (e.g. /dev/ttyACM0, COM4)")] = None
    # LeRobot's calibration id
    robot_id: Annotated[str | None, Flag(
        "--robot-id", "calibration id: calibration/<id>.json, else LeRobot's calibration folder (where "
        "lerobot-calibrate writes), or a path to a .json file (emulated_follower for `emulate-bus --sim`)",
    )] = "harness_follower"
    # name -> source spec (`robots.camera_spec`)
    cameras: Annotated[dict[str, str], Flag(
        "--camera", "real camera: top=0 or wrist=/dev/video2, optionally sized, paced and formatted: "
        "top=0@1280x720,fps=30,fourcc=MJPG (default 640x480 at the control rate); simulated (emulate-bus --sim): "
        "top=sim or top=sim@320x240 (repeatable)", metavar="NAME=SOURCE", parse=_parse_cameras, show=_show_cameras,
        repeat=True)] = Field(default_factory=dict)


class EvidenceRequest(RequestPart):
    """Which attempts get videos, and how they are drawn."""

    video_fps: Annotated[float, Flag("--video-fps", "evidence video frame rate (default %(default)g)")] = 10.0
    video_size: Annotated[tuple[int, int], Flag("--video-size", "evidence video size WxH (default %(default)s)",
                                                parse=_parse_size, show=_show_size)] = (320, 240)
    # None: failures on the simulator, all on a real arm
    video: Annotated[VideoChoice | None, Flag(
        "--video", "simulated arm: which attempts get evidence videos (default failures: drawn for failed and "
        "voided attempts; every attempt keeps its state trajectory and final frames, and `harness replay` draws "
        "any video later)")] = None
    # = video none; on a real arm: final frames only
    no_video: Annotated[bool, Flag("--no-video", "same as --video none; on a real arm: final frames and "
                                                 "trajectories only")] = False
    lanes: int | None = None             # evidence writer lanes (a parallel run's worker: 0, drawn inline)

    @field_validator("video_fps")
    @classmethod
    def _fps(cls, value: float) -> float:
        if not (math.isfinite(value) and 0.5 <= value <= 120):
            raise ValueError(f"{value}: must be within 0.5..120")
        return value

    @field_validator("video_size")
    @classmethod
    def _video_size(cls, value: tuple[int, int]) -> tuple[int, int]:
        width, height = value
        if not (16 <= width <= 4096 and 16 <= height <= 4096) or width % 2 or height % 2:
            raise ValueError(f"'{width}x{height}': width and height must be even, 16..4096")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EvidenceRequest:
        if self.no_video and self.video not in (None, "none"):
            raise ValueError(f"contradicts --video {self.video}")
        return self


class DatasetRequest(RequestPart):
    """`--record-dataset`: the rollouts also written as a LeRobot v3.0 dataset."""

    record: Annotated[bool, Flag(
        "--record-dataset", "also write the rollouts as a LeRobot v3.0 dataset (default runs/<scoresheet>/dataset)",
        metavar="DIR", parse=_parse_record_dataset, show=_show_record_dataset, also=("dataset.folder",),
        optional_value=True)] = False
    size: Annotated[tuple[int, int], Flag(
        "--record-size", "--record-dataset frame size (default %(default)s: ACT trains at under a second a step on a "
        "laptop CPU; 640x480 costs ~25 s a step)", metavar="WxH", parse=_parse_record_size,
        show=_show_size)] = (128, 96)
    codec: Annotated[RecordCodec, Flag(
        "--record-codec", "--record-dataset video codec (default %(default)s: fastest to encode and decode on a CPU; "
        "libsvtav1, LeRobot's default, makes the smallest files)")] = "h264"
    # None: the control rate
    fps: Annotated[int | None, Flag("--record-fps", "--record-dataset frame rate, a divisor of the protocol's "
                                                    "control rate (default: the control rate)", metavar="N")] = None
    folder: Path | None = None           # None: runs/<scoresheet>/dataset (set by --record-dataset DIR)


class PlacementRequest(RequestPart):
    """A real arm's operator aids: proposals from the bowl calibration, guided placement from the trained spot."""

    bowl_calibration: Annotated[Path | None, Flag(
        "--bowl-calibration", "real arm: the bowl-rim calibration (harness measure --auto): propose each outcome "
        "from evidence", metavar="PATH", parse=_parse_path)] = None
    trained_spot: Annotated[Path | None, Flag(
        "--trained-spot", "real arm: a top frame with the cube on its trained spot: guide each placement",
        metavar="PNG", parse=_parse_path)] = None
    # cm, degrees
    tolerance: Annotated[tuple[float, float], Flag(
        "--placement-tolerance", "real arm: how close the cube must be before a trial starts (default %(default)s)",
        metavar="CM,DEG", parse=_parse_tolerance, show=_show_tolerance)] = (0.5, 10.0)

    @field_validator("tolerance")
    @classmethod
    def _positive(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not all(math.isfinite(v) and v > 0 for v in value):
            raise ValueError(f"'{value[0]:g},{value[1]:g}': both must be positive numbers")
        return value


class InferenceRequest(RequestPart):
    """The inference engine asked for and its settings; None everywhere: LeRobot's synchronous engine (or, on a
    resume, the locked one). Field names are those of the locked `inference` block."""

    engine: Annotated[Literal[InferenceEngine.SYNC, InferenceEngine.RTC] | None, Flag(
        "--inference", "LeRobot inference engine: sync (default) or rtc (Real-Time Chunking, for policies that "
        "support it; refused before anything is written otherwise); locked with the run")] = None
    # HOST:PORT: LeRobot's asynchronous engine
    policy_server: Annotated[str | None, Flag(
        "--policy-server", "LeRobot's asynchronous inference; the policy runs in LeRobot's policy server (python "
        "-m lerobot.async_inference.policy_server --host=H --port=P), which loads --policy from the same path; on "
        "a real arm the action queue runs in wall time (a receiver thread, as LeRobot's robot client), on the "
        "simulated arm each round trip becomes simulated time; locked", metavar="HOST:PORT")] = None
    actions_per_chunk: Annotated[int | None, Flag(
        "--actions-per-chunk", "--policy-server: actions the server returns per chunk (default: the policy's "
        "chunk_size); locked", metavar="N")] = None
    chunk_size_threshold: Annotated[float | None, Flag(
        "--chunk-size-threshold", "--policy-server: send an observation when the action queue is at or below "
        "this fraction of a chunk, 0..1 (default 0.5, LeRobot's); locked", metavar="F")] = None
    aggregate_fn: Annotated[str | None, Flag(
        "--aggregate-fn", "--policy-server: how a new chunk merges with queued actions, one of LeRobot's "
        "weighted_average (default), latest_only, average, conservative; locked", metavar="NAME")] = None
    execution_horizon: Annotated[int | None, Flag(
        "--rtc-execution-horizon", "--inference rtc: steps of the previous chunk a new one is inpainted against "
        "(default LeRobot's 10, at most the chunk size); locked", metavar="N", dest="execution_horizon")] = None
    max_guidance_weight: Annotated[float | None, Flag(
        "--rtc-max-guidance-weight", "--inference rtc: RTC's guidance weight cap (default LeRobot's 10); locked",
        metavar="W", dest="max_guidance_weight")] = None
    attention_schedule: Annotated[AttentionSchedule | None, Flag(
        "--rtc-attention-schedule", "--inference rtc: prefix weights over the horizon (default LeRobot's LINEAR); "
        "locked", dest="attention_schedule")] = None
    queue_threshold: Annotated[int | None, Flag(
        "--rtc-queue-threshold", "--inference rtc: start an inference when N actions or fewer are queued (default "
        "LeRobot's 30, half the chunk for chunks under 60); locked", metavar="N", dest="queue_threshold")] = None


class WorkersRequest(RequestPart):
    """Where the trials run: this process, or N workers with Ray."""

    count: Annotated[int | Literal["auto"], Flag(
        "--workers", "simulated arm only: run this many trials at a time: this process at once, the other N-1 on "
        "Ray workers as they start; the scoresheet is written in trial order, as a serial run writes it (default "
        "%(default)s; auto: the count a model of the run's costs predicts fastest, serial when parallel would not win)",
        metavar="N|auto", dest="workers", parse=_parse_workers, early=True)] = 1
    # False: all N on Ray, this process only records
    driver_worker: Annotated[bool, Flag(
        "--no-driver-worker", "with --workers: all N workers on Ray, this process only records (a cluster whose "
        "driver machine should run no trials)", parse=_parse_not, show=_show_not)] = True
    # an existing Ray cluster
    address: Annotated[str | None, Flag(
        "--address", "an existing Ray cluster to run --workers on (default: a local Ray runtime on loopback only); "
        "see docs/sweeps.md for what must protect a cluster")] = None
    ray_dashboard: Annotated[bool, Flag(
        "--ray-dashboard", "start Ray's dashboard for a local --workers run (on 127.0.0.1; off by default)")] = False
    on_ray: bool = False              # even one worker on Ray (a sweep's cells: the same path every time)

    @field_validator("count")
    @classmethod
    def _count(cls, value: int | str) -> int | str:
        if value != "auto" and not (isinstance(value, int) and 1 <= value <= MAX_WORKERS):
            raise ValueError(f"{value}: must be within 1..{MAX_WORKERS}")
        return value

    @property
    def parallel(self) -> bool:
        """The trials go to parallel workers: more than one, a Ray cluster named, or Ray asked for."""
        return ((isinstance(self.count, int) and self.count > 1) or bool(self.address) or self.on_ray
                or not self.driver_worker)


class RunRequest(RequestPart):
    """One run, as asked (module docstring). The fields' order is the order `harness run --help` lists their
    flags in."""

    protocol: Annotated[Path, Flag("protocol", parse=_parse_path)]
    resume: Annotated[bool, Flag("--resume", "continue the run's scoresheet where it stopped")] = False
    robot: RobotRequest = RobotRequest()
    # a checkpoint folder or a built-in; empty: the protocol's run.policy
    policies: Annotated[tuple[str, ...], Flag(
        "--policy", "a LeRobot pretrained folder, a Hugging Face Hub id ORG/NAME[@REVISION] (the local cache first; "
        "downloaded when HF_HUB_OFFLINE allows), or a built-in: expert, replay; two or more: a blind, interleaved "
        "comparison with sequential stopping (docs/comparisons.md)", parse=_parse_policies, show=_show_policies,
        repeat=True)] = ()
    # a comparison (two or more policies) hides which arm ran
    blind: Annotated[bool, Flag("--no-blind", "a comparison that shows which arm is which policy while it runs "
                                              "(simulation)", parse=_parse_not, show=_show_not)] = True
    # None: the protocol's
    rename_map: Annotated[dict[str, str] | None, Flag(
        "--rename-map", 'JSON map of camera keys, e.g. \'{"top": "camera1"}\'', parse=_parse_rename_map,
        show=_show_rename_map)] = None
    # None: scoresheets/<protocol>-<policy>.yaml
    scoresheet: Annotated[Path | None, Flag(
        "--scoresheet", "scoresheet path (default scoresheets/<protocol>-<policy>.yaml)", parse=_parse_path)] = None
    runs_dir: Annotated[Path, Flag("--runs-dir", "where per-trial evidence goes (default %(default)s/)",
                                   parse=_parse_path)] = Path("runs")
    # plain terminal mode, no TUI
    headless: Annotated[bool, Flag("--headless", "plain terminal mode, no TUI")] = False
    # the simulator paced at wall-clock speed
    realtime: Annotated[bool, Flag("--realtime", "pace the simulator at wall-clock speed (demos)")] = False
    evidence: EvidenceRequest = EvidenceRequest()
    dataset: DatasetRequest = DatasetRequest()
    placement: PlacementRequest = PlacementRequest()
    # torch device for LeRobot policies
    device: Annotated[str | None, Flag(
        "--device", "torch device for LeRobot policies (default: cuda if available)")] = None
    max_trials: Annotated[int | None, Flag(
        "--max-trials", "stop after this many attempts (the run stays resumable)")] = None
    # testing aid: (trial, step)
    inject_dropout: Annotated[tuple[int, int] | None, Flag(
        "--inject-dropout", "testing aid: freeze the sim's top camera in TRIAL from STEP on", metavar="TRIAL:STEP",
        parse=_parse_dropout, show=_show_dropout)] = None
    # ms of simulated time, "measured", a chunked model (`ChunkLatency`), or lock-step: three flags (`_fold_latency`)
    latency: Annotated[
        Latency,
        Flag("--latency-ms", "simulated arm: each action lands N ms of simulated time after its observation, the "
             "arm executing its last command meanwhile (default: lock-step); locked with the run", metavar="N",
             type=float, show=_show_latency_ms, staged_as="latency_ms"),
        Flag("--latency", "simulated arm: the latency model with each action's own measured policy time",
             choices=("measured",), show=_show_latency_measured, staged_as="latency_measured"),
        Flag("--latency-chunk-ms", "simulated arm, with --latency-ms N: an action the policy computes a new chunk "
             "for lands C ms after its observation (the others N ms), and the episode is counted in commands, as a "
             "paced real arm's is (what `harness twin` gives a chunking policy); locked with the run", metavar="C",
             type=float, show=_show_latency_chunk_ms, staged_as="latency_chunk_ms"),
    ] = None
    # how the simulated cameras draw (`models.render_profile`); None: default
    render_profile: Annotated[str | None, Flag(
        "--render-profile", "simulated arm: how the policy's camera frames are drawn: sized-v1 (default: frames up "
        "to 160 px from coarse meshes, 3x cheaper, validated in docs/benchmarks.md) or full-v1 (the full meshes at "
        "every size, as before); locked with the run", choices=tuple(p.value for p in RenderProfile))] = None
    inference: InferenceRequest = InferenceRequest()
    workers: WorkersRequest = WorkersRequest()
    # what the sheet is, locked with it, set by the command that builds the run and never by a `harness run` flag:
    # a rehearsal on the emulated arm (`{"rehearsal": ...}`) or a twin of another sheet (`{"twin_of": ...}`)
    provenance: dict[str, Any] | None = None

    @field_validator("policies")
    @classmethod
    def _policy_refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_policy_refs(value)   # its own one line (a HarnessInputError passes through pydantic unchanged)
        return value

    @field_validator("max_trials")
    @classmethod
    def _max_trials(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"{value}: must be at least 1")
        return value

    @field_validator("latency")
    @classmethod
    def _latency(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, float | int) and not (math.isfinite(value) and 0 <= value <= 10_000):
            raise ValueError(f"{value}: must be within 0..10000")
        return value

    @field_validator("inject_dropout")
    @classmethod
    def _dropout_at(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and (value[0] < 1 or value[1] < 0):
            raise ValueError(f"'{value[0]}:{value[1]}': TRIAL from 1, STEP from 0")
        return value

    @property
    def policy(self) -> str | None:
        """The policy asked for (one per run for now; comparison runs will take several)."""
        return self.policies[0] if self.policies else None

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> RunRequest:
        """A request from `harness run`'s flag values by argparse destination (`vars(args)`, a sweep condition,
        a rehearsal's flags): each parsed by its `RUN_FLAGS` entry; a bad one is one line naming the flag."""
        return cls.model_validate_flags({}, flags)

    def with_flags(self, flags: Mapping[str, Any]) -> RunRequest:
        """This request with more flag values over it (a sweep cell's condition, a rehearsal's desk)."""
        return RunRequest.model_validate_flags(self.model_dump(), flags)

    def updated(self, **fields: Any) -> RunRequest:
        """A copy with fields replaced (nested parts as dicts of their fields), validated again."""
        return RunRequest.model_validate_flags(_merge(self.model_dump(), fields), {})

    def command_line(self) -> list[str]:
        """`harness run` as a person would type this request (a rehearsal and a twin show it; never parsed by
        the harness itself): the protocol, then every flag whose value differs from the default request's, in
        `--help`'s order, typed by its `show`. Parsed, it gives this request again (but its `provenance`, which
        no flag sets, and a worker's evidence lanes)."""
        default = RunRequest(protocol=self.protocol)
        argv = ["run", str(self.protocol)]
        for spec in RUN_FLAGS.values():
            if not spec.option:
                continue
            if spec.shown(self) != spec.shown(default):
                argv += spec.typed(self)
        return argv

    @classmethod
    def model_validate_flags(cls, base: dict[str, Any], flags: Mapping[str, Any]) -> RunRequest:
        data = dict(base)
        for dest, value in flags.items():
            spec = RUN_FLAGS.get(dest)
            if spec is None:
                continue   # another command's argument (`func`, `verbose`), never a run's
            try:
                data = _merge(data, _nest((spec.staged_as,) if spec.staged_as else spec.fields, spec.parse(value)))
            except (ValueError, TypeError) as exc:
                raise HarnessInputError(None, spec.flag, str(exc)) from None
        _fold_latency(data)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            flag = FLAG_OF_FIELD.get(".".join(str(p) for p in error["loc"]), ".".join(str(p) for p in error["loc"]))
            message = str(error["msg"]).removeprefix("Value error, ")
            got = error.get("input")
            if error["type"] == "missing":
                message = "required"
            elif error["type"] != "value_error" and got is not None:
                message = f"{got!r}: {message}"
            raise HarnessInputError(None, flag, message) from None


def _fold_latency(data: dict[str, Any]) -> None:
    """`--latency-ms N`, `--latency measured` and `--latency-chunk-ms C` are one setting, `latency`: N, measured,
    or C at each new chunk and N between (`ChunkLatency`; N given before counts, as a sweep cell's condition over
    the sweep's; none: 0 ms, the queued actions land at once); measured with either of the others is refused."""
    if "latency_ms" not in data and "latency_measured" not in data and "latency_chunk_ms" not in data:
        return
    fixed, measured = data.pop("latency_ms", None), data.pop("latency_measured", None)
    chunk = data.pop("latency_chunk_ms", None)
    if fixed is not None and measured is not None:
        raise HarnessInputError(None, "--latency", "give --latency-ms N or --latency measured, not both")
    if measured is not None and measured != "measured":
        raise HarnessInputError(None, "--latency", f"{measured!r} is not 'measured' (--latency-ms N for a fixed one)")
    if chunk is None:
        data["latency"] = measured if measured is not None else fixed
        return
    if not (isinstance(chunk, float | int) and math.isfinite(chunk) and 0 <= chunk <= 10_000):
        raise HarnessInputError(None, "--latency-chunk-ms", f"{chunk}: must be within 0..10000")
    if measured is not None:
        raise HarnessInputError(None, "--latency-chunk-ms", "not with --latency measured: give the steps between "
                                                           "chunks a fixed latency (--latency-ms N)")
    before = data.get("latency")
    step = fixed if fixed is not None else before.step_ms if isinstance(before, ChunkLatency) else (
        before.get("step_ms") if isinstance(before, dict) else before)
    data["latency"] = {"step_ms": step if isinstance(step, float | int) else 0.0, "chunk_ms": chunk}


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _nest(fields: tuple[str, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in zip(fields, values, strict=True):
        *parents, leaf = path.split(".")
        level = nested
        for parent in parents:
            level = level.setdefault(parent, {})
        level[leaf] = value
    return nested


def _field(request: BaseModel, path: str) -> Any:
    value: Any = request
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _text(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def _typed(flag: str, value: Any) -> list[str]:
    """A flag's value as argparse holds it, typed on a command line (`--flag=value`, a switch alone)."""
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, list):
        return [f"{flag}={_text(item)}" for item in value]
    return [f"{flag}={_text(value)}"]


@dataclass(frozen=True)
class RunFlag:
    """One `harness run` flag as the parser, a sweep condition and a shown command line need it: a field's
    `Flag` with what its field says filled in (`collect_flags`)."""

    flag: str
    dest: str
    fields: tuple[str, ...]                # request paths the flag sets (`robot.kind`)
    parse: Callable[[Any], tuple[Any, ...]]
    show: Callable[..., Any]
    help: str | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    switch: bool = False                   # a yes/no flag (argparse's store_true)
    repeat: bool = False
    optional_value: bool = False
    early: bool = False
    staged_as: str | None = None

    @property
    def option(self) -> bool:
        """A flag (`--x`), not the positional protocol."""
        return self.flag.startswith("-")

    def shown(self, request: BaseModel) -> Any:
        """This flag's value as argparse would hold it for `request` (None or False: not given)."""
        return self.show(*(_field(request, path) for path in self.fields))

    def typed(self, request: BaseModel) -> list[str]:
        """This flag as a person types it for `request` (`--flag=value`, a switch alone, one per item; none)."""
        return _typed(self.flag, self.shown(request))


def _annotation_choices(annotation: Any) -> tuple[str, ...] | None:
    """The values a Literal or an enum allows, as a person types them; None for any other type."""
    if get_origin(annotation) is Literal:
        return tuple(str(v.value) if isinstance(v, Enum) else str(v) for v in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return tuple(str(member.value) for member in annotation)
    return None


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation


def collect_flags(model: type[BaseModel], default: BaseModel, prefix: str = "") -> Iterator[RunFlag]:
    """Every `Flag` on `model`'s fields (and its parts'), depth first in declaration order (`--help`'s order),
    its default read from `default`, an instance of `model`."""
    for name, info in model.model_fields.items():
        path = prefix + name
        if isinstance(info.annotation, type) and issubclass(info.annotation, RequestPart):
            yield from collect_flags(info.annotation, default, path + ".")
            continue
        for mark in info.metadata:
            if not isinstance(mark, Flag):
                continue
            if not (callable(mark.parse) and callable(mark.show)):   # a validator named like it, in the class body
                raise TypeError(f"{path}: {mark.flag}'s parse or show is not a function")
            base = _without_none(info.annotation)
            fields = (path, *mark.also)
            dest = mark.dest or mark.flag.lstrip("-").replace("-", "_")
            plain = mark.parse is _parse_same
            yield RunFlag(
                flag=mark.flag, dest=dest, fields=fields, parse=mark.parse, show=mark.show, help=mark.help,
                metavar=mark.metavar, staged_as=mark.staged_as, repeat=mark.repeat, optional_value=mark.optional_value,
                early=mark.early,
                type=mark.type or (base if plain and base in (int, float) else None),
                choices=mark.choices or _annotation_choices(base),
                switch=base is bool and mark.parse in (_parse_same, _parse_not),
                default=mark.show(*(_field(default, p) for p in fields)) if mark.flag.startswith("-") else None)


# every `harness run` flag by its argparse destination, from `RunRequest`'s fields (`Flag`), in `--help`'s order
RUN_FLAGS: dict[str, RunFlag] = {spec.dest: spec for spec in
                                 collect_flags(RunRequest, RunRequest(protocol=Path("protocol.yaml")))}
# the field a validation error names -> the flag a person typed
FLAG_OF_FIELD = {field: spec.flag for spec in RUN_FLAGS.values() for field in spec.fields}
FLAG_OF_FIELD["latency"] = "--latency-ms"
FLAG_OF_FIELD["evidence"] = "--no-video"

