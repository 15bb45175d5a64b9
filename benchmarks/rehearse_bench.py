"""Time of a 3-trial `harness rehearse` with the scripted operator, end to end and per phase.

Runs the installed CLI as a user would (`harness rehearse PROTOCOL --policy PATH --operator scripted`) in
a scratch folder, on a 3-trial protocol over the emulated table (episodes of `--episode-s` seconds) and a
tiny ACT at 640x480 (the tests' `save_tiny_act`: no download). Each line of the command's output is
stamped as it arrives; the phases are read from where the steps start (this is a benchmark's reading of a
log, not a decision the product makes):

- start: process start -> the emulated bus and simulated cameras are up (imports, MuJoCo, the render process);
- desk: -> the bowl calibrated and the trained spot measured (arm to start pose, two photos, `measure --auto`);
- trials: -> `harness run` done (policy load, connect, empty-scene reference, 3 guided placements, episodes,
  proposals, scores);
- measure: -> `harness measure` on the runs folder done.

Run: .venv/bin/python benchmarks/rehearse_bench.py [--repeats 2] [--episode-s 3] [--errors 0,1.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = """name: bench
task: Pick up the cube and place it in the bowl.
scene: {{bowl_diameter_cm: 11.5, cube_edge_cm: 3.0, trained_cube_xy_cm: [22.0, -5.0], bowl_xy_cm: [18.0, 14.0]}}
start_pose: {{shoulder_pan: 0.0, shoulder_lift: -60.0, elbow_flex: 60.0, wrist_flex: 70.0, wrist_roll: 0.0,
  gripper: 10.0}}
fps: 30
episode_time_limit_s: {episode_s}
success_definition: Autonomous grasp, lift and release; the cube comes to rest inside the bowl.
failure_taxonomy: [success, no_grasp, grasped_then_dropped, wrong_placement]
run: {{robot: sim, policy: expert}}
trials:
- {{index: 1, dx_cm: 3.0, dy_cm: -2.0, yaw_deg: 15.0}}
- {{index: 2, dx_cm: -2.0, dy_cm: 1.5, yaw_deg: -10.0}}
- {{index: 3, dx_cm: 1.0, dy_cm: 3.0, yaw_deg: 5.0}}
"""
MARKS = (("start", "Emulated STS3215 bus"), ("desk", "$ harness run"), ("trials", "$ harness measure runs"),
         ("measure", "rehearsal done"))


def one(folder: Path, error_cm: float) -> dict[str, float]:
    for name in ("scoresheets", "runs", "rehearsals"):
        subprocess.run(["rm", "-rf", str(folder / name)], check=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "rehearse", "bench.yaml", "--policy", "act",
                                "--operator", "scripted", "--placement-error-cm", str(error_cm)],
                               cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    at: dict[str, float] = {}
    corrections = 0
    lines = []
    for line in process.stdout:
        lines.append(line)
        corrections += "corrected from the guide" in line
        for phase, mark in MARKS:
            if mark in line and phase not in at:
                at[phase] = time.perf_counter() - t0
    if process.wait() != 0 or len(at) != len(MARKS):
        sys.exit("rehearsal failed:\n" + "".join(lines[-40:]))
    total = time.perf_counter() - t0
    marks = [0.0, *(at[p] for p, _ in MARKS)]
    out = {p: marks[i + 1] - marks[i] for i, (p, _) in enumerate(MARKS)}
    out["total"] = total
    out["corrections"] = corrections
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--episode-s", type=float, default=3.0)
    parser.add_argument("--errors", default="0,1.5", help="scripted placement errors (cm) to compare")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.tiny_policy import save_tiny_act

    with tempfile.TemporaryDirectory(prefix="rehearse-bench-") as tmp:
        folder = Path(tmp)
        (folder / "bench.yaml").write_text(PROTOCOL.format(episode_s=args.episode_s))
        save_tiny_act(folder / "act", height=480, width=640)
        print(f"3-trial rehearsal, episodes {args.episode_s:g} s, tiny ACT 640x480, load "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of {args.repeats}")
        print("| placement error (cm) | corrections | start (s) | desk (s) | trials (s) | measure (s) | total (s) |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for error in (float(e) for e in args.errors.split(",")):
            runs = [one(folder, error) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"| {error:g} | {med['corrections']:.0f} | {med['start']:.1f} | {med['desk']:.1f} | "
                  f"{med['trials']:.1f} | {med['measure']:.1f} | {med['total']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
