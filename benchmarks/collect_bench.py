"""Demonstration collection throughput: accepted episodes per hour of wall time, the acceptance rate,
and the disk size per episode, with and without video.

    .venv/bin/python benchmarks/collect_bench.py [--episodes 3] [--image-size 640x480 160x120] [--policy expert]

Each configuration collects into a fresh folder under a temporary directory with `harness collect`'s
own code path (LeRobot's writer, checkpoints, meta files and card included).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.app.collect_command import CollectRequest, collect
from harness.data.acceptance import AcceptMode

REPO = Path(__file__).resolve().parents[1]


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def cpu_seconds() -> float:
    """User + system time of this process and its finished children (LeRobot encodes in child
    processes): on a shared machine this moves less than wall time does."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--image-size", nargs="+", default=["640x480"], help="one or more video sizes WxH")
    parser.add_argument("--policy", default="expert")
    parser.add_argument("--protocol", default=str(REPO / "protocols" / "randomized.yaml"))
    parser.add_argument("--accept", default="clean-release", choices=["strict", "clean-release"])
    args = parser.parse_args()
    configs = [("no video (state, action)", (), (640, 480))]
    for text in args.image_size:
        width, height = (int(v) for v in text.split("x"))
        configs.append((f"top + wrist video {text}", ("top", "wrist"), (width, height)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="collect_bench_") as tmp:
        for number, (label, cameras, size) in enumerate(configs):
            root = Path(tmp) / f"config{number}"
            request = CollectRequest(protocol=Path(args.protocol), policy=args.policy, episodes=args.episodes,
                                     output=root, accept=AcceptMode(args.accept), cameras=cameras,
                                     image_size=size, max_attempts=4 * args.episodes)
            t0, cpu0 = time.perf_counter(), cpu_seconds()
            result = collect(request, progress=lambda line: None)
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
            rows.append((label, result.accepted, result.attempts, wall, cpu,
                         folder_bytes(root) / max(result.accepted, 1)))
    print(f"\n{args.episodes} accepted episodes per configuration, policy {args.policy}, accept {args.accept}, "
          f"{os.cpu_count()} CPUs\n")
    print(f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())}\n")
    print("| recording | accepted / attempts | acceptance rate | wall s per accepted episode "
          "| accepted episodes per hour (wall) | CPU s per accepted episode | disk per episode |")
    print("|---|---|---|---|---|---|---|")
    for label, accepted, attempts, wall, cpu, size in rows:
        per, cpu_per = wall / max(accepted, 1), cpu / max(accepted, 1)
        print(f"| {label} | {accepted} / {attempts} | {100 * accepted / max(attempts, 1):.0f}% | {per:.1f} "
              f"| {3600 / per:.0f} | {cpu_per:.1f} | {size / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
