"""`RunRequest`: everything one `harness run` asks for, typed, validated and frozen.

It is built once, from the command line (`RunRequest.from_flags(vars(args))`), from a sweep cell (its
condition's settings over the sweep's own) or from a rehearsal (its flags over the emulated desk's), and is
then handed down as it is: to the scoresheet's resolution, to the engine's composition and to Ray workers,
which receive it pickled. Nothing below the command handlers reads parsed arguments, and nothing builds an
argument list to parse it again.

A field left at None was not asked for: on `--resume` the scoresheet's locked value stands (asking for another
is refused), and on a new sheet the protocol's `run:` section (robot, policy, port, cameras, rename map) or the
harness's default fills it. `RUN_FLAGS` maps every `harness run` flag (its argparse destination) to the fields
it sets; `tests/test_run_request.py` checks that every flag of the parser is in it and reaches sweeps and
rehearsals.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import HarnessInputError
from harness.models.run_settings import ChunkLatency, InferenceEngine, Latency, RobotKind

VideoChoice = Literal["failures", "all", "none"]
RecordCodec = Literal["h264", "libsvtav1", "hevc"]
AttentionSchedule = Literal["ZEROS", "ONES", "LINEAR", "EXP"]
MAX_WORKERS = 256


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RobotRequest(_Part):
    """Which arm, and how this machine reaches it; unset: the protocol's `run:` section."""

    kind: RobotKind | None = None
    port: str | None = None                      # a real arm's serial port
    robot_id: str | None = "harness_follower"    # LeRobot's calibration id
    cameras: dict[str, str] = Field(default_factory=dict)   # name -> source spec (`robots.camera_spec`)


class EvidenceRequest(_Part):
    """Which attempts get videos, and how they are drawn."""

    video: VideoChoice | None = None     # None: failures on the simulator, all on a real arm
    no_video: bool = False               # = video none; on a real arm: final frames only
    video_fps: float = 10.0
    video_size: tuple[int, int] = (320, 240)
    lanes: int | None = None             # evidence writer lanes (a parallel run's worker: 0, drawn inline)

    @field_validator("video_fps")
    @classmethod
    def _fps(cls, value: float) -> float:
        if not (math.isfinite(value) and 0.5 <= value <= 120):
            raise ValueError(f"{value}: must be within 0.5..120")
        return value

    @field_validator("video_size")
    @classmethod
    def _size(cls, value: tuple[int, int]) -> tuple[int, int]:
        width, height = value
        if not (16 <= width <= 4096 and 16 <= height <= 4096) or width % 2 or height % 2:
            raise ValueError(f"'{width}x{height}': width and height must be even, 16..4096")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EvidenceRequest:
        if self.no_video and self.video not in (None, "none"):
            raise ValueError(f"contradicts --video {self.video}")
        return self


class DatasetRequest(_Part):
    """`--record-dataset`: the rollouts also written as a LeRobot v3.0 dataset."""

    record: bool = False
    folder: Path | None = None           # None: runs/<scoresheet>/dataset
    size: tuple[int, int] = (128, 96)
    codec: RecordCodec = "h264"
    fps: int | None = None               # None: the control rate


class PlacementRequest(_Part):
    """A real arm's operator aids: proposals from the bowl calibration, guided placement from the trained spot."""

    bowl_calibration: Path | None = None
    trained_spot: Path | None = None
    tolerance: tuple[float, float] = (0.5, 10.0)    # cm, degrees

    @field_validator("tolerance")
    @classmethod
    def _positive(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not all(math.isfinite(v) and v > 0 for v in value):
            raise ValueError(f"'{value[0]:g},{value[1]:g}': both must be positive numbers")
        return value


class InferenceRequest(_Part):
    """The inference engine asked for and its settings; None everywhere: LeRobot's synchronous engine (or, on a
    resume, the locked one). Field names are those of the locked `inference` block."""

    engine: Literal[InferenceEngine.SYNC, InferenceEngine.RTC] | None = None
    policy_server: str | None = None      # HOST:PORT: LeRobot's asynchronous engine
    actions_per_chunk: int | None = None
    chunk_size_threshold: float | None = None
    aggregate_fn: str | None = None
    execution_horizon: int | None = None
    max_guidance_weight: float | None = None
    attention_schedule: AttentionSchedule | None = None
    queue_threshold: int | None = None


class WorkersRequest(_Part):
    """Where the trials run: this process, or N workers with Ray."""

    count: int | Literal["auto"] = 1
    driver_worker: bool = True        # False: all N on Ray, this process only records
    address: str | None = None        # an existing Ray cluster
    ray_dashboard: bool = False
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


class RunRequest(_Part):
    """One run, as asked (module docstring)."""

    protocol: Path
    policies: tuple[str, ...] = ()        # a checkpoint folder or a built-in; empty: the protocol's run.policy
    blind: bool = True                    # a comparison (two or more policies) hides which arm ran
    render_profile: str | None = None     # how the simulated cameras draw (`models.render_profile`); None: default
    resume: bool = False
    scoresheet: Path | None = None        # None: scoresheets/<protocol>-<policy>.yaml
    runs_dir: Path = Path("runs")
    headless: bool = False                # plain terminal mode, no TUI
    realtime: bool = False                # the simulator paced at wall-clock speed
    device: str | None = None             # torch device for LeRobot policies
    max_trials: int | None = None
    rename_map: dict[str, str] | None = None   # None: the protocol's
    latency: Latency = None   # ms of simulated time, "measured", a chunked model (`ChunkLatency`), or lock-step
    inject_dropout: tuple[int, int] | None = None        # testing aid: (trial, step)
    robot: RobotRequest = RobotRequest()
    inference: InferenceRequest = InferenceRequest()
    evidence: EvidenceRequest = EvidenceRequest()
    dataset: DatasetRequest = DatasetRequest()
    placement: PlacementRequest = PlacementRequest()
    workers: WorkersRequest = WorkersRequest()
    # what the sheet is, locked with it, set by the command that builds the run and never by a `harness run` flag:
    # a rehearsal on the emulated arm (`{"rehearsal": ...}`) or a twin of another sheet (`{"twin_of": ...}`)
    provenance: dict[str, Any] | None = None

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
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
    def _dropout(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
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


# flag values as argparse (str, int, float, bool, lists) or a sweep file's YAML (also numbers, lists, maps) give them

def _same(value: Any) -> tuple[Any, ...]:
    return (value,)


def _path(value: Any) -> tuple[Any, ...]:
    return (Path(value) if value not in (None, "") else None,)


def _size(text: Any) -> tuple[Any, ...]:
    if isinstance(text, list | tuple):
        return (tuple(text),)
    try:
        width, height = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise ValueError(f"'{text}' is not WIDTHxHEIGHT") from None
    return ((width, height),)


def _record_size(text: Any) -> tuple[Any, ...]:
    width, sep, height = str(text).lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise ValueError(f"'{text}' is not WIDTHxHEIGHT (e.g. 128x96)")
    return ((int(width), int(height)),)


def _dropout(text: Any) -> tuple[Any, ...]:
    if not text:
        return (None,)
    trial_s, _, step_s = str(text).partition(":")
    try:
        return ((int(trial_s), int(step_s or 0)),)
    except ValueError:
        raise ValueError(f"'{text}' is not TRIAL:STEP") from None


def _tolerance(text: Any) -> tuple[Any, ...]:
    try:
        cm, deg = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"{str(text)!r} is not CM,DEG (e.g. 0.5,10)") from None
    if not (math.isfinite(cm) and math.isfinite(deg)) or cm <= 0 or deg <= 0:
        raise ValueError(f"{str(text)!r}: both must be positive numbers")
    return ((cm, deg),)


def _rename_map(value: Any) -> tuple[Any, ...]:
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


def _cameras(items: Any) -> tuple[Any, ...]:
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


def _policies(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ((),)
    return (tuple(str(v) for v in value) if isinstance(value, list | tuple) else (str(value),),)


def _record_dataset(value: Any) -> tuple[Any, ...]:
    """None: off; "" (the flag alone): on, in the default folder; a folder."""
    if value is None or value is False:
        return (False, None)
    if value is True or value == "":
        return (True, None)
    return (True, Path(value))


def _workers(value: Any) -> tuple[Any, ...]:
    if value == "auto":
        return (value,)
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a number or auto")
    try:
        return (int(value),)
    except (TypeError, ValueError):
        raise ValueError(f"'{value}' is not a number or auto") from None


def _not(value: Any) -> tuple[Any, ...]:
    return (not value,)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


@dataclass(frozen=True)
class RunFlag:
    """One `harness run` flag: its spelling, the request fields it sets, and how its value becomes theirs."""

    flag: str
    fields: tuple[str, ...]
    parse: Callable[[Any], tuple[Any, ...]] = _same
    staged_as: str | None = None   # set through a staging key first (two flags for one field: `_fold_latency`)


RUN_FLAGS: dict[str, RunFlag] = {
    "protocol": RunFlag("protocol", ("protocol",), _path),
    "resume": RunFlag("--resume", ("resume",)),
    "robot": RunFlag("--robot", ("robot.kind",)),
    "port": RunFlag("--port", ("robot.port",)),
    "robot_id": RunFlag("--robot-id", ("robot.robot_id",)),
    "camera": RunFlag("--camera", ("robot.cameras",), _cameras),
    "policy": RunFlag("--policy", ("policies",), _policies),
    "rename_map": RunFlag("--rename-map", ("rename_map",), _rename_map),
    "no_blind": RunFlag("--no-blind", ("blind",), _not),
    "render_profile": RunFlag("--render-profile", ("render_profile",)),
    "scoresheet": RunFlag("--scoresheet", ("scoresheet",), _path),
    "runs_dir": RunFlag("--runs-dir", ("runs_dir",), _path),
    "headless": RunFlag("--headless", ("headless",)),
    "realtime": RunFlag("--realtime", ("realtime",)),
    "video_fps": RunFlag("--video-fps", ("evidence.video_fps",)),
    "video_size": RunFlag("--video-size", ("evidence.video_size",), _size),
    "video": RunFlag("--video", ("evidence.video",)),
    "no_video": RunFlag("--no-video", ("evidence.no_video",)),
    "record_dataset": RunFlag("--record-dataset", ("dataset.record", "dataset.folder"), _record_dataset),
    "record_size": RunFlag("--record-size", ("dataset.size",), _record_size),
    "record_codec": RunFlag("--record-codec", ("dataset.codec",)),
    "record_fps": RunFlag("--record-fps", ("dataset.fps",)),
    "bowl_calibration": RunFlag("--bowl-calibration", ("placement.bowl_calibration",), _path),
    "trained_spot": RunFlag("--trained-spot", ("placement.trained_spot",), _path),
    "placement_tolerance": RunFlag("--placement-tolerance", ("placement.tolerance",), _tolerance),
    "device": RunFlag("--device", ("device",)),
    "max_trials": RunFlag("--max-trials", ("max_trials",)),
    "inject_dropout": RunFlag("--inject-dropout", ("inject_dropout",), _dropout),
    "latency_ms": RunFlag("--latency-ms", ("latency",), staged_as="latency_ms"),
    "latency": RunFlag("--latency", ("latency",), staged_as="latency_measured"),
    "latency_chunk_ms": RunFlag("--latency-chunk-ms", ("latency",), staged_as="latency_chunk_ms"),
    "inference": RunFlag("--inference", ("inference.engine",)),
    "policy_server": RunFlag("--policy-server", ("inference.policy_server",)),
    "actions_per_chunk": RunFlag("--actions-per-chunk", ("inference.actions_per_chunk",)),
    "chunk_size_threshold": RunFlag("--chunk-size-threshold", ("inference.chunk_size_threshold",)),
    "aggregate_fn": RunFlag("--aggregate-fn", ("inference.aggregate_fn",)),
    "execution_horizon": RunFlag("--rtc-execution-horizon", ("inference.execution_horizon",)),
    "max_guidance_weight": RunFlag("--rtc-max-guidance-weight", ("inference.max_guidance_weight",)),
    "attention_schedule": RunFlag("--rtc-attention-schedule", ("inference.attention_schedule",)),
    "queue_threshold": RunFlag("--rtc-queue-threshold", ("inference.queue_threshold",)),
    "workers": RunFlag("--workers", ("workers.count",), _workers),
    "no_driver_worker": RunFlag("--no-driver-worker", ("workers.driver_worker",), _not),
    "address": RunFlag("--address", ("workers.address",)),
    "ray_dashboard": RunFlag("--ray-dashboard", ("workers.ray_dashboard",)),
}
# the field a validation error names -> the flag a person typed
FLAG_OF_FIELD = {field: spec.flag for spec in RUN_FLAGS.values() for field in spec.fields}
FLAG_OF_FIELD["latency"] = "--latency-ms"
FLAG_OF_FIELD["evidence"] = "--no-video"
