"""A red object on the desk (issue 59, tenth pass): is it taken for the cube?

A desk has red things on it besides the cube: a sticker, a lid, a strip of tape. Into each generated frame where the
cube is measured (stress generator, CAMERAS seeds 31001-31002 by default, with the lens calibration), one cube-sized
red shape is painted well away from the cube and the bowl: a square, a disc or a bar (twice as long, half as wide),
of a random saturated red. Each frame is measured twice: by the colour rule alone (`segmenter=None`, the harness
before the learned segmenter) and as shipped (the net checks the colour rule's pick). Per shape: right (within
max(+/-, 0.3 cm) of the truth), refused, wrong (anything else: a confident error).

    .venv/bin/python benchmarks/red_objects_bench.py            # about 4 CPU minutes
    .venv/bin/python benchmarks/red_objects_bench.py --seeds 31003
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import math
from collections import Counter

import cv2
import numpy as np

import harness.sim  # noqa: F401  (EGL before mujoco)
from harness.vision.camera import CameraIntrinsics
from harness.vision.measure import Geometry, measure_image
from tests.generators.stress_set import Distribution, stress_frames

SHAPES = ("square", "disc", "bar")


def paint(frame: np.ndarray, shape: str, centre: tuple[float, float], side: float, colour: tuple[int, ...]) -> None:
    x, y = centre
    if shape == "square":
        cv2.rectangle(frame, (int(x - side / 2), int(y - side / 2)), (int(x + side / 2), int(y + side / 2)), colour, -1)
    elif shape == "disc":
        cv2.circle(frame, (int(x), int(y)), int(side * 0.6), colour, -1)
    else:
        cv2.rectangle(frame, (int(x - side), int(y - side / 4)), (int(x + side), int(y + side / 4)), colour, -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[31001, 31002])
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    tally: dict[tuple[str, str], Counter[str]] = {}
    frames = 0
    for seed in args.seeds:
        for f in stress_frames(70, seed, distribution=Distribution.CAMERAS, cube_mask=True):
            if f.cube_visible < 0.95 or f.rim_visible < 0.9 or f.cube_mask is None:
                continue
            w, h = f.look.size
            m = f.camera_matrix
            lens = CameraIntrinsics(w, h, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(f.distortion))
            base = measure_image(f.frame, Geometry(), lens)
            if base.measurement is None or base.rim is None:
                continue
            frames += 1
            side = Geometry().cube_cm * base.rim.mean_radius_px / (Geometry().bowl_cm / 2)
            ys, xs = np.nonzero(f.cube_mask)
            for shape in SHAPES:
                for _ in range(20):   # a spot away from the cube and the bowl (the last one drawn otherwise)
                    x, y = rng.uniform(side, w - side), rng.uniform(side, h - side)
                    if (math.hypot(x - xs.mean(), y - ys.mean()) > 3 * side
                            and math.hypot(x - base.rim.cx, y - base.rim.cy) > base.rim.mean_radius_px + 2 * side):
                        break
                colour = tuple(int(c) for c in rng.integers([150, 0, 0], [256, 60, 60]))
                image = f.frame.copy()
                paint(image, shape, (x, y), side, colour)
                for who, options in (("colour rule alone", {"segmenter": None}), ("shipped (net checks)", {})):
                    got = measure_image(image, Geometry(), lens, **options).measurement
                    verdict = ("refused" if got is None else "right"
                               if abs(got.distance_cm - f.distance_cm) <= max(got.uncertainty_cm, 0.3) else "wrong")
                    tally.setdefault((who, shape), Counter())[verdict] += 1
    print(f"{frames} frames measured without a red object (CAMERAS seeds {', '.join(map(str, args.seeds))}), "
          "each with one red shape painted in\n")
    print(f"{'measured by':<22} {'shape':<7} {'right':>5} {'refused':>7} {'wrong':>5}")
    for (who, shape), c in tally.items():
        print(f"{who:<22} {shape:<7} {c['right']:>5} {c['refused']:>7} {c['wrong']:>5}")


if __name__ == "__main__":
    main()
