"""How long `harness offline-eval` takes per checkpoint on a CPU: held-out episodes of a collected
dataset, one LeRobot checkpoint, the first N frames of each episode. Prints one table row.

    python benchmarks/offline_eval_bench.py --dataset DIR --checkpoint DIR/pretrained_model [--frames 60]

Why: every checkpoint of a training run is scored offline by `harness sweep` (validation loss and
action error beside closed-loop success), so this time multiplies by the number of checkpoints.
Figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--frames", type=int, default=60, help="first N frames of each held-out episode")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    from harness.data.offline_eval import evaluate_checkpoint
    from harness.data.split import episode_indices, every_nth_split

    root = Path(args.dataset)
    episodes = every_nth_split(episode_indices(root))["val"]
    t0 = time.perf_counter()
    result = evaluate_checkpoint(Path(args.checkpoint), root, episodes, args.frames, args.device)
    wall = time.perf_counter() - t0
    print("| episodes | frames | torch threads | wall s | ms per frame | val loss | action MAE |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {len(episodes)} | {result.frames} | {torch.get_num_threads()} (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}) | {wall:.1f} | {1000 * wall / result.frames:.1f} | "
          f"{result.val_loss:.4f} | {result.action_mae:.3f} |")


if __name__ == "__main__":
    main()
