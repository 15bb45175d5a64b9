"""The first set-up, timed (issue 38, item 5: CI's clock starts with it): `bash scripts/setup` in a fresh checkout at
one or more git revisions, one after the other on this machine, each with empty package caches, as on a fresh
CI machine. Prints each step the set-up announced with the seconds it took, the whole, and the CPU it used.

Each revision is checked out in a worktree of its own (`suite_bench.checkout`, removed at the end however the
bench ends); the Debian packages must already be installed (the set-up skips that step when they are). It
downloads the ~5 GB of wheels once per revision: minutes each.

    .venv/bin/python benchmarks/setup_bench.py --rev a22b668 --rev HEAD
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from suite_bench import checkout, children_cpu_s


@dataclass
class SetupTiming:
    rev: str
    steps: list[tuple[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    ok: bool = False


def time_setup(rev: str, tree: Path, cache: Path) -> SetupTiming:
    """Run the set-up of the checkout in TREE (at REV) with package caches of its own in CACHE; each announced
    step's seconds."""
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "UV_CACHE_DIR": str(cache)}
    timing = SetupTiming(rev)
    cpu0, start = children_cpu_s(), time.monotonic()
    process = subprocess.Popen(["bash", "scripts/setup"], cwd=tree, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    last, what = start, ""
    for line in process.stdout:
        now = time.monotonic()
        if what:
            timing.steps.append((what, now - last))
        last, what = now, line.strip()
        print(f"  {rev} {now - start:6.1f} s  {what}", flush=True)
    timing.ok = process.wait() == 0
    timing.wall_s = time.monotonic() - start
    if what:
        timing.steps.append((what, timing.wall_s - (last - start)))
    timing.cpu_s = children_cpu_s() - cpu0
    return timing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", action="append", required=True, help="a git revision to time (repeatable)")
    args = parser.parse_args()
    timings = []
    for rev in args.rev:
        with checkout(rev) as tree, tempfile.TemporaryDirectory(prefix="setup-bench-cache-") as cache:
            timings.append(time_setup(rev, tree, Path(cache)))
    print(f"\nload average now: {os.getloadavg()[0]:.1f}")
    print("| revision | step | s |\n|---|---|---:|")
    for t in timings:
        for what, seconds in t.steps:
            if seconds >= 0.5:
                print(f"| {t.rev} | {what} | {seconds:.0f} |")
    print("\n| revision | set-up, wall s | CPU s | result |\n|---|---:|---:|---|")
    for t in timings:
        print(f"| {t.rev} | {t.wall_s:.0f} | {t.cpu_s:.0f} | {'ok' if t.ok else 'FAILED'} |")
    return 0 if all(t.ok for t in timings) else 1


if __name__ == "__main__":
    sys.exit(main())
