"""Placement error from pixels: accuracy against the simulator's truth, and the speed of `harness measure`.

Three tables:
1. the clean renders across camera heights, tilts and lighting (the automatic rim per condition);
2. the stress set (tests/generators/stress_set.py), by bowl/table pair, measured as a user with a
   calibrated lens would (`measure_image` undistorts with the known coefficients);
3. `harness measure --auto` as a user runs it, with and without a lens calibration: images per
   second, and the per-image time split into start-up (process, imports, rim calibration) and work
   (per image: read, undistort, rim, cube, uncertainty, annotated PNG), from runs on 1 and N images.

Run: .venv/bin/python benchmarks/measure_bench.py [--per-condition 30] [--stress 48] [--speed-images 20]
     (--speed-only --harness-root /path/to/older/checkout times that code's `harness measure` instead;
      --stress-only --stress-seed 7 measures another stress set; PYTHONPATH=/path/to/older/checkout,
      run from outside the repository, measures everything with that code)
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from PIL import Image

import harness.sim  # noqa: F401
from harness.sim.scene import SceneGeometry
from harness.vision.camera import CameraIntrinsics
from harness.vision.measure import DetectionError, Geometry, measure_frame, measure_image
from harness.vision.rim import fit_rim
from tests.generators.stress_set import camera_matrix, distort, stress_frames
from tests.generators.truth import FOVY_DEG, truth_frames

CONDITIONS = [  # camera height (m), tilt (deg), light
    (0.75, 0.0, 0.6), (0.65, 0.0, 0.6), (0.85, 0.0, 0.6),
    (0.75, 5.0, 0.6), (0.75, 10.0, 0.6),
    (0.75, 0.0, 0.3), (0.75, 0.0, 1.0),
]
LENS = np.array([-0.25, 0.07, 0.0, 0.0, 0.0])


def clean_conditions(per_condition: int) -> None:
    print("| camera height | tilt | light | frames | rim found | MAE cm | p95 cm | max cm | in/out agreement | "
          "not measured | within +/- |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    all_errors, all_agree, all_covered = [], [], []
    focal = 240 / math.tan(math.radians(FOVY_DEG / 2))
    for height, tilt, light in CONDITIONS:
        geometry = SceneGeometry(top_camera_height=height, top_camera_tilt_deg=tilt, light_intensity=light)
        calibration, frames = truth_frames(geometry, per_condition, seed=int(height * 100 + tilt * 10))
        fit = fit_rim(calibration)
        errors, agree, covered, missed = [], [], [], 0
        for truth in frames:
            try:
                result = measure_frame(truth.frame, fit.rim, Geometry(focal_px=focal), fit)
            except DetectionError:
                missed += 1
                continue
            errors.append(abs(result.distance_cm - truth.distance_cm))
            agree.append(result.inside == truth.inside)
            covered.append(errors[-1] <= result.uncertainty_cm)
        all_errors += errors
        all_agree += agree
        all_covered += covered
        print(f"| {height:.2f} m | {tilt:.0f} deg | {light:.1f} | {per_condition} | yes | {np.mean(errors):.3f} | "
              f"{np.percentile(errors, 95):.3f} | {max(errors):.3f} | {100 * np.mean(agree):.1f}% | {missed} | "
              f"{100 * np.mean(covered):.0f}% |")
    print(f"| **all** | | | {len(all_errors)} | | **{np.mean(all_errors):.3f}** | "
          f"**{np.percentile(all_errors, 95):.3f}** | {max(all_errors):.3f} | **{100 * np.mean(all_agree):.1f}%** | | "
          f"{100 * np.mean(all_covered):.0f}% |")


def stress(count: int, seed: int = 20) -> None:
    rows: dict[str, list] = defaultdict(list)
    seconds = 0.0
    cpu = 0.0
    for frame in stress_frames(count, seed=seed):
        m = frame.camera_matrix
        lens = CameraIntrinsics(640, 480, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(frame.distortion))
        t0, c0 = time.perf_counter(), time.process_time()
        result = measure_image(frame.frame, Geometry(), lens)
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
        rows[frame.look.palette].append((frame, result))
        rows["**all**"].append((frame, result))
    print(f"\nstress set, seed {seed}")
    print("\n| bowl on table | frames | rim >= 70% visible | measured of those | MAE cm | p95 cm | max cm | "
          "within +/- | wrong > 1 cm outside +/- | median +/- cm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, pairs in rows.items():
        visible = [(f, r) for f, r in pairs if f.rim_visible >= 0.7]
        done = [(f, r) for f, r in pairs if r.measurement is not None]
        errors = np.array([abs(r.measurement.distance_cm - f.distance_cm) for f, r in done])
        widths = np.array([r.measurement.uncertainty_cm for _, r in done])
        print(f"| {name} | {len(pairs)} | {len(visible)} | {sum(r.measurement is not None for _, r in visible)} | "
              f"{errors.mean():.3f} | {np.percentile(errors, 95):.3f} | {errors.max():.3f} | "
              f"{100 * np.mean(errors <= widths):.0f}% | {int(np.sum((errors > 1) & (errors > widths)))} | "
              f"{np.median(widths):.2f} |")
    reasons: dict[str, int] = defaultdict(int)
    for _, r in rows["**all**"]:
        if r.reason is not None:
            reasons[r.reason.value] += 1
    print(f"\nnot measured: {dict(reasons)}; library time {1000 * seconds / count:.0f} ms wall, "
          f"{1000 * cpu / count:.0f} ms CPU per 640x480 frame ({count / cpu:.1f} images/s CPU)")


def _timed(cmd: list[str], cwd: Path, env: dict[str, str], repeats: int = 3) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system of the child) over `repeats` runs.

    CPU time barely moves when other processes share the machine; wall time does.
    """
    best_wall = best_cpu = math.inf
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
        best_wall = min(best_wall, wall)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best_wall, best_cpu


def speed(count: int, harness_root: str | None) -> None:
    """`harness measure --auto` on 1 and on `count` images: start-up = t(1) - work, work = (t(N) - t(1)) / (N - 1)."""
    _, frames = truth_frames(SceneGeometry(), count, seed=5)
    frames = list(frames)
    matrix = camera_matrix(FOVY_DEG)
    env = dict(os.environ)
    if harness_root:  # time another checkout's code (e.g. the commit before a change) on the same frames
        env["PYTHONPATH"] = harness_root
    print(f"\n`harness measure --auto` from {harness_root or 'this checkout'}, {count} images 640x480 "
          f"(load average {os.getloadavg()[0]:.1f})\n")
    print("| harness measure --auto | start-up s (CPU) | work ms/image (CPU) | start-up s (wall) | "
          "work ms/image (wall) | images/s (wall, N images) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for lens_known in (False, True) if not harness_root else (False,):
            folder = root / ("lens" if lens_known else "plain")
            (folder / "calibration").mkdir(parents=True)
            names = []
            for i, truth in enumerate(frames):
                names.append(f"f{i:02d}.png")
                image = distort(truth.frame, matrix, LENS) if lens_known else truth.frame
                Image.fromarray(image).save(folder / names[-1])
            if lens_known:
                CameraIntrinsics(640, 480, matrix[0, 0], matrix[1, 1], 320, 240, tuple(LENS)).save(
                    folder / "calibration" / "camera_top.yaml")
            base = [sys.executable, "-m", "harness.cli", "measure", "--bowl-cm", "11.5", "--auto"]
            if not lens_known:
                base += ["--fovy-deg", str(FOVY_DEG)]
            one_wall, one_cpu = _timed([*base, names[0]], folder, env)
            many_wall, many_cpu = _timed([*base, *names], folder, env)
            work_wall, work_cpu = (many_wall - one_wall) / (count - 1), (many_cpu - one_cpu) / (count - 1)
            label = "undistorted (camera_top.yaml)" if lens_known else "no lens calibration (--fovy-deg)"
            print(f"| {label} | {one_cpu - work_cpu:.2f} | {1000 * work_cpu:.0f} | {one_wall - work_wall:.2f} | "
                  f"{1000 * work_wall:.0f} | {count / many_wall:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-condition", type=int, default=30)
    parser.add_argument("--stress", type=int, default=48)
    parser.add_argument("--speed-images", type=int, default=20)
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--stress-only", action="store_true", help="the stress set only (no clean renders, no timing)")
    parser.add_argument("--stress-seed", type=int, default=20, help="20 is the tests' set")
    parser.add_argument("--harness-root", help="time `harness measure` from this checkout instead (PYTHONPATH)")
    args = parser.parse_args()
    if args.stress_only:
        stress(args.stress, args.stress_seed)
        return
    if not args.speed_only:
        clean_conditions(args.per_condition)
        stress(args.stress, args.stress_seed)
    speed(args.speed_images, args.harness_root)


if __name__ == "__main__":
    main()
