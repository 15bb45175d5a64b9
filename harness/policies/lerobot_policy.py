"""Any LeRobot pretrained policy folder (ACT, SmolVLA, diffusion, ...), driven through
LeRobot's own loader, pre/post processors and synchronous inference engine."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.run_settings import InferenceEngine
from harness.policies.base import BasePolicy, InferenceStats, TrialContext
from harness.policies.inference.rtc_policy import RtcCall, RtcSettings, SimTimeRtc
from harness.policies.inference.rtc_wall import WallClockRtc
from harness.scratch import library_files_removed

IMAGE_PREFIX = "observation.images."


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1



def check_device(device: str | None, field: str = "--device") -> None:
    """A torch device name that torch parses and this machine has, checked before anything is locked or
    written: a built-in policy ignores the device, so a typo would otherwise run a whole protocol."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise HarnessInputError(None, field, f"{device[:60]!r} is not a torch device (cpu, cuda, cuda:0, mps)"
                                ) from None
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()}
    if not available.get(parsed.type, False):
        raise HarnessInputError(None, field, f"{device[:60]!r}: this machine has no such device")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise HarnessInputError(None, field, f"{device!r}: this machine has {torch.cuda.device_count()} CUDA devices")


def load_policy_config(path: str | Path) -> Any:
    """LeRobot's `PreTrainedConfig.from_pretrained`, without the tmp*.json it leaves in the temporary folder on every
    load (also in a program that calls `harness.evaluate`, whose temporary folder the harness does not own)."""
    from lerobot.configs.policies import PreTrainedConfig

    with library_files_removed():
        return PreTrainedConfig.from_pretrained(path)


@dataclass(frozen=True)
class ThreadPolicy:
    """How many threads torch may use for inference, and why; recorded with the run.

    torch's default (one thread per core, plus spinning OpenMP workers) fights the simulator
    and the evidence writer for the same cores: on 2 cores the loop's own overhead rose from
    ~1 ms to ~38 ms per step. Inference gets the cores nobody else needs.
    """

    cores: int
    reserved: int
    torch_threads: int

    @classmethod
    def for_cores(cls, cores: int, reserved: int) -> ThreadPolicy:
        return cls(cores=cores, reserved=reserved, torch_threads=max(1, cores - reserved))

    def apply(self) -> None:
        import torch

        torch.set_num_threads(self.torch_threads)

    def record(self) -> dict[str, int]:
        return {"cores": self.cores, "reserved_cores": self.reserved, "torch_threads": self.torch_threads}


def check_engine(policy: Any, engine: InferenceEngine, path: Path) -> None:
    """Refuse an engine the policy cannot run with, in one line (exit 2)."""
    if engine is InferenceEngine.SYNC:
        return
    if engine is InferenceEngine.RTC:
        from lerobot.rollout.inference.rtc import supports_rtc_inference

        if not supports_rtc_inference(policy):
            raise HarnessInputError(path, "--inference", f"rtc: {policy.name} has no Real-Time Chunking support "
                                                         "(LeRobot's supports_rtc() is False); use --inference sync")
        return
    raise HarnessInputError(path, "--inference", f"'{engine}' is not an inference engine (sync, rtc)")


def policy_supports_rtc(path: str | Path) -> bool:
    """Whether LeRobot's policy class for this checkpoint implements Real-Time Chunking (overrides
    `supports_rtc`), read from its config without loading weights: a sweep decides from it which cells an RTC
    condition applies to. The run itself still asks LeRobot's `supports_rtc_inference` of the loaded policy."""
    import json

    from lerobot.policies.factory import get_policy_class
    from lerobot.policies.pretrained import PreTrainedPolicy

    try:
        kind = json.loads((Path(path) / "config.json").read_text())["type"]
        policy_class = get_policy_class(kind)
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        return False
    return policy_class.supports_rtc is not PreTrainedPolicy.supports_rtc


def saved_rename_map(path: str | Path) -> dict[str, str]:
    """The rename map a policy was trained with (`lerobot-train --rename_map`), from its saved preprocessor:
    what the card's SmolVLA command feeds `camera1..` with; empty when it has none."""
    import json

    try:
        steps = json.loads((Path(path) / "policy_preprocessor.json").read_text()).get("steps", [])
    except (OSError, ValueError, AttributeError):
        return {}
    for step in steps:
        if isinstance(step, dict) and step.get("registry_name") == "rename_observations_processor":
            value = (step.get("config") or {}).get("rename_map") or {}
            if isinstance(value, dict):
                return {str(k): str(v) for k, v in value.items()}
    return {}


def ignores_observation_while_queued(config: Any) -> bool:
    """Whether a LeRobot policy's `select_action` pops a queued action without looking at the observation:
    ACT without temporal ensembling (it predicts a chunk only when its queue is empty), SmolVLA with one
    observation step (its observation queue holds only the latest, which the next prediction replaces).
    Anything else (diffusion's observation history, ACT's ensembling) looks at every frame."""
    if config.type == "act":
        return getattr(config, "temporal_ensemble_coeff", None) is None
    if config.type == "smolvla":
        return getattr(config, "n_obs_steps", 1) == 1
    return False


def _chunk_queue(policy: Any) -> Any:
    """The queue of a chunked LeRobot policy's remaining actions (ACT and diffusion keep one as
    `_action_queue`, SmolVLA as `_queues["action"]`; refilled, a new chunk starts), or None when it has none."""
    queue = getattr(policy, "_action_queue", None)
    if queue is None:
        queue = (getattr(policy, "_queues", None) or {}).get("action")
    return queue


EMPTY_CAMERA_PREFIX = IMAGE_PREFIX + "empty_camera_"


def camera_shapes(config: Any, rename_map: dict[str, str]) -> dict[str, tuple[int, ...]]:
    """The robot's camera names a policy reads (its visual inputs, renamed back through a normalized
    `rename_map`), each with the (channels, height, width) it was trained on.

    A policy that pads missing cameras with blank images (SmolVLA's `empty_cameras`) reads only the robot's
    cameras the rename map feeds it, as in training: the card's command maps top and wrist onto camera1 and
    camera2, camera3 and `empty_camera_*` stay blank."""
    from lerobot.configs.types import FeatureType

    inverse = {v: k for k, v in rename_map.items()}
    pads = rename_map and getattr(config, "empty_cameras", 0) > 0
    return {inverse.get(key, key).removeprefix(IMAGE_PREFIX): tuple(feature.shape)
            for key, feature in config.input_features.items()
            if feature.type == FeatureType.VISUAL and not key.startswith(EMPTY_CAMERA_PREFIX)
            and not (pads and key not in inverse)}


def image_size(shapes: dict[str, tuple[int, ...]]) -> tuple[int, int] | None:
    """(width, height) of the first camera: the simulator renders at the size the policy was trained on."""
    for _, height, width in shapes.values():
        return (width, height)
    return None


def normalize_rename_map(rename_map: dict[str, str]) -> dict[str, str]:
    """Accept `{"top": "camera1"}` as well as LeRobot's full `observation.images.*` keys."""
    def full(key: str) -> str:
        return key if key.startswith("observation.") else IMAGE_PREFIX + key
    return {full(k): full(v) for k, v in rename_map.items()}


class LeRobotPolicy(BasePolicy):
    def __init__(self, path: str | Path, task: str, device: str | None = None,
                 rename_map: dict[str, str] | None = None, robot_type: str = "so101_follower",
                 threads: ThreadPolicy | None = None, engine: InferenceEngine = InferenceEngine.SYNC,
                 rtc: RtcSettings | None = None,
                 fps: int = 30, latency_ms: float | str | None = None,
                 wall_clock: Callable[[], float] | None = None) -> None:
        """`threads` defaults to every core but one (the simulator's or the robot I/O's). `engine`: "sync"
        (LeRobot's `SyncInferenceEngine`) or "rtc" (LeRobot's Real-Time Chunking with `rtc`, its defaults
        when None: replayed in simulated time at `fps` with `latency_ms` (`rtc_policy`), or, given the paced
        arm's `wall_clock`, on an inference thread beside it in wall time (`rtc_wall`)), refused here,
        before anything is locked, for a policy LeRobot's own `supports_rtc_inference` says has no RTC.
        An empty `rename_map` takes the one the policy was trained with (its saved preprocessor's)."""
        import torch
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        from lerobot.rollout.inference.sync import SyncInferenceEngine
        from lerobot.utils.feature_utils import hw_to_dataset_features

        from harness.models.protocol import JOINT_NAMES

        path = Path(path)
        if engine not in tuple(InferenceEngine):
            raise HarnessInputError(path, "--inference", f"'{engine}' is not an inference engine (sync, rtc)")
        engine = InferenceEngine(engine)
        if not (path / "config.json").is_file():
            raise HarnessInputError(path, "config.json", "not a LeRobot pretrained policy folder")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.threads = threads or ThreadPolicy.for_cores(available_cores(), reserved=1)
        self.threads.apply()
        config = load_policy_config(path)
        config.device = self.device
        config.pretrained_path = path
        self.name = f"{config.type}:{path.name}"
        self.rename_map = normalize_rename_map(rename_map or saved_rename_map(path))
        self.rtc: RtcSettings | None = None
        if engine is InferenceEngine.RTC and hasattr(config, "rtc_config"):   # RTC's processor is made with the policy
            self.rtc = rtc or RtcSettings.defaults(config.chunk_size)
            self.rtc.check(config.chunk_size, path)
            config.rtc_config = self.rtc.rtc_config()
        policy = get_policy_class(config.type).from_pretrained(str(path), config=config)
        check_engine(policy, engine, path)
        policy.to(self.device)
        policy.eval()
        self._policy = policy
        self.chunk_switches: int | None = 0 if _chunk_queue(policy) is not None else None
        self._frames_idle_while_queued = ignores_observation_while_queued(config)
        pre, post = make_pre_post_processors(
            policy_cfg=config, pretrained_path=str(path),
            preprocessor_overrides={
                "device_processor": {"device": self.device},
                "rename_observations_processor": {"rename_map": self.rename_map},
            },
        )
        self._image_shapes = camera_shapes(config, self.rename_map)
        self.camera_keys = tuple(self._image_shapes)
        # (width, height) the policy was trained on: the simulator renders at this size
        self.image_size = image_size(self._image_shapes)
        motors = {f"{name}.pos": float for name in JOINT_NAMES}
        hw_obs = {**motors, **{cam: (480, 640, 3) for cam in self.camera_keys}}
        self._features = {**hw_to_dataset_features(motors, "action"), **hw_to_dataset_features(hw_obs, "observation")}
        self._action_keys = list(motors)
        self._rtc: SimTimeRtc | WallClockRtc | None = None
        self._held: dict[str, float] | None = None
        self._sync_inference_ms: list[float] = []
        if self.rtc is not None:
            call = RtcCall(policy, pre, post, self._features, task, self.device, robot_type,
                           self.rtc.execution_horizon)
            self._rtc = (SimTimeRtc(call, self.rtc, fps, latency_ms) if wall_clock is None
                         else WallClockRtc(call, self.rtc, fps, wall_clock))
            self.chunk_switches = 0
        self._engine = SyncInferenceEngine(policy, pre, post, self._features, self._action_keys, task,
                                           self.device, robot_type)
        self._engine.start()

    def warm_up(self, observation: dict[str, Any], runs: int = 3) -> float:
        """Run a few inferences (first calls allocate and compile); returns the median ms."""
        import statistics
        import time

        times = []
        for _ in range(runs):
            self._engine.reset()
            t0 = time.perf_counter()
            if self._rtc is not None:
                self._rtc.infer(observation, 0, None)
            else:
                self.select_action(observation)
            times.append(1000 * (time.perf_counter() - t0))
        self._engine.reset()
        if self._rtc is not None:
            self._rtc.reset()
        return statistics.median(times)

    def reset(self, context: TrialContext) -> None:
        self._engine.reset()
        self._sync_inference_ms = []
        if self._rtc is not None:
            self._rtc.reset()
            self._held = None
        if self.chunk_switches is not None:
            self.chunk_switches = 0

    def inference_stats(self) -> InferenceStats:
        """Chunks started; under RTC also what the arm experienced, as an asynchronous client reports it."""
        if self._rtc is None:
            return InferenceStats(chunk_switches=self.chunk_switches, inference_ms=tuple(self._sync_inference_ms))
        return InferenceStats(round_trips_ms=tuple(self._rtc.round_trips_ms), clock=self._rtc.clock,
                              queue_underruns=self._rtc.queue_underruns, chunk_switches=self.chunk_switches,
                              rtc_inference_delays=tuple(self._rtc.inference_delays),
                              inference_ms=tuple(self._rtc.inference_ms))

    def end_episode(self) -> None:
        """RTC's inference thread stops with the episode (a no-op otherwise); the engine calls this on every way
        out of an episode."""
        if self._rtc is not None:
            self._rtc.end_episode()

    def reads_frames_next(self) -> bool:
        if self._rtc is not None or not self._frames_idle_while_queued:
            return True
        queue = _chunk_queue(self._policy)
        return queue is None or len(queue) == 0

    def computes_next(self) -> bool:
        """A new chunk (or, unchunked, every action) under the synchronous engine; never under RTC, whose chunks
        are computed beside the loop (the arm never waits for one)."""
        if self._rtc is not None:
            return False
        queue = _chunk_queue(self._policy)
        return queue is None or len(queue) == 0

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        from lerobot.utils.feature_utils import build_dataset_frame

        if self._rtc is not None:
            from harness.policies.inference.async_policy import next_command

            values = self._rtc.next_action(observation)
            self.chunk_switches = self._rtc.chunk_switches
            self._held = next_command(values, self._held, observation)
            return dict(self._held)

        frame = build_dataset_frame(self._features, observation, prefix="observation")
        queue = _chunk_queue(self._policy)
        new_chunk = queue is None or len(queue) == 0   # this call predicts (a chunk, or a single action)
        if new_chunk and queue is not None and self.chunk_switches is not None:
            self.chunk_switches += 1
        started = time.perf_counter()
        action = self._engine.get_action(frame)
        if new_chunk:
            self._sync_inference_ms.append(1000 * (time.perf_counter() - started))
        return {key: float(value) for key, value in zip(self._action_keys, action.tolist(), strict=True)}

    def close(self) -> None:
        self.end_episode()
        self._engine.stop()
