"""Before trials: does the top view hold anything the training data never showed?

The source write-up lost a run to objects in view that appeared in no demonstration; the policy
stalled. Compared with reference frames (an empty-scene capture, or the first frames of the
training episodes), regions that differ from every reference are reported with where they are.

Sizes are the scene's, not pixels tuned at one resolution: the smallest object worth a word, the blur that
hides sensor noise and the opening that removes specks are set at 640x480 and scaled with the frame (an
object covering 150 px at 640x480 covers 38 px at 320x240 and 1,350 px at 1920x1080), so one physical mug is
reported, and one speck ignored, on any camera.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from harness.vision.lab import rgb_to_lab


@dataclass(frozen=True)
class Unexpected:
    x: int
    y: int
    width: int
    height: int
    area_px: int

    @property
    def centre(self) -> tuple[int, int]:
        return (self.x + self.width // 2, self.y + self.height // 2)


_CHANNEL_SUM = np.ones((1, 3), np.float32)
REFERENCE_WIDTH_PX = 640          # the frame width the pixel figures below are stated at
MIN_AREA_PX_AT_640 = 150          # the smallest region reported, at 640x480 (0.05 % of the frame)
KERNEL_PX_AT_640 = 5              # blur and opening, at 640 px wide


def _kernel(width_px: int) -> int:
    """The blur and opening kernel for a frame `width_px` wide: odd, at least 3."""
    size = max(3, round(KERNEL_PX_AT_640 * width_px / REFERENCE_WIDTH_PX))
    return size if size % 2 else size + 1


def default_min_area_px(frame_shape: tuple[int, ...]) -> int:
    """The smallest region reported on a frame of this shape: MIN_AREA_PX_AT_640 scaled by the frame's area."""
    height, width = frame_shape[:2]
    return max(1, round(MIN_AREA_PX_AT_640 * (width * height) / (REFERENCE_WIDTH_PX * 480)))


def scene_lab(frame: np.ndarray) -> np.ndarray:
    """A frame as the comparison sees it: blurred (sensor noise), in Lab (a colour distance), float32."""
    k = _kernel(frame.shape[1])
    return rgb_to_lab(cv2.GaussianBlur(frame, (k, k), 0)).astype(np.float32)


class SceneReferences:
    """Reference frames converted once: the placement guide compares every live frame with the same few
    references, and converting them again for each frame was most of a frame's check."""

    def __init__(self, references: list[np.ndarray]) -> None:
        self.labs = [scene_lab(r) for r in references]

    def unexpected(self, frame: np.ndarray, min_area_px: int | None = None,
                   threshold: float = 30.0) -> list[Unexpected]:
        """Regions of `frame` unlike every reference (Lab colour distance), largest first; `min_area_px` None:
        `default_min_area_px` of the frame."""
        if min_area_px is None:
            min_area_px = default_min_area_px(frame.shape)
        if not self.labs:
            return []
        lab = scene_lab(frame)
        nearest = None
        for ref in self.labs:   # squared distance, in OpenCV's vectorised kernels: no square root per pixel
            diff = cv2.subtract(lab, ref)
            d2 = cv2.transform(cv2.multiply(diff, diff), _CHANNEL_SUM)
            nearest = d2 if nearest is None else cv2.min(nearest, d2)
        assert nearest is not None
        k = _kernel(frame.shape[1])
        mask = cv2.morphologyEx((nearest > threshold * threshold).astype(np.uint8), cv2.MORPH_OPEN,
                                np.ones((k, k), np.uint8))
        count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
        found = [Unexpected(int(x), int(y), int(w), int(h), int(a)) for x, y, w, h, a in stats[1:count]
                 if a >= min_area_px]
        return sorted(found, key=lambda u: -u.area_px)


def unexpected_objects(frame: np.ndarray, references: list[np.ndarray], min_area_px: int | None = None,
                       threshold: float = 30.0) -> list[Unexpected]:
    """Regions of `frame` unlike every reference (Lab colour distance), largest first."""
    return SceneReferences(references).unexpected(frame, min_area_px, threshold)
