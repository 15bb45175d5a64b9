"""Trials per second against Ray worker count, parallel efficiency, and Ray's overhead per trial.

    .venv/bin/python benchmarks/parallel_bench.py [--trials 12] [--workers 1 2] [--no-video]

Runs the same randomized protocol (expert on the simulated arm) serially with the ordinary engine,
then with `--workers N` for each N, each into a fresh scoresheet, and prints one table. Wall time
includes starting the Ray runtime and the workers (what a person waits for); "steady" excludes
it (from the first recorded trial to the last), which is what a long run converges to.
Efficiency = parallel trials/s / (N x serial trials/s), steady. Overhead per trial = steady time
per trial on one Ray worker - serial time per trial, as a share of the serial trial.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HARNESS = [sys.executable, "-m", "harness.cli"]


def _run(protocol: Path, sheet: Path, runs: Path, workers: int | None, video: bool) -> tuple[float, list[float]]:
    """Wall seconds, and the time each trial line appeared (seconds from start)."""
    command = [*HARNESS, "run", str(protocol), "--headless", "--policy", "expert", "--scoresheet", str(sheet),
               "--runs-dir", str(runs)]
    if workers is not None:
        command += ["--workers", str(workers)]
    if not video:
        command.append("--no-video")
    started = time.perf_counter()
    lines: list[float] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if re.match(r"\[\s*\d+/\d+\] trial", line):
                lines.append(time.perf_counter() - started)
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {' '.join(command)}")
    return time.perf_counter() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-video", action="store_true")
    args = parser.parse_args()
    video = not args.no_video
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        protocol = folder / "bench.yaml"
        subprocess.run([*HARNESS, "protocol", "new", "--randomized", "--n", str(args.trials), "--radius-cm", "5",
                        "--min-spacing-cm", "1.2", "--seed", "11", "-o", str(protocol)], check=True,
                       stdout=subprocess.DEVNULL)
        rows = []
        wall, marks = _run(protocol, folder / "serial.yaml", folder / "runs", None, video)
        serial_steady = (marks[-1] - marks[0]) / (len(marks) - 1)
        rows.append(("serial engine", wall, args.trials / wall, serial_steady))
        for n in args.workers:
            wall, marks = _run(protocol, folder / f"ray{n}.yaml", folder / "runs", n, video)
            steady = (marks[-1] - marks[0]) / (len(marks) - 1)
            rows.append((f"Ray, {n} worker{'s' if n > 1 else ''}", wall, args.trials / wall, steady))
    cores = len(os.sched_getaffinity(0))
    print(f"{args.trials} randomized trials, expert, evidence {'on' if video else 'off'}, {cores} cores\n")
    print("| run | wall s | trials/s (wall) | steady s/trial | steady trials/s | efficiency (steady) |")
    print("|---|---|---|---|---|---|")
    for name, wall, rate, steady in rows:
        n = int(name.split()[1].rstrip(",")) if name.startswith("Ray") else 1
        efficiency = (1 / steady) / (n * (1 / serial_steady))
        print(f"| {name} | {wall:.1f} | {rate:.3f} | {steady:.2f} | {1 / steady:.3f} | {100 * efficiency:.0f}% |")
    one = next((r for r in rows if r[0].startswith("Ray, 1 ")), None)
    if one is not None:
        overhead = one[3] - serial_steady
        print(f"\nRay overhead per trial (one worker vs the serial engine, steady): {overhead:+.3f} s "
              f"= {100 * overhead / serial_steady:+.1f}% of a {serial_steady:.2f} s trial; Ray and worker "
              f"start-up, once per run: {one[1] - one[3] * args.trials:.1f} s")


if __name__ == "__main__":
    main()
