"""Which kinds of process spend the test suite's CPU (issue 61, item 2): a pytest command run with its whole process
tree sampled, the CPU seconds summed by kind of process.

`benchmarks/suite_cpu.py` gives each test's own CPU, but not what a test leaves to processes it never waits for
(evidence lanes, Ray's daemons and workers, policy servers, the CLI server's forks): on two cores the suite's wall
time follows the CPU of the whole tree. This is what showed, in session 46, that the evidence-writer lanes of
simulated runs were the largest kind after the test workers themselves, and that LeRobot's own tools spent most
of their CPU spinning torch's OpenMP pool. Sampled every 0.2 s, so a process that lives less than that is missed:
the figures are a floor.

    .venv/bin/python benchmarks/suite_processes.py                          # the main stream scripts/test runs
    .venv/bin/python benchmarks/suite_processes.py -- -m slow tests/e2e     # any pytest arguments after --
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import process_tree
import psutil

REPO = Path(__file__).resolve().parents[1]
MAIN_STREAM = ["-n", "2", "-m", "not serial and not desk and not shares_cores"]

KINDS = [   # (kind, pattern in the command line), first match wins
    ("pytest-xdist worker (in-process tests)", r"exec\(eval\(sys\.stdin"),
    ("CLI server and its forked commands", r"tests\.cli_process"),
    ("evidence-writer lanes (multiprocessing spawn)", r"multiprocessing\.spawn"),
    ("dataset check pool (multiprocessing forkserver)", r"multiprocessing\.forkserver"),
    ("Ray workers and daemons", r"ray[/:]|raylet|gcs_server"),
    ("LeRobot's tools", r"lerobot[-_.](eval|train|record|rollout|teleoperate|scripts)|async_inference"),
    ("policy servers", r"policy_serve"),
    ("harness commands in a process of their own", r"harness(\.cli|\b)"),
    ("pip", r"\bpip\b"),
    ("pytest", r"pytest"),
]


def kind_of(command: str) -> str:
    return next((kind for kind, pattern in KINDS if re.search(pattern, command)), "other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: scripts/test's main "
                                                       "stream)")
    args = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(args.pytest_args or MAIN_STREAM)]
    seen: process_tree.Seen = {}
    busy = process_tree.busy_ticks()
    started = time.monotonic()
    # pytest's output to a file, not a pipe: a pipe nobody reads while the tree is sampled fills (64 kB, a few
    # failures' tracebacks) and blocks pytest in its next write for good
    with tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(command, cwd=REPO, stdout=output, text=True)
        root = psutil.Process(child.pid)
        while child.poll() is None:
            process_tree.sample(root, seen)
            time.sleep(0.2)
        wall = time.monotonic() - started
        output.seek(0)
        lines = output.read().splitlines()
    print("\n".join(line for line in lines[-5:] if "passed" in line or "failed" in line))
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for cpu, name in seen.values():
        totals[kind_of(name)][0] += cpu
        totals[kind_of(name)][1] += 1
    cpu_all = sum(cpu for cpu, _ in totals.values())
    print(f"\n`pytest {' '.join(command[5:])}`: {wall:.0f} s of wall, {cpu_all:.0f} CPU s in the tree; the rest of "
          f"the machine kept {process_tree.others_cores(busy, cpu_all, wall):.1f} cores busy meanwhile\n")
    print("| kind of process | processes | CPU s | share |\n|---|---:|---:|---:|")
    for kind, (cpu, count) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"| {kind} | {count:.0f} | {cpu:.0f} | {100 * cpu / cpu_all:.1f} % |")


if __name__ == "__main__":
    main()
