"""`harness offline-eval`: teacher-forced action accuracy on held-out episodes, and which checkpoint
validation loss would pick against which one action accuracy picks.

Each frame is predicted from the dataset's own observation (the first action of a freshly predicted
chunk, no action queue), and compared with the recorded action in the dataset's units (degrees,
gripper 0..100), so "within 5" means within 5 degrees.

A policy is only scored on inputs shaped as it was trained: LeRobot's ACT and diffusion processors
do not resize camera frames, so a policy trained at 128x96 fed 640x480 frames computes something,
but not what it learned. A mismatch is refused, or (asked for) resized with a warning.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch

TOLERANCE = 5.0


class MismatchKind(Enum):
    MISSING = "missing"            # the policy reads a feature the dataset lacks
    IMAGE_SIZE = "image size"      # same camera, other resolution: resizable
    SHAPE = "shape"                # state or action of another length


@dataclass(frozen=True)
class InputMismatch:
    key: str
    kind: MismatchKind
    policy_shape: tuple[int, ...]
    dataset_shape: tuple[int, ...] | None

    def describe(self) -> str:
        if self.kind is MismatchKind.MISSING:
            return f"{self.key}: the policy reads it, the dataset has no such feature"
        if self.kind is MismatchKind.IMAGE_SIZE:
            (_, ph, pw), (dh, dw) = self.policy_shape, self.dataset_shape[:2]
            return f"{self.key}: the policy was trained on {pw}x{ph} frames, the dataset has {dw}x{dh}"
        return f"{self.key}: the policy expects shape {list(self.policy_shape)}, the dataset has " \
               f"{list(self.dataset_shape or ())}"


def input_mismatches(checkpoint: Path, root: Path) -> list[InputMismatch]:
    """What differs between a checkpoint's declared inputs (config.json) and the dataset's features
    (meta/info.json), read without loading weights or frames."""
    import json

    config = json.loads((checkpoint / "config.json").read_text())
    features = json.loads((root / "meta" / "info.json").read_text())["features"]
    found = []
    wanted = {**config.get("input_features", {}), **config.get("output_features", {})}
    for key, spec in wanted.items():
        policy_shape = tuple(int(v) for v in spec["shape"])
        if key not in features:
            found.append(InputMismatch(key, MismatchKind.MISSING, policy_shape, None))
            continue
        dataset_shape = tuple(int(v) for v in features[key]["shape"])
        if spec.get("type") == "VISUAL":
            if policy_shape[1:] != dataset_shape[:2]:
                found.append(InputMismatch(key, MismatchKind.IMAGE_SIZE, policy_shape, dataset_shape))
        elif policy_shape != dataset_shape:
            found.append(InputMismatch(key, MismatchKind.SHAPE, policy_shape, dataset_shape))
    return found


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


def _batch(item: dict[str, Any], keys: Any, sizes: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """One dataset item as a batch of one; camera frames resized to `sizes[key]` (height, width)."""
    batch = {}
    for k, v in item.items():
        if not keys(k):
            continue
        if isinstance(v, torch.Tensor):
            v = v.unsqueeze(0)
            if k in sizes:
                v = torch.nn.functional.interpolate(v, size=sizes[k], mode="bilinear", antialias=True,
                                                    align_corners=False)
        else:
            v = [v]
        batch[k] = v
    return batch


def evaluate_checkpoint(path: Path, root: Path, episodes: list[int], max_frames: int = 200,
                        device: str = "cpu", resize: bool = False) -> EvalResult:
    """Refuses (ValueError naming each mismatch) a checkpoint whose inputs differ from the dataset's,
    unless `resize` and every difference is an image size, which is then resized to the policy's."""
    mismatches = input_mismatches(path, root)
    if any(m.kind is not MismatchKind.IMAGE_SIZE for m in mismatches) or (mismatches and not resize):
        raise ValueError("; ".join(m.describe() for m in mismatches))
    sizes = {m.key: m.policy_shape[1:] for m in mismatches}
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
        batch = _batch(item, lambda k: k.startswith("observation.") or k == "task", sizes)
        with torch.inference_mode():
            t0 = time.perf_counter()
            chunk = policy.predict_action_chunk(pre(batch))
            action = post(chunk[:, 0])
            latencies.append(1000 * (time.perf_counter() - t0))
            training_batch = pre(_batch(chunked[i], lambda k: True, sizes))
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
    """The table, rows named by training run and step (every LeRobot checkpoint folder is called
    `pretrained_model`), and which checkpoint each criterion picks."""
    from harness.models.checkpoint import checkpoint_labels

    names = dict(zip([r.checkpoint for r in results], checkpoint_labels([r.checkpoint for r in results]),
                     strict=True))
    lines = ["| checkpoint | frames | val loss | action MAE | joint acc (+-5) | frame acc (+-5) | "
             "latency p50 / p95 ms |", "|---|---|---|---|---|---|---|"]
    for r in results:
        loss = f"{r.val_loss:.4f}" if r.val_loss is not None else "-"
        lines.append(f"| {names[r.checkpoint]} | {r.frames} | {loss} | {r.action_mae:.3f} | "
                     f"{100 * r.joint_accuracy:.1f}% | {100 * r.frame_accuracy:.1f}% | "
                     f"{r.latency_ms_p50:.1f} / {r.latency_ms_p95:.1f} |")
    if len(results) > 1:
        by_loss = min(results, key=lambda r: r.val_loss if r.val_loss is not None else np.inf)
        by_mae = min(results, key=lambda r: r.action_mae)
        verdict = ("they agree" if by_loss is by_mae else
                   "they disagree: selecting on validation loss would ship the less accurate checkpoint")
        lines.append("")
        lines.append(f"Validation loss picks {names[by_loss.checkpoint]}; action accuracy picks "
                     f"{names[by_mae.checkpoint]}: {verdict}.")
    return "\n".join(lines)
