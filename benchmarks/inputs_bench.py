"""Issue 28: what refusing bad input and keeping Ray on loopback cost.

Prints two tables:
- the generated fuzz suite (tests/e2e/test_fuzz_generated.py): its case count and wall time, as CI runs it;
- Ray start-up (ray.init to the first task's answer, then shutdown) with today's settings before this
  issue (node address picked by Ray, usage stats on) against the loopback settings of
  `harness.app.parallel.runs.start_ray` (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, _node_ip_address=127.0.0.1,
  RAY_USAGE_STATS_ENABLED=0), each in a fresh process, median of N.

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/inputs_bench.py [--repeats 3] [--skip-fuzz]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STARTUP = """
import os, sys, time
loopback = sys.argv[1] == "loopback"
if loopback:
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
started = time.perf_counter()
import ray
extra = {"_node_ip_address": "127.0.0.1"} if loopback else {}
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False, **extra)
node = ray.util.get_node_ip_address()
ray.get(ray.remote(lambda: 1).remote())
up = time.perf_counter() - started
ray.shutdown()
print(f"{up:.3f} {time.perf_counter() - started:.3f} {node}")
"""


def ray_startup(mode: str) -> tuple[float, float, str]:
    out = subprocess.run([sys.executable, "-c", STARTUP, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    return float(out[0]), float(out[1]), out[2]


def fuzz() -> tuple[int, float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/e2e/test_fuzz_generated.py", "-q", "-p",
                           "no:cacheprovider"], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    from tests.e2e.test_fuzz_generated import CASES, WRITERS

    return len(CASES) + len(WRITERS) + 1, wall, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-fuzz", action="store_true")
    args = parser.parse_args()
    print("| Ray start-up | ray.init to first task, s (median) | with shutdown, s | node address |")
    print("|---|---|---|---|")
    for mode, label in (("today", "before (Ray's defaults)"), ("loopback", "loopback settings")):
        runs = [ray_startup(mode) for _ in range(args.repeats)]
        print(f"| {label} | {statistics.median(r[0] for r in runs):.2f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | {runs[0][2]} |")
    if not args.skip_fuzz:
        cases, wall, summary = fuzz()
        print()
        print("| fuzz suite | cases | wall time, s | pytest |")
        print("|---|---|---|---|")
        print(f"| tests/e2e/test_fuzz_generated.py | {cases} | {wall:.0f} | {summary} |")


if __name__ == "__main__":
    main()
