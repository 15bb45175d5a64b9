"""`harness offline-eval`: teacher-forced action accuracy on held-out episodes, and which checkpoint
validation loss would pick against which one action accuracy picks.

Each frame is predicted from the dataset's own observation (the first action of a freshly predicted
chunk, no action queue), and compared with the recorded action in the dataset's units (degrees,
gripper 0..100), so "within 5" means within 5 degrees.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

TOLERANCE = 5.0


@dataclass(frozen=True)
class EvalResult:
    checkpoint: str
    frames: int
    action_mae: float
    joint_accuracy: float
    frame_accuracy: float
    latency_ms_p50: float
    latency_ms_p95: float
    val_loss: float | None


def _load(path: Path, device: str) -> tuple[Any, Any, Any]:
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    config = PreTrainedConfig.from_pretrained(path)
    config.device = device
    policy = get_policy_class(config.type).from_pretrained(str(path), config=config)
    policy.to(device).eval()
    pre, post = make_pre_post_processors(config, pretrained_path=str(path),
                                         preprocessor_overrides={"device_processor": {"device": device}})
    return policy, pre, post


def _dataset(root: Path, episodes: list[int], policy: Any | None) -> Any:
    import logging

    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.CRITICAL)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    delta = None
    if policy is not None and getattr(policy.config, "action_delta_indices", None) is not None:
        fps = LeRobotDatasetMetadata(f"local/{root.name}", root=root).fps
        delta = {"action": [i / fps for i in policy.config.action_delta_indices]}
    return LeRobotDataset(f"local/{root.name}", root=root, episodes=episodes, delta_timestamps=delta,
                          video_backend="pyav")


def evaluate_checkpoint(path: Path, root: Path, episodes: list[int], max_frames: int = 200,
                        device: str = "cpu") -> EvalResult:
    policy, pre, post = _load(path, device)
    plain = _dataset(root, episodes, None)
    chunked = _dataset(root, episodes, policy)
    errors, latencies, losses = [], [], []
    seen: dict[int, int] = {}
    for i in range(len(plain)):
        item = plain[i]
        episode = int(item["episode_index"])
        if seen.get(episode, 0) >= max_frames:
            continue
        seen[episode] = seen.get(episode, 0) + 1
        batch = {k: (v.unsqueeze(0) if isinstance(v, torch.Tensor) else [v]) for k, v in item.items()
                 if k.startswith("observation.") or k == "task"}
        with torch.inference_mode():
            t0 = time.perf_counter()
            chunk = policy.predict_action_chunk(pre(batch))
            action = post(chunk[:, 0])
            latencies.append(1000 * (time.perf_counter() - t0))
            target = chunked[i]
            training_batch = pre({**{k: (v.unsqueeze(0) if isinstance(v, torch.Tensor) else [v])
                                     for k, v in target.items()}})
            loss, _ = policy.forward(training_batch)
            losses.append(float(loss))
        errors.append(action.squeeze(0).cpu().numpy() - item["action"].numpy())
    err = np.abs(np.array(errors))
    return EvalResult(
        checkpoint=str(path), frames=len(err), action_mae=float(err.mean()),
        joint_accuracy=float((err <= TOLERANCE).mean()), frame_accuracy=float((err <= TOLERANCE).all(axis=1).mean()),
        latency_ms_p50=statistics.median(latencies), latency_ms_p95=float(np.percentile(latencies, 95)),
        val_loss=float(np.mean(losses)) if losses else None,
    )


def format_table(results: list[EvalResult]) -> str:
    lines = ["| checkpoint | frames | val loss | action MAE | joint acc (+-5) | frame acc (+-5) | "
             "latency p50 / p95 ms |", "|---|---|---|---|---|---|---|"]
    for r in results:
        loss = f"{r.val_loss:.4f}" if r.val_loss is not None else "-"
        lines.append(f"| {Path(r.checkpoint).name} | {r.frames} | {loss} | {r.action_mae:.3f} | "
                     f"{100 * r.joint_accuracy:.1f}% | {100 * r.frame_accuracy:.1f}% | "
                     f"{r.latency_ms_p50:.1f} / {r.latency_ms_p95:.1f} |")
    if len(results) > 1:
        by_loss = min(results, key=lambda r: r.val_loss if r.val_loss is not None else np.inf)
        by_mae = min(results, key=lambda r: r.action_mae)
        verdict = ("they agree" if by_loss is by_mae else
                   "they disagree: selecting on validation loss would ship the less accurate checkpoint")
        lines.append("")
        lines.append(f"Validation loss picks {Path(by_loss.checkpoint).name}; action accuracy picks "
                     f"{Path(by_mae.checkpoint).name}: {verdict}.")
    return "\n".join(lines)
