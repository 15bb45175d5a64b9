"""`harness collect`: builds the simulated arm, the policy and LeRobot's dataset writer from
arguments, runs `harness.data.collector.Collector`, then writes the dataset's meta files and card."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.data.acceptance import AcceptMode
from harness.data.collector import Collector, CollectResult, CollectSettings, check_fps
from harness.errors import HarnessInputError
from harness.models.checkpoint import hub_ref
from harness.models.protocol import file_sha256, load_protocol
from harness.models.render_profile import DEFAULT_PROFILE, RenderProfile
from harness.models.run_settings import SO101_ROBOT_TYPE, BuiltinPolicy, RunSettings
from harness.policies.hub import policy_fingerprint


@dataclass(frozen=True)
class CollectRequest:
    protocol: Path
    policy: str
    episodes: int
    output: Path
    accept: AcceptMode = AcceptMode.STRICT
    fps: int | None = None                 # None: the protocol's rate
    cameras: tuple[str, ...] = ("top", "wrist")
    image_size: tuple[int, int] = (640, 480)
    seed: int = 0
    max_attempts: int | None = None
    checkpoint_every: int = 10
    device: str | None = None
    render_profile: RenderProfile = DEFAULT_PROFILE   # how the recorded frames are drawn; on the dataset's card


def default_output(protocol: Path, policy: str) -> Path:
    name = Path(policy.rstrip("/")).name or policy
    return Path("datasets") / f"{protocol.stem}-{name}"


def _quiet_datasets() -> None:
    """No `Map` progress bar per saved episode from Hugging Face `datasets`: its environment switch, set before
    the library loads, is the one LeRobot's `SuppressProgressBars` cannot undo (it re-enables the bars on exit,
    which switched off `datasets.disable_progress_bars()` after the first episodes)."""
    import os
    import sys
    import warnings

    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", message="Cannot enable progress bars")   # LeRobot's re-enable, refused
    if "datasets" in sys.modules:   # loaded already: at least off until something turns them on
        sys.modules["datasets"].disable_progress_bars()


def collect(request: CollectRequest, progress: Callable[[str], None] = print) -> CollectResult:
    """Collect until `episodes` are accepted; safe to rerun after any interruption."""
    _quiet_datasets()
    from harness.app.build import release_torque
    from harness.app.parts import make_policy, make_sim_robot
    from harness.data.collect_meta import provenance_record, write_collection_files
    from harness.run.dataset_sink import DatasetSink
    from harness.sim.scene import PHYSICS_DT

    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.CRITICAL)  # torchcodec fallback noise
    if request.episodes < 1:
        raise HarnessInputError(None, "--episodes", f"{request.episodes}: must be at least 1")
    if request.checkpoint_every < 1:
        raise HarnessInputError(None, "--checkpoint-every", "must be at least 1")
    loaded = load_protocol(request.protocol)
    fps = request.fps or loaded.fps
    check_fps(fps, PHYSICS_DT)
    protocol = loaded.model_copy(update={"fps": fps})
    if (BuiltinPolicy.named(request.policy) is None and not Path(request.policy).is_dir()
            and hub_ref(request.policy) is None):
        raise HarnessInputError(None, "--policy", f"'{request.policy}' is neither a built-in policy, a folder nor a "
                                                  "Hugging Face Hub id (ORG/NAME[@REVISION])")
    settings = CollectSettings(
        protocol_name=protocol.name, protocol_sha256=file_sha256(request.protocol), policy_ref=request.policy,
        policy_fingerprint=policy_fingerprint(request.policy), accept=request.accept, fps=fps,
        cameras=request.cameras, image_size=request.image_size, seed=request.seed,
        checkpoint_every=request.checkpoint_every, render_profile=request.render_profile,
    )
    progress(f"{request.output}: collecting {request.episodes} accepted episodes ({request.accept.value}) with "
             f"{request.policy} on {request.protocol} at {fps} Hz")
    import av

    av.logging.set_libav_level(av.logging.ERROR)  # LeRobot hands libav back its default callback: x264 stats
    policy = make_policy(request.policy, protocol, RunSettings(), request.device)
    try:
        robot = make_sim_robot(protocol, policy, realtime=False, render_profile=request.render_profile)
    except BaseException:
        policy.close()
        raise
    root = request.output

    def open_sink() -> DatasetSink:
        return DatasetSink(root, fps, list(request.cameras), request.image_size, protocol.task,
                           robot_type=SO101_ROBOT_TYPE)

    collector = Collector(protocol, settings, root, robot, policy, open_sink, progress=progress)
    try:
        result = collector.run(request.episodes, request.max_attempts)
    finally:
        release_torque(robot)
        policy.close()
    if collector.committed_episodes() > 0:
        import harness.policies.scripted as scripted

        code = Path(scripted.__file__) if BuiltinPolicy.named(request.policy) is not None else None
        provenance = provenance_record(protocol, request.protocol, settings, robot.world, code)
        write_collection_files(root, collector.summary(), settings, provenance)
    return result
