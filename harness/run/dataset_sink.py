"""`--record-dataset`: the evaluation rollouts as a LeRobot v3.0 dataset, one episode per attempt,
written by LeRobot's own `LeRobotDataset`, so LeRobot's tools can view and reuse them.

Image size, codec and frame rate are choices (`RecordingOptions`): a dataset is usually recorded
to be trained on, and ACT at 640x480 costs ~25 s per training step on a 2-core CPU against under
a second at 128x96, so the defaults suit training on a modest machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.models.protocol import JOINT_NAMES

RECORD_CODECS = ("h264", "libsvtav1", "hevc")


@dataclass(frozen=True)
class RecordingOptions:
    """How `--record-dataset` writes frames. h264 encodes and decodes fastest on a CPU; libsvtav1
    (LeRobot's default) makes the smallest files; `fps` below the control rate keeps every n-th step."""

    size: tuple[int, int] = (128, 96)      # (width, height)
    vcodec: str = "h264"
    crf: int = 23
    fps: int | None = None                 # None: the control rate
    pix_fmt: str = "yuv444p"               # full colour resolution: 4:2:0 at 128x96 leaves a cube 2 chroma px wide

    def problem(self, control_fps: int | None) -> tuple[str, str] | None:
        """Which option cannot record at `control_fps` (None: not known yet) and why, in words; None
        when they all can."""
        width, height = self.size
        if not (16 <= width <= 1920 and 16 <= height <= 1080):
            return "size", f"{width}x{height} is outside 16x16..1920x1080"
        if width % 2 or height % 2:
            return "size", f"{width}x{height}: the encoders need even widths and heights"
        if self.vcodec not in RECORD_CODECS:
            return "vcodec", f"'{self.vcodec}' is not one of {', '.join(RECORD_CODECS)}"
        if self.fps is not None and (self.fps <= 0 or (control_fps is not None and control_fps % self.fps)):
            return "fps", f"{self.fps} fps does not divide the control rate of {control_fps} Hz"
        return None


class DatasetSink:
    def __init__(self, root: Path, fps: int, cameras: list[str], size: tuple[int, int] | None, task: str,
                 robot_type: str, options: RecordingOptions | None = None) -> None:
        """`fps` is the control rate the frames arrive at; `size` (when given) overrides `options.size`."""
        from lerobot.configs.video import RGBEncoderConfig
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
        from lerobot.utils.feature_utils import hw_to_dataset_features

        options = options or RecordingOptions()
        if size is not None:
            options = RecordingOptions(size, options.vcodec, options.crf, options.fps, options.pix_fmt)
        problem = options.problem(fps)
        if problem:
            raise ValueError(f"recording {problem[0]}: {problem[1]}")
        self.options = options
        self.cameras = cameras
        self.size = options.size
        self.task = task
        self.every = fps // options.fps if options.fps else 1
        self._step = 0
        repo_id = f"local/{root.name}"
        encoder = RGBEncoderConfig(vcodec=options.vcodec, crf=options.crf, g=2, pix_fmt=options.pix_fmt)
        if (root / "meta" / "info.json").is_file():  # resumed episodes keep the codec (LeRobot's default is AV1)
            self.dataset = LeRobotDataset.resume(repo_id, root=root, rgb_encoder=encoder)
        else:
            motors = {f"{name}.pos": float for name in JOINT_NAMES}
            width, height = options.size
            observation = {**motors, **{cam: (height, width, 3) for cam in cameras}}
            features = {**hw_to_dataset_features(motors, "action"),
                        **hw_to_dataset_features(observation, "observation", use_video=True)}
            self.dataset = LeRobotDataset.create(repo_id, fps=fps // self.every, features=features, root=root,
                                                 robot_type=robot_type, use_videos=True, rgb_encoder=encoder)
        self.frames_in_episode = 0

    @property
    def root(self) -> Path:
        return Path(self.dataset.root)

    def due(self) -> bool:
        """Whether the next control step is recorded (every step unless `options.fps` is lower):
        the caller skips rendering frames that would be dropped."""
        return self._step % self.every == 0

    @property
    def next_episode_index(self) -> int:
        return self.dataset.meta.total_episodes

    def add(self, observation: dict[str, Any], action: dict[str, float],
            frames: dict[str, np.ndarray | None]) -> None:
        due = self.due()
        self._step += 1
        if not due:
            return
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
        self._step = 0
        if self.frames_in_episode == 0:
            return None
        index = self.next_episode_index
        self.dataset.save_episode()
        self.frames_in_episode = 0
        return index

    def discard_episode(self) -> None:
        self._step = 0
        if self.frames_in_episode:
            self.dataset.clear_episode_buffer()
        self.frames_in_episode = 0

    def close(self) -> None:
        self.dataset.finalize()
