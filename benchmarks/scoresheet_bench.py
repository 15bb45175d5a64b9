"""Scoresheet cost against its length: append, load, pending_trials, resume-and-append, `harness report`.

Run: .venv/bin/python benchmarks/scoresheet_bench.py [--sizes 50 500 5000]

Each size gets a fresh scoresheet over a protocol of that many trials, filled with attempts the
size of a real simulated one (judge verdict with events and thresholds, loop statistics, four
artifact paths). `append` is one `add_attempt` on a loaded sheet (the per-trial cost of a run);
`resume+append` and `report` are separate `harness` processes, as a user meets them, with their
peak memory. The progress witnesses go to a state folder of the bench's own (`HARNESS_STATE_DIR`), reset with
each copy of a sheet, so appending to a copy again is not taken for a rollback.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
from harness.models.protocol import Protocol, Trial, protocol_to_yaml
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
from harness.models.sheet_records import attempt_from_label
from harness.storage.state_dir import STATE_DIR_ENV, state_dir

RESUME_AND_APPEND = """
import sys, time
from harness.models.scoresheet import load_scoresheet
from harness.models.sheet_records import attempt_from_label
t0 = time.perf_counter()
sheet = load_scoresheet(sys.argv[1])
trial = sheet.pending_trials()[0]
sheet.add_attempt(attempt_from_label("success", trial_index=trial, attempt=sheet.next_attempt_number(trial),
                                     started_at="t0", ended_at="t1", duration_s=1.0))
print(time.perf_counter() - t0)
"""


def judge_verdict(index: int) -> dict:
    """What the simulator's judge writes for a typical success."""
    return {
        "label": "success", "detail": "released inside the bowl", "true_placement_error_cm": 1.234 + index % 7,
        "cube_inside_bowl": True, "clean_release": True, "grasped": True, "lifted": True, "max_lift_cm": 6.21,
        "events": [{"event": name, "t": round(0.7 * k + 0.013 * index % 1, 3), "cube": [0.21, -0.04, 0.012 * k]}
                   for k, name in enumerate(("grasp", "lift", "release", "withdraw", "stable_in_bowl"))],
        "thresholds": {"lift_m": 0.02, "drop_min_height_m": 0.03, "settle_s": 1.5, "grasp_force_n": 0.5,
                       "release_force_n": 0.2, "rim_margin_m": 0.0},
    }


def attempt_fields(index: int) -> dict:
    folder = f"runs/bench/trial-{index:04d}-a1"
    return {
        "trial_index": index, "attempt": 1, "scored_by": "judge", "judge": judge_verdict(index),
        "placement_error_cm": 1.234 + index % 7, "started_at": "2026-11-30T10:00:00.000+00:00",
        "ended_at": "2026-11-30T10:00:07.000+00:00", "duration_s": 7.0,
        "loop": {"steps": 420, "target_fps": 30.0, "achieved_fps": 29.9, "policy_latency_ms_p50": 0.2,
                 "policy_latency_ms_p95": 0.4, "policy_latency_ms_max": 1.1, "robot_io_ms_p50": 6.0,
                 "robot_io_ms_p95": 9.0, "missed_deadlines": 0},
        "artifacts": {name: f"{folder}/{name}" for name in
                      ("final_top.png", "top.mp4", "trajectory.parquet", "judge.json")},
    }


def build_sheet(folder: Path, size: int, name: str = "sheet.yaml") -> Path:
    """A sheet over `size` + 1 trials with `size` attempts recorded (one trial left to append)."""
    protocol = Protocol(name="bench", task="t", start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS,
                        trials=[Trial(index=i, dx_cm=0.0, dy_cm=0.0) for i in range(1, size + 2)])
    protocol_path = folder / "bench-protocol.yaml"
    protocol_path.write_text(protocol_to_yaml(protocol))
    sheet_path = folder / name
    sheet = lock_scoresheet(sheet_path, build_locked(protocol, protocol_path, "expert", "sim"), {})
    bulk_fill(sheet, [attempt_from_label("success", **attempt_fields(i)) for i in range(1, size + 1)])
    return sheet_path


def bulk_fill(sheet, attempts) -> None:
    """Setup only (not timed): record many attempts with one whole-file write."""
    from harness.models.scoresheet import _chained

    for attempt in attempts:
        previous = sheet.records[-1].chain_sha256 if sheet.records else sheet.lock["sha256"]
        sheet.records.append(_chained(attempt, previous))   # the chain as written; loading indexes it
    sheet.save()


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def child(args: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of a child process, and its stdout.

    CPU time is reported beside wall time because the reference machine is shared: under
    contention wall time grows, the CPU a command needs does not."""
    t0 = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - t0
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{args} failed with {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def measure(size: int, scratch: Path) -> dict[str, float]:
    folder = scratch / f"n{size}"
    folder.mkdir()
    path = build_sheet(folder, size)
    shutil.copytree(state_dir(), folder / "state-after-build")
    repeat = 3 if size <= 500 else 1
    load_s = timed(lambda: load_scoresheet(path), repeat)
    sheet = load_scoresheet(path)
    pending_s = timed(sheet.pending_trials, repeat)
    copy = folder / "copy.yaml"
    results = {"size": size, "load": load_s, "pending": pending_s}
    appends = []
    for _ in range(repeat):
        clone(path, copy)
        loaded = load_scoresheet(copy)
        attempt = attempt_from_label("success", **attempt_fields(size + 1))
        t0 = time.perf_counter()
        loaded.add_attempt(attempt)
        appends.append(time.perf_counter() - t0)
    results["append"] = statistics.median(appends)
    clone(path, copy)
    wall, cpu, rss, out = child([sys.executable, "-c", RESUME_AND_APPEND, str(copy)])
    results["resume_in"], results["resume_wall"], results["resume_cpu"], results["resume_rss"] = (
        float(out.split()[-1]), wall, cpu, rss)
    harness = str(Path(sys.executable).with_name("harness"))
    restore_state(folder)   # the copies' appends are not the original's
    results["report_wall"], results["report_cpu"], results["report_rss"], _ = child([harness, "report", str(path)])
    results["json_wall"], results["json_cpu"], results["json_rss"], _ = child([harness, "report", "--json",
                                                                              str(path)])
    return results


def restore_state(folder: Path) -> None:
    """The state folder as it was when `folder`'s sheet was built."""
    shutil.rmtree(state_dir())
    shutil.copytree(folder / "state-after-build", state_dir())


def clone(source: Path, target: Path) -> None:
    """A fresh copy of a sheet (and whatever storage travels beside it) to append to, with the state folder as
    it was when the sheet was built (its progress witness has not seen the copy's earlier appends)."""
    restore_state(source.parent)
    for sibling in source.parent.glob(source.name + "*"):
        if sibling.is_file():
            (target.parent / sibling.name.replace(source.name, target.name)).write_bytes(sibling.read_bytes())


def png_costs(frame) -> tuple[float, float]:
    """Milliseconds to encode one 640x480 frame as PNG at the default compression and at level 1."""
    import io

    from PIL import Image

    image = Image.fromarray(frame)
    default = timed(lambda: image.save(io.BytesIO(), format="PNG"), 5)
    fast = timed(lambda: image.save(io.BytesIO(), format="PNG", compress_level=1), 5)
    return 1000 * default, 1000 * fast


def measure_command(scratch: Path, images: int) -> tuple[float, tuple[float, float]]:
    """Images per second of `harness measure` over one run folder whose sheet has an attempt per image:
    simulator frames (bowl, cube, arm), rim found automatically, annotated PNGs and the sheet written."""
    import contextlib
    import io

    from PIL import Image

    import harness.sim  # noqa: F401  (headless GL before mujoco)
    from harness.cli import main as harness_main
    from harness.sim.scene import SceneGeometry
    from tests.generators.truth import truth_frames

    folder = scratch / "measure"
    (folder / "scoresheets").mkdir(parents=True)
    build_sheet(folder / "scoresheets", images, name="bench.yaml")
    _, frames = truth_frames(SceneGeometry(), images, seed=7)
    costs = (0.0, 0.0)
    for index, truth in enumerate(frames, start=1):
        if index == 1:
            costs = png_costs(truth.frame)
        trial = folder / "runs" / "bench" / f"trial-{index:04d}-a1"
        trial.mkdir(parents=True)
        Image.fromarray(truth.frame).save(trial / "final_top.png")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            harness_main(["measure", "runs/bench", "--bowl-cm", "11.5", "--auto"])
        return images / (time.perf_counter() - t0), costs
    finally:
        os.chdir(previous)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--measure-images", type=int, default=50, help="0 skips the `harness measure` row")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| attempts | append (one trial) | load | pending_trials | resume+append: in process / command wall / "
          "CPU / peak RSS | `harness report`: wall / CPU / peak RSS | `report --json`: wall / CPU / peak RSS |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="scoresheet-bench-") as scratch:
        os.environ[STATE_DIR_ENV] = str(Path(scratch) / "state")   # children inherit it
        state_dir().mkdir()
        for size in args.sizes:
            r = measure(size, Path(scratch))
            print(f"| {size:,} | {r['append'] * 1000:.1f} ms | {r['load'] * 1000:.0f} ms | "
                  f"{r['pending'] * 1000:.2f} ms | {r['resume_in']:.2f} s / {r['resume_wall']:.2f} s / "
                  f"{r['resume_cpu']:.2f} s / {r['resume_rss']:.0f} MiB | {r['report_wall']:.2f} s / "
                  f"{r['report_cpu']:.2f} s / {r['report_rss']:.0f} MiB | {r['json_wall']:.2f} s / "
                  f"{r['json_cpu']:.2f} s / {r['json_rss']:.0f} MiB |", flush=True)
        if args.measure_images:
            rate, (default_ms, fast_ms) = measure_command(Path(scratch), args.measure_images)
            print(f"\n`harness measure` over {args.measure_images} final frames (auto rim, annotated PNGs, "
                  f"measurements recorded): {rate:.1f} images/s; one 640x480 PNG: {default_ms:.0f} ms at the "
                  f"default compression, {fast_ms:.0f} ms at level 1")


if __name__ == "__main__":
    main()
