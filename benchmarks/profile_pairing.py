"""A policy's outcomes drawn with the full meshes against the sized profile, trial by trial (issue 42).

The same protocol, seeds and checkpoint run twice through `harness run --no-video`, once per render profile,
the two runs interleaved trial by trial (so a loaded machine slows both alike); prints each trial's pair of
labels, the agreement, the discordant pairs either way (what McNemar's test reads) and the CPU per trial.
Run: .venv/bin/python benchmarks/profile_pairing.py --policy CKPT --protocol protocols/fixed.yaml --trials 30
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

PROFILES = ("full-v1", "sized-v1")


def run_one(protocol: Path, policy: str, work: Path, profile: str, trials_done: int) -> tuple[float, float]:
    from harness.app.run_command import run_from_args
    from harness.cli import build_parser

    sheet = work / f"{profile}.yaml"
    argv = ["run", str(protocol), "--policy", policy, "--headless", "--no-video", "--device", "cpu",
            "--scoresheet", str(sheet), "--runs-dir", str(work / "runs"), "--max-trials", "1",
            "--render-profile", profile]
    if trials_done:
        argv.append("--resume")
    c0, w0 = time.process_time(), time.perf_counter()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            code = run_from_args(build_parser().parse_args(argv))
        finally:
            sys.stdout = stdout
    if code != 0:
        sys.exit(f"harness run ({profile}) exited {code}")
    return time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--protocol", required=True, type=Path)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    from harness.models.scoresheet import load_scoresheet

    cpu = {p: 0.0 for p in PROFILES}
    with tempfile.TemporaryDirectory(prefix="profile-pairing-") as tmp:
        work = Path(tmp)
        for i in range(args.trials):
            for profile in PROFILES:
                c, _ = run_one(args.protocol, args.policy, work, profile, i)
                cpu[profile] += c
        sheets = {p: load_scoresheet(work / f"{p}.yaml") for p in PROFILES}
        labels = {p: [(a.trial_index, str(a.failure_mode or a.outcome.value)) for a in sheets[p].attempts]
                  for p in PROFILES}
    pairs = list(zip(labels["full-v1"], labels["sized-v1"], strict=True))
    agree = sum(a[1] == b[1] for a, b in pairs)
    full_only = sum(a[1] == "success" and b[1] != "success" for a, b in pairs)
    sized_only = sum(b[1] == "success" and a[1] != "success" for a, b in pairs)
    print(f"{args.policy} on {args.protocol}, {len(pairs)} paired trials, load {os.getloadavg()[0]:.1f}")
    print("| trial | full-v1 | sized-v1 |\n|---|---|---|")
    for a, b in pairs:
        print(f"| {a[0]} | {a[1]} | {b[1]} |")
    wins = {p: sum(label == "success" for _, label in labels[p]) for p in PROFILES}
    print(f"\nsuccess full-v1 {wins['full-v1']}/{len(pairs)}, sized-v1 {wins['sized-v1']}/{len(pairs)}; "
          f"same label {agree}/{len(pairs)}; discordant: success only with full {full_only}, only with sized "
          f"{sized_only}; CPU s per trial (this process): full {cpu['full-v1'] / len(pairs):.1f}, "
          f"sized {cpu['sized-v1'] / len(pairs):.1f}")


if __name__ == "__main__":
    main()
