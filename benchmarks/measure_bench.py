"""Placement error from pixels against the simulator's truth, across camera heights, tilts and lighting.

Run: .venv/bin/python benchmarks/measure_bench.py [--per-condition 30]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import harness.sim  # noqa: F401
from harness.sim.scene import SceneGeometry
from harness.sim.truth import FOVY_DEG, truth_frames
from harness.vision.measure import DetectionError, Geometry, measure_frame
from harness.vision.rim import find_rim

CONDITIONS = [  # camera height (m), tilt (deg), light
    (0.75, 0.0, 0.6), (0.65, 0.0, 0.6), (0.85, 0.0, 0.6),
    (0.75, 5.0, 0.6), (0.75, 10.0, 0.6),
    (0.75, 0.0, 0.3), (0.75, 0.0, 1.0),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-condition", type=int, default=30)
    args = parser.parse_args()
    print("| camera height | tilt | light | frames | rim found | MAE cm | p95 cm | max cm | in/out agreement | "
          "not measured |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_errors, all_agree, seconds, measured = [], [], 0.0, 0
    for height, tilt, light in CONDITIONS:
        geometry = SceneGeometry(top_camera_height=height, top_camera_tilt_deg=tilt, light_intensity=light)
        calibration, frames = truth_frames(geometry, args.per_condition, seed=int(height * 100 + tilt * 10))
        rim = find_rim(calibration)
        focal = 240 / math.tan(math.radians(FOVY_DEG / 2))
        errors, agree, missed = [], [], 0
        for truth in frames:
            t0 = time.perf_counter()
            try:
                result = measure_frame(truth.frame, rim, Geometry(focal_px=focal))
            except DetectionError:
                missed += 1
                continue
            seconds += time.perf_counter() - t0
            measured += 1
            errors.append(abs(result.distance_cm - truth.distance_cm))
            agree.append(result.inside == truth.inside)
        all_errors += errors
        all_agree += agree
        print(f"| {height:.2f} m | {tilt:.0f} deg | {light:.1f} | {args.per_condition} | {'yes' if rim else 'no'} | "
              f"{np.mean(errors):.3f} | {np.percentile(errors, 95):.3f} | {max(errors):.3f} | "
              f"{100 * np.mean(agree):.1f}% | {missed} |")
    print(f"| **all** | | | {len(all_errors)} | | **{np.mean(all_errors):.3f}** | "
          f"**{np.percentile(all_errors, 95):.3f}** | {max(all_errors):.3f} | **{100 * np.mean(all_agree):.1f}%** | |")
    print(f"\nMeasurement speed: {measured / seconds:.0f} frames/s (640x480, after calibration)")


if __name__ == "__main__":
    main()
