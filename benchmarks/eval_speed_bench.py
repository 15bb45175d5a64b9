"""The same `harness run` under two versions of the code at once, wall and CPU side by side (issue 42).

Each version runs as its own process (`PYTHONPATH=CODE python -m harness.cli run ...`), both started
together so they share whatever load the machine has; CPU is each run's process tree (`os.wait4`: the run and
every process it waited for: evidence lanes, Ray, encoders), the figure to compare on a shared machine.

  .venv/bin/python benchmarks/eval_speed_bench.py --code before=/path/to/old/checkout --code after=. \\
      -- PROTOCOL --policy CKPT --headless --no-video --max-trials 50

Prints a Markdown table (wall, CPU, trials, CPU per trial, the ratio to the first version) and each run's
summary lines; every run writes into its own temporary folder, removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkouts import checkout_env


def start(label: str, code: Path, run_args: list[str], work: Path) -> tuple[subprocess.Popen, float, Path]:
    env = checkout_env(label, code)
    log = work / f"{label}.log"
    argv = [sys.executable, "-P", "-m", "harness.cli", "run", *run_args,   # -P: PYTHONPATH first, not the cwd
            "--scoresheet", str(work / f"{label}.yaml"), "--runs-dir", str(work / f"runs-{label}")]
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=Path.cwd())
    return process, time.perf_counter(), log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="LABEL=CHECKOUT",
                        help="a version of the code: its label and the checkout whose harness/ it runs")
    parser.add_argument("run_args", nargs=argparse.REMAINDER, help="after --: the `harness run` arguments")
    args = parser.parse_args()
    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    versions = [(label, Path(path).resolve()) for label, path in (item.split("=", 1) for item in args.code)]
    work = Path(tempfile.mkdtemp(prefix="eval-speed-"))
    load = os.getloadavg()[0]
    try:
        running = {label: start(label, code, run_args, work) for label, code in versions}
        results = {}
        while len(results) < len(running):   # each run's own wall time: whichever ends first is read first
            for label, (process, t0, log) in running.items():
                if label in results:
                    continue
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid == 0:
                    continue
                wall = time.perf_counter() - t0
                text = log.read_text()
                trials = int(m.group(1)) if (m := re.search(r"Trials\s+(\d+) scored", text)) else 0
                results[label] = (wall, usage.ru_utime + usage.ru_stime, trials, os.waitstatus_to_exitcode(status),
                                  text)
            time.sleep(0.5)
        results = {label: results[label] for label in running}
        print(f"`harness run {' '.join(run_args)}`, load {load:.1f} at the start, "
              f"{os.getloadavg()[0]:.1f} at the end; versions run at once\n")
        print("| version | exit | trials | wall s | CPU s | CPU s / trial | CPU vs first | wall vs first |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        first = next(iter(results.values()))
        for label, (wall, cpu, trials, code, _) in results.items():
            per = cpu / trials if trials else float("nan")
            print(f"| {label} | {code} | {trials} | {wall:.0f} | {cpu:.0f} | {per:.1f} | "
                  f"{first[1] / cpu:.2f}x | {first[0] / wall:.2f}x |")
        for label, (*_, text) in results.items():
            summary = [line for line in text.splitlines() if line.startswith(("Success", "Failures", "Voids"))]
            print(f"\n{label}: " + "; ".join(summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
