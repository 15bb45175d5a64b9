"""Before trials: does the top view hold anything the training data never showed?

The source write-up lost a run to objects in view that appeared in no demonstration; the policy
stalled. Compared with reference frames (an empty-scene capture, or the first frames of the
training episodes), regions that differ from every reference are reported with where they are.
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


def scene_lab(frame: np.ndarray) -> np.ndarray:
    """A frame as the comparison sees it: blurred (sensor noise), in Lab (a colour distance), float32."""
    return rgb_to_lab(cv2.GaussianBlur(frame, (5, 5), 0)).astype(np.float32)


class SceneReferences:
    """Reference frames converted once: the placement guide compares every live frame with the same few
    references, and converting them again for each frame was most of a frame's check."""

    def __init__(self, references: list[np.ndarray]) -> None:
        self.labs = [scene_lab(r) for r in references]

    def unexpected(self, frame: np.ndarray, min_area_px: int = 150, threshold: float = 30.0) -> list[Unexpected]:
        """Regions of `frame` unlike every reference (Lab colour distance), largest first."""
        if not self.labs:
            return []
        lab = scene_lab(frame)
        nearest = None
        for ref in self.labs:   # squared distance, in OpenCV's vectorised kernels: no square root per pixel
            diff = cv2.subtract(lab, ref)
            d2 = cv2.transform(cv2.multiply(diff, diff), _CHANNEL_SUM)
            nearest = d2 if nearest is None else cv2.min(nearest, d2)
        assert nearest is not None
        mask = cv2.morphologyEx((nearest > threshold * threshold).astype(np.uint8), cv2.MORPH_OPEN,
                                np.ones((5, 5), np.uint8))
        count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
        found = [Unexpected(int(x), int(y), int(w), int(h), int(a)) for x, y, w, h, a in stats[1:count]
                 if a >= min_area_px]
        return sorted(found, key=lambda u: -u.area_px)


def unexpected_objects(frame: np.ndarray, references: list[np.ndarray], min_area_px: int = 150,
                       threshold: float = 30.0) -> list[Unexpected]:
    """Regions of `frame` unlike every reference (Lab colour distance), largest first."""
    return SceneReferences(references).unexpected(frame, min_area_px, threshold)
