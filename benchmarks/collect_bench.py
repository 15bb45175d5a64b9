"""Demonstration collection throughput: accepted episodes per hour of wall time, the acceptance rate,
and the disk size per episode, with and without video.

    .venv/bin/python benchmarks/collect_bench.py [--episodes 3] [--image-size 640x480] [--policy expert]

Each configuration collects into a fresh folder under a temporary directory with `harness collect`'s
own code path (LeRobot's writer, checkpoints, meta files and card included).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.app.collect import CollectRequest, collect
from harness.data.acceptance import AcceptMode

REPO = Path(__file__).resolve().parents[1]


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--image-size", default="640x480")
    parser.add_argument("--policy", default="expert")
    parser.add_argument("--protocol", default=str(REPO / "protocols" / "randomized.yaml"))
    parser.add_argument("--accept", default="clean-release", choices=["strict", "clean-release"])
    args = parser.parse_args()
    width, height = (int(v) for v in args.image_size.split("x"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="collect_bench_") as tmp:
        for label, cameras in (("no video (state, action)", ()), (f"top + wrist video {args.image_size}",
                                                                  ("top", "wrist"))):
            root = Path(tmp) / label.split()[0]
            request = CollectRequest(protocol=Path(args.protocol), policy=args.policy, episodes=args.episodes,
                                     output=root, accept=AcceptMode(args.accept), cameras=cameras,
                                     image_size=(width, height), max_attempts=4 * args.episodes)
            t0 = time.perf_counter()
            result = collect(request, progress=lambda line: None)
            wall = time.perf_counter() - t0
            decided = result.attempts
            rows.append((label, result.accepted, decided, wall, folder_bytes(root) / max(result.accepted, 1)))
    print(f"\n{args.episodes} accepted episodes per configuration, policy {args.policy}, accept {args.accept}, "
          f"{os.cpu_count()} CPUs\n")
    print("| recording | accepted / attempts | acceptance rate | wall s per accepted episode "
          "| accepted episodes per hour | disk per episode |")
    print("|---|---|---|---|---|---|")
    for label, accepted, attempts, wall, size in rows:
        per = wall / max(accepted, 1)
        print(f"| {label} | {accepted} / {attempts} | {100 * accepted / max(attempts, 1):.0f}% | {per:.1f} "
              f"| {3600 / per:.0f} | {size / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
