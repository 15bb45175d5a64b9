"""Where did the cube start in each training episode? Found on each episode's first top frame by
colour, converted to the robot's frame with the bowl calibration, and checked against the truth
where the harness recorded the dataset itself.

The source write-up found every demonstration started the cube on one paper marker (under a
centimetre of spread), which is why its fixed-position success rate could not be trusted: this
says so plainly when it happens. A start it is not sure of (the arm over the cube, a washed-out
frame) is reported as not found, with its score: a wrong position would flow into the report's
map and into every distance computed from it, which is worse than a gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from harness.models.protocol import Scene
from harness.vision.lab import rgb_to_lab
from harness.vision.rim import Rim

ONE_SPOT_CM = 1.0
MIN_SCORE = 0.6          # below this a sighting is "not found": measured against truth, see docs/benchmarks.md
MIN_CONTRAST = 3.0       # Lab a* units between the reddest pixel and the table: less is no red object at all
VIVID = 0.4              # a cube in plain view is at least this red against the frame's colourfulness (sims: 0.46-0.87,
                         # hidden under the arm: 0.08-0.23)


@dataclass(frozen=True)
class Sighting:
    """The reddest compact blob of a frame, and how much it looks like the whole cube (0..1)."""

    centre_px: tuple[float, float] | None
    score: float
    area_px: float
    why: str                 # what lowered the score, in words


@dataclass(frozen=True)
class EpisodeStart:
    episode: int
    score: float
    centre_px: tuple[float, float] | None       # None: not found
    offset_cm: tuple[float, float] | None       # robot frame (dx away, dy left), None: not found or no scale
    why: str = ""

    @property
    def found(self) -> bool:
        return self.centre_px is not None


@dataclass(frozen=True)
class Coverage:
    starts: list[EpisodeStart]
    anchored: bool            # offsets are from the trained position (calibrated), not from the median start
    min_score: float = MIN_SCORE

    @property
    def found(self) -> list[EpisodeStart]:
        return [s for s in self.starts if s.found]

    @property
    def not_found(self) -> list[EpisodeStart]:
        return [s for s in self.starts if not s.found]

    def offsets_cm(self) -> list[tuple[float, float]]:
        return [s.offset_cm for s in self.starts if s.offset_cm is not None]

    def centres_px(self) -> list[tuple[float, float]]:
        """Where the cube was found in each first frame it was found in."""
        return [s.centre_px for s in self.starts if s.centre_px is not None]

    def spread_cm(self) -> float:
        """Largest distance of a found start from the median found start (0 when none has an offset)."""
        offsets = self.offsets_cm()
        if not offsets:
            return 0.0
        points = np.array(offsets)
        return float(np.max(np.hypot(*(points - np.median(points, axis=0)).T)))


def first_top_frames(root: Path, camera: str = "observation.images.top") -> list[np.ndarray]:
    """Each episode's first frame of the top camera, in episode order."""
    return list(first_frames(root, camera).values())


def first_frames(root: Path, camera: str = "observation.images.top") -> dict[int, np.ndarray]:
    """Episode index -> first frame of `camera`, read through LeRobot's own dataset reader."""
    import logging

    import pandas as pd

    # LeRobot logs a page-long traceback when torchcodec cannot load and then uses PyAV, as asked here.
    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.CRITICAL)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(f"local/{root.name}", root=root, video_backend="pyav")
    episodes = pd.concat([pd.read_parquet(p) for p in sorted((root / "meta" / "episodes").glob("chunk-*/*.parquet"))])
    frames = {}
    for episode, start in episodes.sort_values("episode_index")[["episode_index", "dataset_from_index"]].itertuples(
            index=False):
        image = dataset[int(start)][camera]
        frames[int(episode)] = (image.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    return frames


def redness(frame: np.ndarray) -> np.ndarray:
    """Lab a* (green to red) less any blueness (b* below zero), lightly smoothed: the cube stands out
    on it whether the frame is bright, dim or washed out, and the yellow arm, the beige table and the
    navy bowl rim (whose a* is positive too) do not."""
    lab = rgb_to_lab(frame).astype(np.float32) - 128.0
    return cv2.GaussianBlur(lab[:, :, 1] + np.minimum(lab[:, :, 2], 0.0), (3, 3), 0)


def find_cube(frame: np.ndarray, expected_area_px: float) -> Sighting:
    """The blob around the reddest pixel, segmented at half its height above the table (so the
    threshold follows the frame's contrast), its sub-pixel centre, and a score: how close its area
    is to a whole cube's, times how well it fills its bounding rectangle (a cube partly hidden
    under the gripper is smaller and not rectangular), times how vivid it is for this frame."""
    a = redness(frame)
    table = float(np.median(a))
    peak = float(a.max())
    if peak - table < MIN_CONTRAST:
        return Sighting(None, 0.0, 0.0, "nothing red in the frame")
    y0, x0 = np.unravel_index(int(np.argmax(a)), a.shape)
    _, labels, _, _ = cv2.connectedComponentsWithStats((a > table + 0.5 * (peak - table)).astype(np.uint8))
    blob = labels == labels[y0, x0]
    region = cv2.dilate(blob.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    weights = np.clip((a - table) / (peak - table), 0.0, 1.0) * region
    ys, xs = np.mgrid[0:a.shape[0], 0:a.shape[1]]
    total = float(weights.sum())
    centre = (float((weights * xs).sum() / total), float((weights * ys).sum() / total))
    points = np.column_stack(np.nonzero(blob)[::-1]).astype(np.float32)
    (_, _), (w, h), _ = cv2.minAreaRect(points)
    fill = min(1.0, float(blob.sum()) / ((w + 1) * (h + 1)))
    size = min(total / expected_area_px, expected_area_px / total)
    vivid = min(1.0, (peak - table) / (VIVID * colourfulness(frame)))
    why = (f"area {total / expected_area_px:.0%} of a cube's, fills {fill:.0%} of its rectangle, "
           f"{vivid:.0%} as vivid as a cube in plain view")
    return Sighting(centre, size * fill * vivid, total, why)


def colourfulness(frame: np.ndarray) -> float:
    """How far the frame's most colourful pixels (the arm, the bowl, the cube) sit from the table's
    colour (99th percentile, Lab units): a washed-out or dim frame scales it with the cube's own
    contrast, while a faint reddish patch where the cube is hidden stays faint against it."""
    lab = rgb_to_lab(frame).astype(np.float32)[:, :, 1:]
    table = np.median(lab.reshape(-1, 2), axis=0)
    return max(1.0, float(np.percentile(np.hypot(*(lab - table).transpose(2, 0, 1)), 99)))


@dataclass(frozen=True)
class TableView:
    """Dataset pixels to the robot's table frame, through the bowl rim (calibrated on the same camera,
    at any resolution) and, when the camera's field of view is known, the cube's height."""

    rim: Rim                       # in the dataset's pixels
    bowl_cm: float
    bowl_height_cm: float
    scene: Scene
    image_size: tuple[int, int]    # (width, height) of the dataset's frames
    camera_height_cm: float | None
    cube_cm: float = 3.0

    @classmethod
    def from_calibration(cls, rim: Rim, bowl_cm: float, calibration_size: tuple[int, int],
                         image_size: tuple[int, int], scene: Scene, bowl_height_cm: float,
                         fovy_deg: float | None) -> TableView:
        """Scale a rim found on a frame of `calibration_size` to `image_size` (pixel centres kept:
        a half-pixel slip is 0.3 cm at 128x96)."""
        sx, sy = image_size[0] / calibration_size[0], image_size[1] / calibration_size[1]
        scaled = Rim((rim.cx + 0.5) * sx - 0.5, (rim.cy + 0.5) * sy - 0.5, rim.a * (sx + sy) / 2,
                     rim.b * (sx + sy) / 2, rim.angle_deg)
        camera_height = None
        if fovy_deg:
            focal_px = (image_size[1] / 2) / math.tan(math.radians(fovy_deg / 2))
            camera_height = focal_px * (bowl_cm / 2) / scaled.mean_radius_px + bowl_height_cm
        return cls(scaled, bowl_cm, bowl_height_cm, scene, image_size, camera_height, scene.cube_edge_cm)

    @property
    def px_per_cm(self) -> float:
        return self.rim.mean_radius_px / (self.bowl_cm / 2)

    def expected_cube_area_px(self) -> float:
        """The cube's top face seen from above (it sits a little closer to the camera than the rim)."""
        closer = 1.0
        if self.camera_height_cm:
            closer = (self.camera_height_cm - self.bowl_height_cm) / (self.camera_height_cm - self.cube_cm)
        return (self.cube_cm * self.px_per_cm * closer) ** 2

    def offset_cm(self, centre_px: tuple[float, float]) -> tuple[float, float]:
        """Robot-frame offset (dx away from the robot = image up, dy to its left = image left) of the
        cube's centre from the trained position."""
        seen = self.rim.to_image_axes_cm(np.array([centre_px]), self.bowl_cm)[0]
        if self.camera_height_cm:
            nadir = self.rim.to_image_axes_cm(np.array([[(self.image_size[0] - 1) / 2, (self.image_size[1] - 1) / 2]]),
                                              self.bowl_cm)[0]
            h = self.camera_height_cm
            seen = nadir + (seen - nadir) * (h - self.cube_cm) / (h - self.bowl_height_cm)
        bx, by = self.scene.bowl_xy_cm
        tx, ty = self.scene.trained_cube_xy_cm
        return float(bx - seen[1] - tx), float(by - seen[0] - ty)


def locate_starts(frames: dict[int, np.ndarray], view: TableView | None = None, px_per_cm: float | None = None,
                  min_score: float = MIN_SCORE) -> Coverage:
    """Every episode's start: found (score >= min_score) with a position, or not found with its score.

    The cube's expected size is the median sighting (most first frames are clean, and video chroma
    subsampling blurs the red blob well past the cube's geometric size at 128x96), unless that is
    far from what the calibration predicts. Without a calibration, offsets given a plain scale are
    measured from the median start."""
    rough = [a for f in frames.values() if (a := find_cube(f, 1.0).area_px) > 0]
    expected = float(np.median(rough)) if rough else 1.0
    if view is not None and not 0.5 <= expected / view.expected_cube_area_px() <= 4.0:
        expected = view.expected_cube_area_px()
    starts = []
    for episode, frame in frames.items():
        sight = find_cube(frame, expected)
        if sight.centre_px is None or sight.score < min_score:
            starts.append(EpisodeStart(episode, sight.score, None, None, sight.why))
            continue
        offset = view.offset_cm(sight.centre_px) if view is not None else None
        starts.append(EpisodeStart(episode, sight.score, sight.centre_px, offset, sight.why))
    if view is None and px_per_cm:
        centres = np.array([s.centre_px for s in starts if s.found])
        median = np.median(centres, axis=0) if len(centres) else np.zeros(2)
        starts = [s if s.centre_px is None else EpisodeStart(
            s.episode, s.score, s.centre_px,
            (float(-(s.centre_px[1] - median[1]) / px_per_cm), float(-(s.centre_px[0] - median[0]) / px_per_cm)),
            s.why) for s in starts]
    return Coverage(starts, anchored=view is not None, min_score=min_score)


def nearest_start_cm(trial_offsets: Sequence[tuple[float, float]],
                     starts: Sequence[tuple[float, float]]) -> list[float]:
    return [min(float(np.hypot(dx - sx, dy - sy)) for sx, sy in starts) for dx, dy in trial_offsets]


@dataclass(frozen=True)
class TruthCheck:
    """Found starts against the positions the harness placed the cube at."""

    errors_cm: dict[int, float]       # episode -> distance from the true start
    not_found: list[int]
    missing_truth: list[int]          # episodes the scoresheet does not name

    @property
    def max_error_cm(self) -> float | None:
        return max(self.errors_cm.values()) if self.errors_cm else None


def check_against_truth(coverage: Coverage, truth: dict[int, tuple[float, float]]) -> TruthCheck:
    errors = {}
    missing = []
    for start in coverage.starts:
        if start.episode not in truth:
            missing.append(start.episode)
        elif start.offset_cm is not None:
            tx, ty = truth[start.episode]
            errors[start.episode] = float(math.hypot(start.offset_cm[0] - tx, start.offset_cm[1] - ty))
    return TruthCheck(errors, [s.episode for s in coverage.not_found if s.episode in truth], missing)


def truth_from_scoresheet(path: Path) -> dict[int, tuple[float, float]]:
    """Dataset episode -> the trial offset the harness placed the cube at (`--record-dataset` writes
    each attempt's episode index into the scoresheet)."""
    from harness.models.scoresheet import load_scoresheet

    sheet = load_scoresheet(path)
    trials = {t.index: (t.dx_cm, t.dy_cm) for t in sheet.locked.trials}
    truth = {}
    for attempt in sheet.attempts:
        episode = (attempt.artifacts or {}).get("dataset_episode")
        if episode not in (None, "None"):
            truth[int(episode)] = trials[attempt.trial_index]
    return truth


def truth_from_selection(path: Path) -> dict[int, tuple[float, float]]:
    """Dataset episode -> start offset, from `harness collect`'s meta/selection.json."""
    import json

    accepted = json.loads(path.read_text()).get("accepted", [])
    return {int(a["episode_index"]): (float(a["dx_cm"]), float(a["dy_cm"])) for a in accepted}
