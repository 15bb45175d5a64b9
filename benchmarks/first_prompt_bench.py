"""Time from `harness run --robot so101` starting on the emulated arm to its first cube prompt (issue 40).

The issue measured 29-37 s from the TUI's check screen to the first cube prompt on the emulated real arm.
This reads the same span in plain mode, where the run's first output line is the check ("N of N trials to
run", after the arm is connected, the cameras opened and the policy loaded: what the check screen shows)
and the first cube prompt is the scripted operator's first placement ("operator (placed by eye)"): a
`harness rehearse --max-trials 1` with the scripted operator, each output line stamped as it arrives (a
benchmark's reading of a log, not a decision the product makes). Also the whole run start (`$ harness run`
to that prompt), and whether the trial recorded a stale-frame void.

Run: .venv/bin/python benchmarks/first_prompt_bench.py [--repeats 3] [--code PATH]   (PATH: another checkout,
for the before column)
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
sys.path.insert(0, str(REPO))
from benchmarks.rehearse_bench import PROTOCOL  # noqa: E402

MARKS = (("run", "$ harness run"), ("check", "trials to run"), ("prompt", "operator (placed by eye)"))


def one(folder: Path, code: Path) -> dict[str, float]:
    for name in ("scoresheets", "runs", "rehearsals"):
        subprocess.run(["rm", "-rf", str(folder / name)], check=True)
    env = dict(os.environ, PYTHONPATH=str(code))
    t0 = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "rehearse", "bench.yaml", "--policy", "act",
                                "--operator", "scripted", "--max-trials", "1"], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    at: dict[str, float] = {}
    lines = []
    for line in process.stdout:
        lines.append(line)
        for mark, text in MARKS:
            if text in line and mark not in at:
                at[mark] = time.perf_counter() - t0
    process.wait()
    if len(at) != len(MARKS):
        sys.exit("rehearsal did not reach its first cube prompt:\n" + "".join(lines[-30:]))
    return {"check_to_prompt": at["prompt"] - at["check"], "run_to_prompt": at["prompt"] - at["run"],
            "stale": float(any("too old" in line for line in lines))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    from tests.tiny_policy import save_tiny_act

    with tempfile.TemporaryDirectory(prefix="first-prompt-bench-") as tmp:
        folder = Path(tmp)
        (folder / "bench.yaml").write_text(PROTOCOL.format(episode_s=1.5))
        save_tiny_act(folder / "act", height=480, width=640)
        runs = [one(folder, args.code) for _ in range(args.repeats)]
        load = os.getloadavg()[0]
        print(f"code {args.code}, load {load:.1f} on {os.cpu_count()} cores, {args.repeats} runs (median)")
        print("| check -> first cube prompt (s) | `$ harness run` -> first cube prompt (s) | runs with a stale frame |")
        print("|---:|---:|---:|")
        print(f"| {statistics.median(r['check_to_prompt'] for r in runs):.1f} | "
              f"{statistics.median(r['run_to_prompt'] for r in runs):.1f} | "
              f"{sum(r['stale'] for r in runs):.0f} of {len(runs)} |")


if __name__ == "__main__":
    main()
