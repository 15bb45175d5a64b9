"""Connecting to LeRobot's policy server: the one place that chooses between the simulated-time queue
(`async_policy`) and the wall-time one (`async_wall`), so neither module imports the other's user."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.protocol import JOINT_NAMES
from harness.policies.inference.async_client import ANSWER_TIMEOUT_S, PolicyServerClient, ServerAddress
from harness.policies.inference.async_policy import AsyncServerPolicy, AsyncSettings
from harness.policies.inference.async_wall import WallClockAsyncPolicy
from harness.policies.lerobot_policy import (
    IMAGE_PREFIX,
    camera_shapes,
    image_size,
    load_policy_config,
    normalize_rename_map,
    saved_rename_map,
)


def connect_async_policy(policy_path: str | Path, task: str, settings: AsyncSettings, fps: int,
                         rename_map: dict[str, str] | None = None, device: str | None = None,
                         answer_timeout_s: float = ANSWER_TIMEOUT_S,
                         wall_clock: Callable[[], float] | None = None) -> AsyncServerPolicy | WallClockAsyncPolicy:
    """Tell the server at `settings.server` to load `policy_path` and return the policy that drives it. The
    server loads the same path, so it runs on this machine or one that shares the folder. With `wall_clock`
    (a paced real arm's clock) the queue runs in wall time (`async_wall`); without, in simulated time."""
    from lerobot.async_inference.constants import SUPPORTED_POLICIES
    from lerobot.async_inference.helpers import RemotePolicyConfig
    from lerobot.utils.feature_utils import hw_to_dataset_features

    path = Path(policy_path).resolve()
    if not (path / "config.json").is_file():
        raise HarnessInputError(path, "config.json", "not a LeRobot pretrained policy folder")
    try:
        address = ServerAddress.parse(settings.server)
    except ValueError as exc:
        raise HarnessInputError(None, "--policy-server", str(exc)) from None
    config = load_policy_config(path)
    if config.type not in SUPPORTED_POLICIES:
        raise HarnessInputError(path, "--policy-server", f"LeRobot's policy server does not run {config.type} "
                                                         f"policies (it runs {', '.join(SUPPORTED_POLICIES)})")
    renames = normalize_rename_map(rename_map or saved_rename_map(path))
    shapes = camera_shapes(config, renames)
    motors: dict[str, Any] = {f"{joint}.pos": float for joint in JOINT_NAMES}
    cameras = {cam: (shape[1], shape[2], 3) for cam, shape in shapes.items()}
    features = hw_to_dataset_features({**motors, **cameras}, "observation", use_video=False)
    # LeRobot 0.6.1's server resizes each image to the policy's feature of the same name before its rename step
    # runs, so a renamed camera goes out under the policy's name and the server is given no rename map
    names = {cam: renames[IMAGE_PREFIX + cam].removeprefix(IMAGE_PREFIX) for cam in shapes
             if IMAGE_PREFIX + cam in renames}
    served = hw_to_dataset_features({**motors, **{names.get(c, c): hw for c, hw in cameras.items()}}, "observation",
                                    use_video=False)
    remote = RemotePolicyConfig(config.type, str(path), served, settings.actions_per_chunk, device or "cpu", {})
    client = PolicyServerClient(address, fps, answer_timeout_s, camera_names=names)
    try:
        client.connect(remote)
    except BaseException:
        client.close()
        raise
    name = f"{config.type}:{path.name} via {address}"
    if wall_clock is not None:
        return WallClockAsyncPolicy(client, settings, task, tuple(shapes), image_size(shapes), name=name,
                                    now=wall_clock, answer_timeout_s=answer_timeout_s)
    return AsyncServerPolicy(client, settings, task, fps, features, tuple(shapes), image_size(shapes), name=name)
