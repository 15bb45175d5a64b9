"""Serial against `--workers N` and `--workers auto`, back to back, and the `--workers auto` model checked
against them.

    .venv/bin/python benchmarks/parallel_bench.py [--protocol protocols/randomized.yaml] [--repeats 3]
        [--workers 2] [--video failures]
    .venv/bin/python benchmarks/parallel_bench.py --curve docs/images/scaling.png   # the model's curve only

Each round runs the protocol (expert on the simulated arm) once serially, once with `--workers N` for each
N, and once with `--workers auto`, each into a fresh scoresheet; rounds repeat, and the table shows medians.
Wall seconds are the whole command's (Python start-up, Ray start-up where used, every trial, the report):
what a person waits for. CPU seconds are every process of the run's tree, Ray's daemons included (sampled
every 0.1 s: `/usr/bin/time` misses Ray's processes, which are not its children). The machine's load
(1-minute average before each run) and the cores other processes used during it are printed with every
figure: on a shared machine a ratio means something only between runs under the same load.

Then the model (`harness/app/parallel/scaling.py`) with constants measured here, in this session: w from the
serial runs' trial lines, C from the serial runs' CPU over a 1-trial run's, Ray's and a worker's start-up
from the parallel runs' own log lines and their processes' CPU, and its prediction beside the measured
wall times.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import process_tree
import psutil

HARNESS = [sys.executable, "-m", "harness.cli"]
RAY_DAEMONS = ("gcs_server", "raylet", "DashboardAgent", "RuntimeEnvAgent", "dashboard.py", "monitor.py",
               "log_monitor", "ray_reaper", "default_worker")


@dataclass
class Run:
    label: str
    wall_s: float
    cpu_s: float
    load: float
    others_cores: float
    trial_marks: list[float]
    ray_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    stderr: str = ""
    by_process: dict[str, float] = field(default_factory=dict)

    def steady_s(self) -> float:
        """Seconds per trial between the first and the last trial line."""
        marks = self.trial_marks
        return (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else float("nan")

    def logged(self, pattern: str) -> list[float]:
        return [float(v) for v in re.findall(pattern, self.stderr)]


def run_once(label: str, command: list[str]) -> Run:
    """One command: its wall time, the CPU of its whole process tree, and when each trial line appeared."""
    load = os.getloadavg()[0]
    busy = process_tree.busy_ticks()
    started = time.perf_counter()
    seen: dict[tuple[int, float], tuple[float, str]] = {}
    marks: list[float] = []
    with tempfile.TemporaryFile("w+") as err, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1) as proc:
        root = psutil.Process(proc.pid)

        def read_trial_lines() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if re.match(r"\[\s*\d+/\d+\] trial", line):
                    marks.append(time.perf_counter() - started)

        reader = threading.Thread(target=read_trial_lines, daemon=True)
        reader.start()
        while proc.poll() is None:
            process_tree.sample(root, seen)
            time.sleep(0.1)   # the sampling period
        reader.join(timeout=10)
        err.seek(0)
        stderr = err.read()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed ({proc.returncode}): {' '.join(command)}\n{stderr[-2000:]}")
    cpu = sum(v for v, _ in seen.values())
    others = process_tree.others_cores(busy, cpu, wall)
    ray = sum(v for v, name in seen.values() if any(d in name for d in RAY_DAEMONS))
    worker = sum(v for v, name in seen.values() if "TrialWorkerImpl" in name)
    return Run(label, wall, cpu, load, max(0.0, others), marks, ray, worker, stderr)


def harness_run(protocol: Path, folder: Path, name: str, video: str, *extra: str) -> list[str]:
    return [*HARNESS, "run", str(protocol), "--headless", "--policy", "expert", "--video", video, "--scoresheet",
            str(folder / f"{name}.yaml"), "--runs-dir", str(folder / "runs"), *extra]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", type=Path, default=Path("protocols/randomized.yaml"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--video", default="failures", choices=["failures", "all", "none"])
    parser.add_argument("--curve", type=Path, help="print the model's predicted curve, plot it here, run nothing")
    args = parser.parse_args()
    if args.curve:
        curve(args.curve)
        return
    configs = [("serial", []), *[(f"--workers {n}", ["--workers", str(n)]) for n in args.workers],
               ("--workers auto", ["--workers", "auto"])]
    runs: dict[str, list[Run]] = {label: [] for label, _ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one = folder / "protocol-1-trial.yaml"
        subprocess.run([*HARNESS, "protocol", "new", "--fixed", "--n", "1", "-o", str(one)], check=True,
                       stdout=subprocess.DEVNULL)
        single = run_once("serial, 1 trial", harness_run(one, folder, "one", args.video))
        for round_number in range(args.repeats):
            for label, extra in configs:
                name = f"{label.replace(' ', '').replace('-', '')}-{round_number}"
                run = run_once(label, harness_run(args.protocol, folder, name, args.video, *extra))
                runs[label].append(run)
                print(f"round {round_number + 1} {label:>15}: {run.wall_s:5.1f} s wall, {run.cpu_s:5.1f} s CPU, "
                      f"load {run.load:4.1f}, others {run.others_cores:.2f} cores", flush=True)
    trials = len(runs["serial"][0].trial_marks)
    cores = len(os.sched_getaffinity(0))
    print(f"\n{trials} trials of {args.protocol}, expert, --video {args.video}, {cores} cores, "
          f"{args.repeats} rounds, medians\n")
    serial_wall = statistics.median(r.wall_s for r in runs["serial"])
    print("| run | wall s | CPU s (user+sys, whole tree) | serial / this | load before | others' cores | "
          "walls |")
    print("|---|---|---|---|---|---|---|")
    for label, _ in configs:
        rs = runs[label]
        wall = statistics.median(r.wall_s for r in rs)
        print(f"| {label} | {wall:.1f} | {statistics.median(r.cpu_s for r in rs):.1f} | {serial_wall / wall:.2f}x | "
              f"{statistics.median(r.load for r in rs):.1f} | {statistics.median(r.others_cores for r in rs):.2f} | "
              f"{', '.join(f'{r.wall_s:.1f}' for r in rs)} |")
    _model_check(runs, single, trials, cores, args)


def _model_check(runs: dict[str, list[Run]], single: Run, trials: int, cores: int,
                 args: argparse.Namespace) -> None:
    from harness.app.parallel.scaling import TrialCosts, predicted_s

    serial = runs["serial"]
    w = statistics.median(r.steady_s() for r in serial)
    cpu = (statistics.median(r.cpu_s for r in serial) - single.cpu_s) / max(trials - 1, 1)
    startup = statistics.median(r.wall_s for r in serial) - trials * w   # Python, imports, the first trial
    print(f"\nmodel constants measured here: w {w:.3f} s a trial (serial, steady), C {cpu:.3f} CPU s a trial, "
          f"serial start-up {startup:.1f} s")
    for n in args.workers:
        rs = runs[f"--workers {n}"]
        ray_up = [v for r in rs for v in r.logged(r"Ray up after ([\d.]+) s")]
        ready = [v for r in rs for v in r.logged(r"Ray workers? ready after ([\d.]+)")]
        ray_cpu = statistics.median(r.ray_cpu_s for r in rs)
        by_ray = [sum(int(v) for v in re.findall(r"(\d+) by ray-", r.stderr)) for r in rs]
        setup_cpu = statistics.median(max(0.0, r.worker_cpu_s - k * cpu) for r, k in zip(rs, by_ray, strict=True))
        per_worker = setup_cpu / max(n - 1, 1)
        record = [v for r in rs for v in r.logged(r"recording ([\d.]+) s each")]
        costs = TrialCosts(wall_s=w, cpu_s=cpu,
                           ray_start_s=statistics.median(ray_up) if ray_up else 3.0, ray_start_cpu_s=ray_cpu,
                           worker_setup_s=(statistics.median(ready) - statistics.median(ray_up)) if ready and ray_up
                           else 3.0, worker_setup_cpu_s=per_worker,
                           record_s=statistics.median(record) if record else 0.03)
        effective = max(0.25, cores - statistics.median(r.others_cores for r in rs))
        measured = statistics.median(r.wall_s for r in rs)
        print(f"--workers {n}: Ray up after {costs.ray_start_s:.1f} s ({ray_cpu:.1f} CPU s), a worker ready "
              f"{costs.worker_setup_s:.1f} s later ({per_worker:.1f} CPU s), recording {costs.record_s:.3f} s a trial; "
              f"trials on Ray workers {by_ray}")
        for label, k in (("all cores", cores), ("cores left by others", effective)):
            predicted = startup + predicted_s(n, trials, k, costs)
            print(f"  predicted ({label}, K={k:.2f}): {predicted:.1f} s against {measured:.1f} s measured "
                  f"(serial predicted {startup + predicted_s(1, trials, k, costs):.1f}, measured "
                  f"{statistics.median(r.wall_s for r in serial):.1f})")


def curve(path: Path) -> None:
    """`--workers auto` and its predicted wall time for 2-64 local cores and a Ray cluster (the constants of
    `harness/app/parallel/scaling.py`), against serial; plotted to `path`."""
    from dataclasses import replace

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.app.parallel.scaling import MEASURED, auto_workers, predicted_s
    from harness.run.evidence import VideoMode

    # a cluster that is up already: joining it is a connection, and its daemons' CPU is on other machines
    cluster = {mode: replace(costs, ray_start_s=1.0, ray_start_cpu_s=0.3) for mode, costs in MEASURED.items()}
    rows = [(f"{k} cores, local Ray", k, MEASURED) for k in (2, 4, 8, 16, 32, 64)]
    rows += [(f"Ray cluster, {k} cores", k, cluster) for k in (64, 256)]
    cases = [(VideoMode.FAILURES, 50), (VideoMode.FAILURES, 1000), (VideoMode.ALL, 50)]
    print("| machine | " + " | ".join(f"--video {m.value}, {n} trials: auto workers, predicted s (serial s)"
                                      for m, n in cases) + " |")
    print("|---|" + "---|" * len(cases))
    for label, cores, table in rows:
        cells = []
        for mode, trials in cases:
            costs = table[mode]
            chosen = auto_workers(trials, cores, mode, costs)
            serial = " (serial)" if chosen == 1 else ""
            cells.append(f"{chosen}{serial}, {predicted_s(chosen, trials, cores, costs):.1f} "
                         f"({predicted_s(1, trials, cores, costs):.1f})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, trials in zip(axes, (50, 1000), strict=True):
        for cores in (2, 4, 8, 16, 64):
            counts = list(range(1, min(trials, 2 * cores, 64) + 1))
            axis.plot(counts, [predicted_s(w, trials, cores, MEASURED[VideoMode.FAILURES]) for w in counts],
                      label=f"{cores} cores")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("workers (1 = serial)")
        axis.set_ylabel("predicted wall s (trials only)")
        axis.set_title(f"{trials} expert trials, --video failures")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
