"""Where did the cube start in each training episode? Template matching on each episode's first top
frame, converted to centimetres with the table calibration.

The source write-up found every demonstration started the cube on one paper marker (under a
centimetre of spread), which is why its fixed-position success rate could not be trusted: this
says so plainly when it happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

ONE_SPOT_CM = 1.0


@dataclass(frozen=True)
class Coverage:
    starts_px: list[tuple[float, float]]
    starts_cm: list[tuple[float, float]] | None   # robot frame offsets from the median start: (dx away, dy left)
    match_scores: list[float]

    def spread_cm(self) -> float | None:
        if self.starts_cm is None:
            return None
        return float(max(np.hypot(*p) for p in self.starts_cm))


def first_top_frames(root: Path, camera: str = "observation.images.top") -> list[np.ndarray]:
    """Each episode's first frame of the top camera, read through LeRobot's own dataset reader."""
    import logging

    import pandas as pd

    # LeRobot logs a page-long traceback when torchcodec cannot load and then uses PyAV, as asked here.
    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.CRITICAL)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(f"local/{root.name}", root=root, video_backend="pyav")
    episodes = pd.concat([pd.read_parquet(p) for p in sorted((root / "meta" / "episodes").glob("chunk-*/*.parquet"))])
    frames = []
    for start in episodes.sort_values("episode_index")["dataset_from_index"]:
        image = dataset[int(start)][camera]
        frames.append((image.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))
    return frames


def cube_template(frame: np.ndarray, margin: int = 3) -> np.ndarray:
    """The largest strongly red blob of a frame, with a small margin: the default template."""
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    red = (((hsv[:, :, 0] <= 8) | (hsv[:, :, 0] >= 172)) & (hsv[:, :, 1] >= 110)).astype(np.uint8)
    count, _, stats, _ = cv2.connectedComponentsWithStats(red)
    if count < 2:
        raise ValueError("no red cube in the template frame: pass --template-box x,y,w,h")
    x, y, w, h, _ = stats[1 + int(np.argmax(stats[1:, 4]))]
    return frame[max(0, y - margin):y + h + margin, max(0, x - margin):x + w + margin]


def locate(frames: list[np.ndarray], template: np.ndarray) -> tuple[list[tuple[float, float]], list[float]]:
    centres, scores = [], []
    th, tw = template.shape[:2]
    for frame in frames:
        result = cv2.matchTemplate(frame, template, cv2.TM_CCOEFF_NORMED)
        _, score, _, (x, y) = cv2.minMaxLoc(result)
        centres.append((x + (tw - 1) / 2, y + (th - 1) / 2))
        scores.append(float(score))
    return centres, scores


def to_robot_frame(starts_img_cm: np.ndarray) -> list[tuple[float, float]]:
    """Image axes (x right, y down, top camera with the robot at the bottom) to offsets from the
    median start in the robot's frame: dx away from the robot (image up), dy to its left (image left)."""
    median = np.median(starts_img_cm, axis=0)
    d = starts_img_cm - median
    return [(float(-y), float(-x)) for x, y in d]


def nearest_start_cm(trial_offsets: list[tuple[float, float]], starts: list[tuple[float, float]]) -> list[float]:
    return [min(float(np.hypot(dx - sx, dy - sy)) for sx, sy in starts) for dx, dy in trial_offsets]
