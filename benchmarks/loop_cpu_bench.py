"""The run engine's own CPU time per control step, at any revisions side by side.

    .venv/bin/python benchmarks/loop_cpu_bench.py [--trees . /path/to/another/checkout] [--rounds 5]
        [--seconds 20]

Why: `loop_bench.py` times the loop in wall time against LeRobot's, which on a machine shared with other work
measures the other tenants (at a load of 11 on 2 cores its overhead medians move by 10 ms and more). What a
change to the loop or the trial sequence costs is the CPU its own code spends per step: here the engine runs
a 3-trial protocol (`tests/data/small.yaml`, `--seconds` a trial at 30 Hz, paced) on a manual clock (nothing
sleeps) with a stand-in arm and policy that cost nothing but a dict (the test suite's `tests/unit/run/test_loop_timing`
stand-ins), no evidence cameras and no video. The thread's CPU time in the episodes is divided by the steps
run (the control loop's own cost), the rest by the trials (start pose, evidence folder, scoring, the
scoresheet's durable append, the sequence's decisions). Each
round runs every tree once, in turn, each in a fresh process (`PYTHONPATH` = the tree), so slow drift on the
machine falls on all of them alike; the table shows the median and the spread of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def child(seconds: float) -> None:
    """One measured run, in the tree this process imports `harness` from; prints steps and CPU seconds."""
    import numpy as np

    from harness.models.protocol import load_protocol
    from harness.run.clock import ManualClock
    from harness.run.engine import RunEngine, RunOptions
    from harness.run.safety import GuardedRobot
    from tests.helpers import locked_sheet
    from tests.unit.run.test_loop_timing import CostlyPolicy, PersonStage, Scorer, SlowRobot

    rng = np.random.default_rng(0)   # live frames, made before the clock starts: a camera that is not frozen
    frames = [rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8) for _ in range(32)]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        clock = ManualClock()
        robot = SlowRobot(clock, 0.004, lambda call: frames[call % len(frames)])
        sheet = locked_sheet(work)
        protocol = load_protocol(work / "small.yaml").model_copy(update={"episode_time_limit_s": seconds})
        options = RunOptions(runs_dir=work / "runs", paced=True, video=False, evidence_cameras=[], start_pose_s=0.1)
        guard = GuardedRobot(robot, release=robot.disable_torque)
        engine = RunEngine(protocol, sheet, guard, CostlyPolicy(clock, [0.005]), PersonStage(), Scorer(), clock,
                           options)
        loop_s = [0.0]
        episode = engine.loop.run

        def timed_episode(trial: Any, recorder: Any) -> Any:   # the episodes alone: the control loop's own cost
            started = time.thread_time()
            try:
                return episode(trial, recorder)
            finally:
                loop_s[0] += time.thread_time() - started

        engine.loop.run = timed_episode   # type: ignore[method-assign]
        started = time.thread_time()
        engine.run()
        cpu_s = time.thread_time() - started
        steps = sum(attempt.loop.steps for attempt in sheet.attempts)
    print(json.dumps({"steps": steps, "cpu_s": cpu_s, "loop_s": loop_s[0], "trials": len(sheet.attempts)}))


def measure(tree: Path, seconds: float) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--seconds", str(seconds)],
                          capture_output=True, text=True, env=env, cwd=tree, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=Path, nargs="+", default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0, help="each trial's episode, at 30 Hz")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.seconds)
        return
    per_step: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    per_trial: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    steps: dict[Path, int] = {}
    for round_number in range(args.rounds):
        for tree in args.trees:
            result = measure(tree.resolve(), args.seconds)
            steps[tree] = int(result["steps"])
            per_step[tree].append(1e6 * result["loop_s"] / result["steps"])
            per_trial[tree].append(1e3 * (result["cpu_s"] - result["loop_s"]) / result["trials"])
            print(f"round {round_number + 1} {tree}: {per_step[tree][-1]:.1f} us a step, "
                  f"{per_trial[tree][-1]:.1f} ms a trial outside its episode "
                  f"({result['steps']:.0f} steps, load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\n3 trials x {args.seconds:g} s at 30 Hz, stand-in arm and policy, manual clock, {args.rounds} rounds, "
          "thread CPU time\n")
    print("| tree | steps | control loop, us a step: median (rounds) | the rest of a trial, ms: median (rounds) |")
    print("|---|---|---|---|")
    for tree in args.trees:
        print(f"| {tree} | {steps[tree]} | {statistics.median(per_step[tree]):.1f} "
              f"({', '.join(f'{v:.1f}' for v in per_step[tree])}) | {statistics.median(per_trial[tree]):.1f} "
              f"({', '.join(f'{v:.1f}' for v in per_trial[tree])}) |")


if __name__ == "__main__":
    main()
