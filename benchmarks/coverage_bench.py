"""`harness dataset coverage` against the truth: datasets written by the harness's own recording sink
with the cube at a protocol's known offsets, a fifth of the first frames with the arm over the cube,
a fifth washed out, a fifth dim; errors in cm from the true start, and how many starts were not found.

Run: .venv/bin/python benchmarks/coverage_bench.py [--trials 24] [--sizes 640x480:libsvtav1:yuv420p 128x96]
     [--dataset PATH --calibration CAL --truth SCORESHEET]   (also a dataset recorded by `harness run`)
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.data.coverage import TableView, check_against_truth, first_frames, locate_starts, truth_from_scoresheet
from harness.models.protocol import Protocol, Scene, generate_randomized_trials
from harness.run.dataset_sink import DatasetSink, RecordingOptions
from harness.vision.calibration import load_calibration
from tests.generators.truth_dataset import BOWL_HEIGHT_CM, FOVY_DEG, Hardness, make_truth_dataset

CYCLE = [Hardness.PLAIN, Hardness.PLAIN, Hardness.ARM_OVER, Hardness.WASHED_OUT, Hardness.DIM]


def measure(root: Path, calibration: Path, truth: dict[int, tuple[float, float]], scene: Scene,
            hardness: dict[int, Hardness] | None = None) -> list[str]:
    t0 = time.perf_counter()
    frames = first_frames(root)
    cal, frame = load_calibration(calibration)
    height, width = next(iter(frames.values())).shape[:2]
    view = TableView.from_calibration(cal.rim, cal.bowl_cm, (frame.shape[1], frame.shape[0]), (width, height),
                                      scene, BOWL_HEIGHT_CM, FOVY_DEG)
    coverage = locate_starts(frames, view)
    seconds = time.perf_counter() - t0
    check = check_against_truth(coverage, truth)
    errors = list(check.errors_cm.values())
    hidden = [e for e, h in (hardness or {}).items() if h is Hardness.ARM_OVER]
    wrong = sum(1 for e in errors if e > 0.5)
    return [str(len(frames)), str(len(errors)), str(len(check.not_found)),
            f"{np.median(errors):.2f}" if errors else "-", f"{max(errors):.2f}" if errors else "-", str(wrong),
            f"{sum(1 for e in hidden if e in check.errors_cm)}/{len(hidden)}" if hardness else "-",
            f"{seconds:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--sizes", nargs="+", default=["640x480:libsvtav1:yuv420p", "128x96:h264:yuv444p",
                                                        "128x96:h264:yuv420p"])
    parser.add_argument("--dataset", help="also measure a dataset recorded by `harness run --record-dataset`")
    parser.add_argument("--calibration")
    parser.add_argument("--truth", help="the scoresheet of the run that recorded --dataset")
    parser.add_argument("--keep", help="write the generated datasets here and keep them")
    args = parser.parse_args()

    trials = generate_randomized_trials(Scene(), args.trials, 6.0, 1.2, seed=11, max_yaw_deg=20.0)
    header = ("| dataset | episodes | found | not found | median error cm | max error cm | found > 0.5 cm | "
              "arm over the cube, found | seconds |")
    rows = [header, "|" + "---|" * 9]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="coverage_bench_"))
    try:
        for spec in args.sizes:
            size, codec, pix_fmt = (*spec.split(":"), "h264", "yuv444p")[:3] if spec.count(":") != 1 else (
                *spec.split(":"), "yuv444p")
            width, height = (int(v) for v in size.split("x"))
            protocol = Protocol(name="bench", task="Pick up the cube and place it in the bowl.",
                                start_pose={"shoulder_pan": 0.0, "shoulder_lift": -60.0, "elbow_flex": 60.0,
                                            "wrist_flex": 70.0, "wrist_roll": 0.0, "gripper": 10.0},
                                success_definition="cube in bowl", trials=trials)
            hardness = {i: CYCLE[i % len(CYCLE)] for i in range(args.trials)}
            options = RecordingOptions(size=(width, height), vcodec=codec, pix_fmt=pix_fmt)
            sink = DatasetSink(work / f"{width}x{height}_{codec}_{pix_fmt}", protocol.fps, ["top", "wrist"], None,
                               protocol.task, robot_type="so101_follower", options=options)
            data = make_truth_dataset(sink, protocol, hardness)
            rows.append(f"| harness-recorded {width}x{height} {codec} {pix_fmt}, hard first frames | "
                        + " | ".join(measure(data.root, data.calibration, data.truth, protocol.scene, data.hardness))
                        + " |")
        if args.dataset:
            truth = truth_from_scoresheet(Path(args.truth))
            rows.append(f"| {args.dataset} | " + " | ".join(measure(Path(args.dataset), Path(args.calibration),
                                                                    truth, Scene())) + " |")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
