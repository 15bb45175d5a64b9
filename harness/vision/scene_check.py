"""Before trials: does the top view hold anything the training data never showed?

The source write-up lost a run to objects in view that appeared in no demonstration; the policy
stalled. Compared with reference frames (an empty-scene capture, or the first frames of the
training episodes), regions that differ from every reference are reported with where they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


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


def unexpected_objects(frame: np.ndarray, references: list[np.ndarray], min_area_px: int = 150,
                       threshold: float = 30.0) -> list[Unexpected]:
    """Regions of `frame` unlike every reference (Lab colour distance), largest first."""
    lab = cv2.cvtColor(cv2.GaussianBlur(frame, (5, 5), 0), cv2.COLOR_RGB2LAB).astype(np.float32)
    distance = None
    for reference in references:
        ref = cv2.cvtColor(cv2.GaussianBlur(reference, (5, 5), 0), cv2.COLOR_RGB2LAB).astype(np.float32)
        d = np.linalg.norm(lab - ref, axis=2)
        distance = d if distance is None else np.minimum(distance, d)
    if distance is None:
        return []
    mask = cv2.morphologyEx((distance > threshold).astype(np.uint8), cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
    found = [Unexpected(int(x), int(y), int(w), int(h), int(a)) for x, y, w, h, a in stats[1:count]
             if a >= min_area_px]
    return sorted(found, key=lambda u: -u.area_px)
