"""Placement error from pixels on the cameras a desk may have (issue 59): per resolution and lens.

Frames from tests/generators/stress_set.py's CAMERAS distribution (WIDE scenes through 320x240 ..
1920x1080 cameras, 4:3 and 16:9, 40-90 degree horizontal field of view, barrel distortion on half,
light colour temperature 2700-6500 K), each with exact truth. Each frame is measured twice, as a
user would with `harness measure --auto`: with the lens calibration (`harness calibrate-camera`:
undistorted with the true coefficients, the focal length from it), and without one (`--fovy-deg`:
the focal length only, the lens's distortion left in).

Per resolution and lens: frames, measured, refused, measured of the frames in full view (the whole
cube and at least 90 % of the rim reach the camera: the frames a measurement is owed), confident
errors (an error over 1 cm, or over the measurement's own +/-), mean and p95 error (cm) over what is
measured, the +/- covering the truth, in/out wrong, and why the frames in full view that got no
number were refused. The issue's targets: no confident error
over 1 cm, p95 <= 0.6 cm, coverage >= 95 %, >= 90 % measured, in/out never wrong.

Seeds: 5901-5903, 5951-5953, 6001-6003, 7001-7003 and 8001-8003 are the sets the rules were tuned on (5951-5953
were held out for the first pass, 6001-6003 for the second, 7001-7003 for the third, 8001-8003 for the fourth,
then looked at); 9101-9103 were held out for the fifth (judged once, at the end), 9201-9203 for the sixth,
9301-9306 for the seventh and 9401-9406 for the eighth (twice the count: about 30 frames in full view per
resolution); all are tuning data now, and a further pass needs a fresh range. Rendering is cheap
next to measuring, but frames are cached (--cache) so that the code before and after a change measures the very
same frames. The script imports `harness` from the tree it sits in: for the code before, run a copy of it
placed in a checkout of the older tree (`git archive <commit> harness tests benchmarks | tar -x -C old/`):

    .venv/bin/python benchmarks/camera_sizes_bench.py --seeds 9101 9102 9103 --cache /tmp/frames
    .venv/bin/python old/benchmarks/camera_sizes_bench.py --seeds 9101 9102 9103 --cache /tmp/frames
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import math
import pickle
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import harness.sim  # noqa: F401  (EGL before mujoco)
from harness.vision.camera import CameraIntrinsics
from harness.vision.measure import Geometry, measure_image
from tests.generators.stress_set import RESOLUTIONS, Distribution, StressFrame, stress_frames

PER_SET = 70   # ten frames per resolution


def frames(seed: int, cache: Path | None) -> list[StressFrame]:
    """The set's frames, from the cache when it has them (rendered and pickled there otherwise)."""
    folder = cache / str(seed) if cache else None
    if folder and len(list(folder.glob("*.pkl"))) >= PER_SET:
        return [pickle.loads(p.read_bytes()) for p in sorted(folder.glob("*.pkl"))[:PER_SET]]
    made = list(stress_frames(PER_SET, seed=seed, distribution=Distribution.CAMERAS))
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
        for k, frame in enumerate(made):
            (folder / f"{k:03d}.pkl").write_bytes(pickle.dumps(frame))
    return made


def in_full_view(frame: StressFrame) -> bool:
    """The whole cube and nearly all the rim reach the camera: a frame the target's >= 90 % measured counts."""
    return frame.cube_visible >= 0.95 and frame.rim_visible >= 0.9


def measure(frame: StressFrame, lens: bool) -> tuple[bool, float, float, bool, str, bool]:
    """(measured, |error| cm, +/- cm, in/out right, reason) for one frame, with or without its lens calibration."""
    width, height = frame.look.size
    m = frame.camera_matrix
    if lens:
        camera = CameraIntrinsics(width, height, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(frame.distortion))
        result = measure_image(frame.frame, Geometry(), camera)
    else:
        result = measure_image(frame.frame, Geometry(focal_px=float(m[1, 1])))
    if result.measurement is None:
        return False, math.nan, math.nan, True, result.reason.value if result.reason else "?", in_full_view(frame)
    got = result.measurement
    return (True, abs(got.distance_cm - frame.distance_cm), got.uncertainty_cm, got.inside == frame.inside, "",
            in_full_view(frame))


def table(rows: dict[tuple[str, str], list[tuple[bool, float, float, bool, str]]]) -> None:
    print("| resolution | lens | frames | measured | refused | measured of those in full view | confident errors | "
          "mean cm | p95 cm | max cm | +/- covers | in/out wrong | refused in full view, by reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (size, lens), results in rows.items():
        done = [r for r in results if r[0]]
        errors = np.array([r[1] for r in done])
        widths = np.array([r[2] for r in done])
        confident = int(np.sum((errors > 1.0) | (errors > widths))) if done else 0
        wrong_side = sum(not r[3] for r in done)
        stats = (f"{errors.mean():.2f} | {np.percentile(errors, 95):.2f} | {errors.max():.2f} | "
                 f"{100 * np.mean(errors <= widths):.0f}%") if done else "- | - | - | -"
        seen = [r for r in results if r[5]]
        why = Counter(r[4] for r in seen if not r[0])
        print(f"| {size} | {lens} | {len(results)} | {len(done)} | {len(results) - len(done)} | "
              f"{sum(r[0] for r in seen)}/{len(seen)} | {confident} | "
              f"{stats} | {wrong_side} | {', '.join(f'{k} {v}' for k, v in why.most_common()) or '-'} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[5901, 5902])
    parser.add_argument("--cache", type=Path, help="render each set once into this folder, then reuse it")
    parser.add_argument("--reasons", action="store_true", help="also print why frames were refused")
    args = parser.parse_args()
    rows: dict[tuple[str, str], list] = defaultdict(list)
    order = [(f"{w}x{h}", lens) for w, h in RESOLUTIONS for lens in ("calibrated", "fov only")]
    for key in order:
        rows[key] = []
    reasons: dict[str, int] = defaultdict(int)
    t0 = time.process_time()
    count = 0
    for seed in args.seeds:
        for frame in frames(seed, args.cache):
            size = f"{frame.look.size[0]}x{frame.look.size[1]}"
            for lens in (True, False):
                result = measure(frame, lens)
                rows[(size, "calibrated" if lens else "fov only")].append(result)
                rows[("**all**", "calibrated" if lens else "fov only")].append(result)
                reasons[result[4]] += not result[0]
                count += 1
    print(f"camera sizes, seeds {args.seeds} ({count} measurements, "
          f"{1000 * (time.process_time() - t0) / max(count, 1):.0f} ms CPU each)\n")
    table(rows)
    if args.reasons:
        print(f"\nnot measured: {dict(reasons)}")


if __name__ == "__main__":
    main()
