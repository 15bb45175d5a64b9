"""Small LeRobot v3.0 datasets made here, written by LeRobot's own `LeRobotDataset`, with the cube
at known pixel positions: what the validator and coverage tools are tested on (no hub downloads)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.models.protocol import JOINT_NAMES
from harness.models.run_settings import SO101_ROBOT_TYPE

CUBE_PX = 10


@dataclass(frozen=True)
class SyntheticDataset:
    root: Path
    episodes: int
    frames_per_episode: int
    fps: int
    cube_px: list[tuple[int, int]]      # (x, y) of the cube's centre in episode k's top frames


def _frame(height: int, width: int, cube: tuple[int, int] | None, shade: int, rng: np.random.Generator) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    base = 110 + x * 40 // width + y * 20 // height   # a grey table under a soft light gradient
    image = np.stack([base + 8, base + 4, base + shade // 4], axis=-1)
    image = (image + rng.integers(-3, 4, size=image.shape)).clip(0, 255).astype(np.uint8)
    if cube is not None:
        cx, cy = cube
        h = CUBE_PX // 2
        image[cy - h:cy + h, cx - h:cx + h] = (210, 30, 30)
    return image


def make_dataset(root: Path, episodes: int = 6, frames_per_episode: int = 24, fps: int = 30,
                 size: tuple[int, int] = (128, 96), vcodec: str = "h264", seed: int = 0,
                 cube_spread_px: float = 12.0) -> SyntheticDataset:
    """Two cameras (top, wrist), several episodes per video file, cube placed per episode."""
    from lerobot.configs.video import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.utils.feature_utils import hw_to_dataset_features

    width, height = size
    motors = {f"{name}.pos": float for name in JOINT_NAMES}
    features = {**hw_to_dataset_features(motors, "action"),
                **hw_to_dataset_features({**motors, "top": (height, width, 3), "wrist": (height, width, 3)},
                                         "observation", use_video=True)}
    dataset = LeRobotDataset.create(f"local/{root.name}", fps=fps, features=features, root=root,
                                    robot_type=SO101_ROBOT_TYPE, use_videos=True,
                                    rgb_encoder=RGBEncoderConfig(vcodec=vcodec, g=2, crf=30))
    rng = np.random.default_rng(seed)
    cubes = []
    for episode in range(episodes):
        cube = (int(width / 2 + rng.uniform(-cube_spread_px, cube_spread_px)),
                int(height / 2 + rng.uniform(-cube_spread_px, cube_spread_px)))
        cubes.append(cube)
        for frame_index in range(frames_per_episode):
            state = np.array([10 * np.sin(frame_index / 5 + j) for j in range(6)], dtype=np.float32)
            dataset.add_frame({
                "observation.state": state,
                "action": state + 1.0,
                "observation.images.top": _frame(height, width, cube, frame_index * 3 % 60, rng),
                "observation.images.wrist": _frame(height, width, None, 40 + episode * 10, rng),
                "task": "Pick up the cube and place it in the bowl.",
            })
        dataset.save_episode()
    dataset.finalize()
    return SyntheticDataset(root, episodes, frames_per_episode, fps, cubes)
