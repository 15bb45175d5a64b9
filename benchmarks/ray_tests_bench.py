"""Where the Ray tests' time goes (issue 61, item 2): each named test run alone, in a pytest process of its own,
with its wall seconds and the CPU seconds of its whole process tree, Ray's processes included, split by who
spent them.

CI runs every `ray_cluster` test on one xdist worker, so their summed wall time is on its critical path; and
`benchmarks/suite_cpu.py` sees little of their CPU, which Ray's own processes (GCS, raylet, agents, and the
workers that import torch and LeRobot) spend, not the test's process. Here the tree is sampled every 0.1 s (as
`parallel_bench.py` does): a process that lives less than that is missed, so the CPU figures are a floor.

    .venv/bin/python benchmarks/ray_tests_bench.py --module tests/e2e/test_sweep.py -k fresh
    .venv/bin/python benchmarks/ray_tests_bench.py --module tests/e2e/test_parallel_run.py -k killed

The machine's 1-minute load before each test and the cores other processes used during it are printed beside
each figure: on a shared machine compare only runs made back to back.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import process_tree
import psutil

REPO = Path(__file__).resolve().parents[1]
GROUPS = (("Ray workers", ("default_worker", "ray::")), ("Ray daemons", ("gcs_server", "raylet", "agent", "dashboard",
          "monitor", "log_monitor", "ray_reaper", "ray_client")))


def group_of(name: str) -> str:
    for group, marks in GROUPS:
        if any(mark in name for mark in marks):
            return group
    return "pytest and its CLIs"


def run_test(node: str, repo: Path = REPO, marks: str | None = None) -> dict[str, float | str]:
    """One pytest process running `node` (several node ids or paths joined by "+": one after the other in that
    process, as CI's one worker runs them) in the checkout `repo`: its wall seconds and its tree's CPU seconds by
    group."""
    load = os.getloadavg()[0]
    busy = process_tree.busy_ticks()
    env = {**os.environ, "PYTHONPATH": str(repo)}
    started = time.perf_counter()
    seen: dict[tuple[int, float], tuple[float, str]] = {}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-m", marks] if marks else []),
               *node.split("+")]
    with subprocess.Popen(command, cwd=repo,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            process_tree.sample(root, seen)
            time.sleep(0.1)
        out = proc.stdout.read() if proc.stdout else ""
    wall = time.perf_counter() - started
    by_group: dict[str, float] = defaultdict(float)
    for cpu, name in seen.values():
        by_group[group_of(name)] += cpu
    cpu = sum(by_group.values())
    others = max(0.0, process_tree.others_cores(busy, cpu, wall))
    status = "passed" if proc.returncode == 0 else f"FAILED ({proc.returncode})\n{out[-3000:]}"
    return {"test": node, "status": status, "wall": wall, "cpu": cpu, "load": load, "others": others,
            **{group: by_group.get(group, 0.0) for group in ("pytest and its CLIs", *(g for g, _ in GROUPS))},
            "workers": sum(1 for _, name in seen.values() if group_of(name) == "Ray workers")}


def collect(module: str, keyword: str | None, repo: Path = REPO) -> list[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", module,
               *(["-k", keyword] if keyword else [])]
    out = subprocess.run(command, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines() if "::" in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", nargs="*", help="pytest node ids")
    parser.add_argument("--module", help="every test of this module (with -k: those it selects)")
    parser.add_argument("-k", dest="keyword")
    parser.add_argument("-m", dest="marks", help="pytest's -m for each run, e.g. ray_cluster")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to test (default: this one), e.g. "
                        "main's, for a before beside this checkout's after")
    args = parser.parse_args()
    nodes = [*args.tests, *(collect(args.module, args.keyword, args.repo) if args.module else [])]
    print("| test | wall s | CPU s (tree) | pytest s | Ray workers s | Ray daemons s | Ray worker processes | "
          "load before | others' cores |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for node in nodes:
        r = run_test(node, args.repo, args.marks)
        name = str(r["test"]).split("::", 1)[-1][:90] if "+" not in node else node.replace("tests/e2e/", "")
        print(f"| `{name}` | {r['wall']:.0f} | {r['cpu']:.0f} | {r['pytest and its CLIs']:.0f} | "
              f"{r['Ray workers']:.0f} | {r['Ray daemons']:.0f} | {r['workers']} | {r['load']:.1f} | "
              f"{r['others']:.1f} |", flush=True)
        if r["status"] != "passed":
            print(r["status"], file=sys.stderr)


if __name__ == "__main__":
    main()
