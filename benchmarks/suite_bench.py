"""The test suite's inner loop, timed (issue 38, item 5): `pytest -m "not slow" -n 2` over the tiers given with
--path (the README's inner loop: `--path tests/unit --path tests/system`; the whole suite when none is given), at
one or more git revisions side by side on this machine, with the CPU it took and one process's collection.

Each revision runs in a temporary git worktree (removed at the end however the bench ends) with this
checkout's virtual environment; the working tree itself is timed when no revision is named. A run on a loaded
machine says little: the load average before and after each run is printed beside it.

    .venv/bin/python benchmarks/suite_bench.py --path tests/unit --path tests/system   # the working tree's inner loop
    .venv/bin/python benchmarks/suite_bench.py --rev d88dca0 --rev HEAD --runs 2
    .venv/bin/python benchmarks/suite_bench.py --rev d7c0a2f --rev HEAD --marker "" --workers 0 \
        --path tests/realtime/test_operator_tui_placement.py          # some modules, every test, in one process
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Timing:
    label: str
    passed: int
    failed: int
    wall_s: float
    cpu_s: float
    collect_s: float
    load: tuple[float, float]


@contextmanager
def checkout(rev: str | None) -> Iterator[Path]:
    """The tree to time: this checkout, or REV in a worktree of its own."""
    if rev is None:
        yield REPO
        return
    folder = Path(tempfile.mkdtemp(prefix="suite-bench-"))
    tree = folder / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _count(summary: str, word: str) -> int:
    found = re.search(rf"(\d+) {word}", summary)
    return int(found.group(1)) if found else 0


def time_suite(tree: Path, label: str, marker: str, workers: int, paths: list[str]) -> Timing:
    python = str(REPO / ".venv" / "bin" / "python")
    base = [python, "-m", "pytest", *(["-m", marker] if marker else []), "-q", "-p", "no:cacheprovider", *paths]
    started = time.monotonic()
    subprocess.run([*base, "--collect-only"], cwd=tree, capture_output=True, check=False)
    collect_s = time.monotonic() - started
    load_before = os.getloadavg()[0]
    cpu_before, started = children_cpu_s(), time.monotonic()
    done = subprocess.run([*base, *(["-n", str(workers)] if workers else [])], cwd=tree, capture_output=True,
                          text=True, check=False)
    wall_s, cpu_s = time.monotonic() - started, children_cpu_s() - cpu_before
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode not in (0, 1):
        sys.exit(f"{label}: pytest exited {done.returncode}: {summary or done.stderr[-500:]}")
    for line in done.stdout.splitlines():   # a failure in a timed run is named, not only counted
        if line.startswith(("FAILED", "ERROR")):
            print(f"{label}: {line[:300]}", file=sys.stderr)
    return Timing(label, _count(summary, "passed"), _count(summary, "failed"), wall_s, cpu_s, collect_s,
                  (load_before, os.getloadavg()[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", action="append", help="a git revision to time (repeat for several)")
    parser.add_argument("--runs", type=int, default=1, help="runs per revision")
    parser.add_argument("--marker", default="not slow", help="the tier (pytest -m)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process, no -n)")
    parser.add_argument("--path", action="append", default=[], help="a test file or node to time (repeat; "
                                                                   "default: the whole suite)")
    args = parser.parse_args()
    timings = []
    for rev in args.rev or [None]:
        with checkout(rev) as tree:
            label = rev or "working tree"
            for run in range(1, args.runs + 1):
                timing = time_suite(tree, label, args.marker, args.workers, args.path)
                print(f"{label} run {run}: {timing.passed} passed in {timing.wall_s:.1f} s", file=sys.stderr,
                      flush=True)
                timings.append(timing)
    bytecode = "PYTHONDONTWRITEBYTECODE set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "bytecode written"
    command = " ".join(["pytest", *([f'-m "{args.marker}"'] if args.marker else []),
                        *([f"-n {args.workers}"] if args.workers else []), *args.path])
    print(f"\n`{command}`, {os.cpu_count()} cores, {bytecode}\n")
    print("| revision | passed | failed | wall (s) | CPU, all processes (s) | one process's collection (s) "
          "| load before / after |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for t in timings:
        print(f"| {t.label} | {t.passed} | {t.failed} | {t.wall_s:.1f} | {t.cpu_s:.0f} | {t.collect_s:.1f} | "
              f"{t.load[0]:.1f} / {t.load[1]:.1f} |")


if __name__ == "__main__":
    main()
