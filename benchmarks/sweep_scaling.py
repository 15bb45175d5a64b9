"""A learned-policy sweep's wall time and CPU (issue 42): measured under each version of the code, and predicted by
`harness.app.parallel.scaling.predicted_sweep_s` from this machine's measured costs.

measure: one `harness sweep` of the checkpoints given x the protocol's first N trials, `no_video` as docs/results.md's
main job, under each version (`--code LABEL=CHECKOUT`: `PYTHONPATH=CHECKOUT python -m harness.cli sweep`), one
after the other. CPU is the whole process tree's: this process becomes the sub-reaper of what it starts (Linux's
PR_SET_CHILD_SUBREAPER), so Ray's workers, raylet and agents, orphaned when the sweep ends, are reaped here and
counted (`RUSAGE_CHILDREN`), not lost with their parent. Prints a Markdown table (wall, CPU, CPU a trial, the
ratios to the first version, the load average at each start and end), each cell's line and what the sweep
loaded (a version that says it).

  .venv/bin/python benchmarks/sweep_scaling.py measure --code before=/path/to/old --code after=. \\
      --protocol PROTOCOL --trials 30 --workers 2 CKPT1 CKPT2 CKPT3 CKPT4

predict: one checkpoint's load (`LeRobotPolicy`) and one scene build (`SimWorld`) measured here, wall and CPU;
from `benchmarks/floor_bench.py --json` files, a trial's CPU per control step (before and after) times the steps a
trial runs. Prints the 4-checkpoint x 30-trial sweep before/after and the 10-checkpoint x 50-trial sweep on 2, 8, 32
and 64 cores and a 64-core Ray cluster.

  .venv/bin/python benchmarks/sweep_scaling.py predict --policy CKPT --before B.json --after A.json [--steps 600]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import yaml
from checkouts import checkout_env

from harness.app.parallel.scaling import SweepCosts, TrialCosts, best_sweep_workers, predicted_sweep_s


def measured_loads(policy: str) -> tuple[float, float]:
    """(checkpoint load, scene build), CPU seconds (the figures on a free core)."""
    from harness.policies.lerobot_policy import LeRobotPolicy
    from harness.sim.world import SimWorld

    LeRobotPolicy(policy, task="t", device="cpu").close()   # imports and first-load costs outside the timing
    c0 = time.process_time()
    LeRobotPolicy(policy, task="t", device="cpu").close()
    load = time.process_time() - c0
    c0 = time.process_time()
    world = SimWorld()
    world.render("top", 96, 72)
    world.render("wrist", 96, 72)
    build = time.process_time() - c0
    world.close()
    return load, build


def trial_costs(bench: dict, steps: int) -> TrialCosts:
    """A trial on a free core: its CPU per step is its wall per step there (the loop is serial, one core)."""
    cpu_s = bench["trial_cpu_ms"] * steps / 1000
    return TrialCosts(wall_s=cpu_s, cpu_s=cpu_s)


def predict(args: argparse.Namespace) -> None:
    load, build = measured_loads(args.policy)
    before = trial_costs(json.loads(args.before.read_text()), args.steps)
    after = trial_costs(json.loads(args.after.read_text()), args.steps)
    print(f"checkpoint load {load:.1f} s CPU, scene build {build:.1f} s CPU; trial ({args.steps} steps) before "
          f"{before.cpu_s:.1f} s, after {after.cpu_s:.1f} s CPU; load {os.getloadavg()[0]:.1f}")
    old = SweepCosts(before, policy_load_s=load, scene_build_s=build)
    new = SweepCosts(after, policy_load_s=load, scene_build_s=build)
    b = predicted_sweep_s(4, 30, 1, 2, old, kept=False)
    a = predicted_sweep_s(4, 30, 1, 2, new, kept=True)
    print("\n| 4 checkpoints x 30 trials, serial, 2 cores | predicted wall |\n|---|---:|")
    print(f"| before (each cell loads and builds afresh, full-mesh frames) | {b / 60:.1f} min |")
    print(f"| after (kept simulator, sized-v1 frames) | {a / 60:.1f} min |")
    print(f"| speed-up | {b / a:.2f}x |")
    print("\n| 10 checkpoints x 50 trials (after) | workers per cell | predicted wall |\n|---|---:|---:|")
    for cores in (2, 8, 32, 64):
        w, t = best_sweep_workers(10, 50, cores, new)
        print(f"| {cores} cores, one machine | {w} | {t / 60:.1f} min |")
    w, t = best_sweep_workers(10, 50, 64, new, cluster=True)
    print(f"| Ray cluster, 64 cores in all (runtime up already) | {w} | {t / 60:.1f} min |")
    print(f"| (1 worker, 2 cores: {predicted_sweep_s(10, 50, 1, 2, new) / 60:.1f} min; 2 workers: "
          f"{predicted_sweep_s(10, 50, 2, 2, new) / 60:.1f} min) | | |")


PR_SET_CHILD_SUBREAPER = 36
STRAGGLERS_S = 60.0   # how long the sweep's orphans (Ray's processes) get to end once it has


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}: the CPU of orphaned "
                 "processes could not be counted")


def reap_orphans(deadline_s: float) -> int:
    """Wait for every orphan of the sweep handed to this process (each counted in `RUSAGE_CHILDREN` once
    reaped); returns how many were still alive at the deadline (then ended)."""
    ends_by = time.monotonic() + deadline_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:   # nothing left
            return 0
        if pid == 0:
            if time.monotonic() > ends_by:
                return end_orphans()
            time.sleep(0.2)


def end_orphans() -> int:
    """Processes still parented here after the deadline (this process started them, through the sweep)."""
    import psutil

    left = psutil.Process().children()
    for process in left:
        process.kill()
    for process in left:
        os.waitpid(process.pid, 0)
    return len(left)


def run_version(label: str, code: Path, spec: Path, work: Path) -> dict:
    env = checkout_env(label, code)
    log = work / f"{label}.log"
    argv = [sys.executable, "-P", "-m", "harness.cli", "sweep", str(spec), "--scoresheets-dir",
            str(work / label / "sheets"), "--runs-dir", str(work / label / "runs")]
    load_start = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=spec.parent)
    exit_code = None
    while exit_code is None:   # the sweep's own wall time: read when it ends, before its orphans are waited for
        pid, status = os.waitpid(process.pid, os.WNOHANG)
        if pid:
            exit_code = os.waitstatus_to_exitcode(status)
        else:
            time.sleep(0.5)
    wall = time.perf_counter() - t0
    load_end = os.getloadavg()[0]
    process.returncode = exit_code   # waited here: Popen must not wait again
    ended = reap_orphans(STRAGGLERS_S)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    text = log.read_text(errors="replace").replace("\r", "\n")
    cells = re.findall(r"^\[\d+/\d+\] (\S+): (\d+)/(\d+) successes", text, re.MULTILINE)
    return {"label": label, "exit": exit_code, "wall_s": wall, "cpu_s": cpu, "load": (load_start, load_end),
            "trials": sum(int(n) for *_, n in cells), "successes": sum(int(k) for _, k, _ in cells),
            "cells": cells, "ended": ended,
            "shares": re.findall(r"^\d+ attempts in .*$", text, re.MULTILINE),
            "loads": re.findall(r"^\d+ cells? run: .*$", text, re.MULTILINE), "log": text}


def cut_protocol(protocol: Path, trials: int, folder: Path) -> Path:
    """The protocol's first `trials` trials (the same cubes), as a protocol of its own."""
    data = yaml.safe_load(protocol.read_text())
    if len(data["trials"]) < trials:
        sys.exit(f"{protocol} has {len(data['trials'])} trials, fewer than {trials}")
    data["trials"] = data["trials"][:trials]
    data["name"] = f"{data['name']}{trials}"
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def measure(args: argparse.Namespace) -> None:
    versions = [(label, Path(path).resolve()) for label, path in (item.split("=", 1) for item in args.code)]
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="sweep-scaling-"))
    try:
        protocol = cut_protocol(args.protocol, args.trials, work)
        spec = work / "sweep.yaml"
        spec.write_text(yaml.safe_dump({"name": "scaling", "checkpoints": [str(Path(c).resolve()) for c in
                                                                           args.checkpoints],
                                        "protocols": [protocol.name], "conditions": [{"no_video": True}],
                                        "workers": args.workers}))
        results = []
        for label, code in versions:
            print(f"{label}: {code} ...", file=sys.stderr, flush=True)
            results.append(run_version(label, code, spec, work))
            r = results[-1]
            print(f"{label}: exit {r['exit']}, {r['trials']} trials, wall {r['wall_s']:.0f} s, CPU {r['cpu_s']:.0f} s, "
                  f"load {r['load'][0]:.1f} / {r['load'][1]:.1f}", file=sys.stderr, flush=True)
        print(f"`harness sweep`: {len(args.checkpoints)} checkpoints x {args.trials} trials of {args.protocol.name}, "
              f"no_video, workers: {args.workers}; versions one after the other\n")
        first = next((r for r in results if r["label"] == args.baseline), results[0])
        print(f"| version | exit | cells | trials | successes | wall min | CPU min | CPU s / trial | "
              f"CPU vs {first['label']} | wall vs {first['label']} | load at start / end |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in results:
            per = r["cpu_s"] / r["trials"] if r["trials"] else float("nan")
            print(f"| {r['label']} | {r['exit']} | {len(r['cells'])} | {r['trials']} | {r['successes']} | "
                  f"{r['wall_s'] / 60:.1f} | {r['cpu_s'] / 60:.1f} | {per:.2f} | {first['cpu_s'] / r['cpu_s']:.2f}x | "
                  f"{first['wall_s'] / r['wall_s']:.2f}x | {r['load'][0]:.1f} / {r['load'][1]:.1f} |")
        for r in results:
            print(f"\n{r['label']}:")
            for key, k, n in r["cells"]:
                print(f"  {key}: {k}/{n} successes")
            for line in r["shares"] + r["loads"]:
                print(f"  {line}")
            if r["ended"]:
                print(f"  {r['ended']} processes of the sweep still running {STRAGGLERS_S:.0f} s after it: ended")
            if r["exit"] != 0:
                print("  " + "\n  ".join(r["log"].splitlines()[-15:]))
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="time `harness sweep` under each version of the code, one after the other")
    m.add_argument("--code", action="append", required=True, metavar="LABEL=CHECKOUT",
                   help="a version of the code: its label and the checkout whose harness/ it runs")
    m.add_argument("--protocol", required=True, type=Path)
    m.add_argument("--trials", type=int, default=30, help="the protocol's first N trials")
    m.add_argument("--workers", type=int, default=1)
    m.add_argument("--baseline", help="the label the ratios are to (default: the first version)")
    m.add_argument("--keep", action="store_true", help="keep the work folder (scoresheets, logs)")
    m.add_argument("checkpoints", nargs="+", help="LeRobot pretrained_model folders")
    m.set_defaults(func=measure)
    p = sub.add_parser("predict", help="the scaling model fed with this machine's measured costs")
    p.add_argument("--policy", required=True)
    p.add_argument("--before", required=True, type=Path)
    p.add_argument("--after", required=True, type=Path)
    p.add_argument("--steps", type=int, default=600, help="control steps a trial runs (600: a 20 s failure)")
    p.set_defaults(func=predict)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
