"""`--record-dataset`: the evaluation rollouts as a LeRobot v3.0 dataset, one episode per attempt,
written by LeRobot's own `LeRobotDataset`, so LeRobot's tools can view and reuse them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.models.protocol import JOINT_NAMES


class DatasetSink:
    def __init__(self, root: Path, fps: int, cameras: list[str], size: tuple[int, int], task: str,
                 robot_type: str) -> None:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
        from lerobot.utils.feature_utils import hw_to_dataset_features

        self.cameras = cameras
        self.size = size
        self.task = task
        repo_id = f"local/{root.name}"
        if (root / "meta" / "info.json").is_file():
            self.dataset = LeRobotDataset.resume(repo_id, root=root)
        else:
            motors = {f"{name}.pos": float for name in JOINT_NAMES}
            width, height = size
            observation = {**motors, **{cam: (height, width, 3) for cam in cameras}}
            features = {**hw_to_dataset_features(motors, "action"),
                        **hw_to_dataset_features(observation, "observation", use_video=True)}
            self.dataset = LeRobotDataset.create(repo_id, fps=fps, features=features, root=root,
                                                 robot_type=robot_type, use_videos=True)
        self.frames_in_episode = 0

    @property
    def next_episode_index(self) -> int:
        return self.dataset.meta.total_episodes

    def add(self, observation: dict[str, Any], action: dict[str, float],
            frames: dict[str, np.ndarray | None]) -> None:
        frame: dict[str, Any] = {
            "observation.state": np.array([observation[f"{n}.pos"] for n in JOINT_NAMES], dtype=np.float32),
            "action": np.array([action[f"{n}.pos"] for n in JOINT_NAMES], dtype=np.float32),
            "task": self.task,
        }
        for cam in self.cameras:
            image = frames.get(cam)
            if image is None:
                image = np.zeros((self.size[1], self.size[0], 3), dtype=np.uint8)
            frame[f"observation.images.{cam}"] = image
        self.dataset.add_frame(frame)
        self.frames_in_episode += 1

    def end_episode(self) -> int | None:
        """Save the episode; returns its index (None when it had no frames)."""
        if self.frames_in_episode == 0:
            return None
        index = self.next_episode_index
        self.dataset.save_episode()
        self.frames_in_episode = 0
        return index

    def discard_episode(self) -> None:
        if self.frames_in_episode:
            self.dataset.clear_episode_buffer()
        self.frames_in_episode = 0

    def close(self) -> None:
        self.dataset.finalize()
