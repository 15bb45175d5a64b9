"""What a `harness` command costs the e2e tests as a fresh process and forked from the preloaded server
(tests/cli_process.py, issue 61 item 2): CPU seconds per command, each way, and the server's own start.

CPU seconds, not wall: this machine is shared and CI's two cores are CPU-bound (docs/benchmarks.md). A fresh
process's CPU is what this process's RUSAGE_CHILDREN gains while it runs; a forked one's is what the server's
`wait4` reports for it (its own and its waited-for children's, as for a subprocess).

    .venv/bin/python benchmarks/cli_server_bench.py --repeat 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cli_process import CliProcess, CliServer, HarnessCli  # noqa: E402
from tests.tiny_policy import save_tiny_act  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def commands(folder: Path) -> dict[str, list[str]]:
    small = folder / "small.yaml"
    small.write_text((REPO / "tests" / "data" / "small.yaml").read_text())
    act = save_tiny_act(folder / "tiny_act")
    run = ["run", str(small), "--headless", "--no-video", "--max-trials", "1", "--runs-dir", str(folder / "runs")]
    return {
        "protocol new (no torch)": ["protocol", "new", "--fixed", "--n", "20", "-o", str(folder / "p.yaml"),
                                    "--force"],
        "run, expert, 1 trial (torch, MuJoCo)": [*run, "--policy", "expert", "--scoresheet", "{sheet}"],
        "run, tiny ACT, 1 trial (LeRobot's policies)": [*run, "--policy", str(act), "--device", "cpu",
                                                        "--scoresheet", "{sheet}"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as scratch:
        folder = Path(scratch)
        os.environ["HARNESS_STATE_DIR"] = str(folder / "state")
        server = CliServer()
        cli = HarnessCli(server)
        server.environment()
        print(f"server start: {server.started['cpu_s']:.2f} CPU s ({server.started['modules']} modules, "
              f"{server.started['threads']} threads), load {os.getloadavg()[0]:.1f}\n")
        rows = ["| command | fresh process, CPU s | forked, CPU s | saved a command |", "|---|---:|---:|---:|"]
        count = 0
        for name, argv in commands(folder).items():
            fresh, forked = [], []
            for _ in range(args.repeat):
                for sample, is_fresh in ((fresh, True), (forked, False)):
                    count += 1
                    line = [a.replace("{sheet}", str(folder / f"s{count}.yaml")) for a in argv]
                    before = _children_cpu()
                    process = cli.popen(line, cwd=folder, fresh=is_fresh, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
                    _, err = process.communicate(timeout=600)
                    if process.returncode != 0:
                        raise SystemExit(f"{name}: exit {process.returncode}: {err.decode()[-2000:]}")
                    cpu = process.cpu_s if isinstance(process, CliProcess) else _children_cpu() - before
                    sample.append(cpu)
            a, b = statistics.median(fresh), statistics.median(forked)
            rows.append(f"| {name} | {a:.2f} | {b:.2f} | {a - b:.2f} |")
        server.close()
        print("\n".join(rows))
        print(f"\nmedians of {args.repeat}; load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
