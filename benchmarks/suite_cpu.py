"""Where the test suite's CPU goes (issue 38, item 5): CI's passes run with a plugin that records each test's CPU
seconds, then a table by module (or by test), largest first, with each one's share of the whole.

CI on two cores is CPU-bound (session 36: 2,424 CPU-seconds recorded in the parallel pass, which CI runs in about
20 minutes), so its wall time follows the CPU the tests take; CPU seconds barely move with the machine's load,
so this can be measured beside other work, unlike `suite_bench.py`'s wall times. A module-scoped fixture is
counted in the first test that used it, once per worker that built it.

    .venv/bin/python benchmarks/suite_cpu.py                                  # CI's parallel pass
    .venv/bin/python benchmarks/suite_cpu.py --marks serial --workers 0 --by test --top 20
    .venv/bin/python benchmarks/suite_cpu.py --marks "" --workers 3           # the whole suite in one run
    .venv/bin/python benchmarks/suite_cpu.py --paths tests/e2e/test_smolvla.py --keep /tmp/cpu   # and keep the records
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def record(marks: str, workers: int, paths: list[str], folder: Path) -> tuple[int, float]:
    """Run pytest with the plugin; (its exit status, its wall seconds)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "benchmarks"), str(REPO)]),
           "SUITE_CPU_OUT": str(folder / "cpu")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu_plugin", "-p", "no:cacheprovider",
               *(["-m", marks] if marks else []), *(["-n", str(workers)] if workers else []), *paths]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, check=False, stdout=subprocess.PIPE, text=True)
    print("\n".join(line for line in done.stdout.splitlines()[-15:] if "passed" in line or "FAILED" in line))
    return done.returncode, time.monotonic() - started


def table(folder: Path, by: str, top: int) -> str:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for path in folder.glob("cpu.*.tsv"):
        for line in path.read_text().splitlines():
            node, cpu, wall = line.split("\t")
            key = node.split("::")[0] if by == "module" else node.split("@")[0]
            sums[key][0] += float(cpu)
            sums[key][1] += float(wall)
            sums[key][2] += 1
    total = sum(cpu for cpu, _, _ in sums.values())
    rows = [f"| {by} | tests | CPU s | share | cumulative | summed wall s |", "|---|---:|---:|---:|---:|---:|"]
    cumulative = 0.0
    for key, (cpu, wall, count) in sorted(sums.items(), key=lambda kv: -kv[1][0])[:top]:
        cumulative += cpu
        rows.append(f"| `{key.removeprefix('tests/')}` | {count:.0f} | {cpu:.0f} | {100 * cpu / total:.1f} % | "
                    f"{100 * cumulative / total:.0f} % | {wall:.0f} |")
    rest = total - cumulative
    if rest > 0:
        rows.append(f"| the other {len(sums) - min(top, len(sums))} | | {rest:.0f} | {100 * rest / total:.1f} % | "
                    f"100 % | |")
    return "\n".join([f"{sum(c for _, _, c in sums.values()):.0f} tests, {total:.0f} CPU seconds recorded", *rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marks", default="not serial",
                        help='pytest -m expression (default: CI\'s parallel pass; "" for every test)')
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers; 0 runs in one process")
    parser.add_argument("--paths", nargs="*", default=[], help="test files or folders (default: the suite)")
    parser.add_argument("--by", choices=["module", "test"], default="module")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="write the records here (kept) instead of a temporary folder")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        load = os.getloadavg()[0]
        status, wall = record(args.marks, args.workers, args.paths, folder)
        spread = f"-n {args.workers}" if args.workers else "in one process"
        print(f"pytest -m {args.marks!r} {spread}: exit {status}, {wall:.0f} s wall, "
              f"load {load:.1f} -> {os.getloadavg()[0]:.1f}\n")
        print(table(folder, args.by, args.top))
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
