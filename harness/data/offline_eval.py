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
from collections.abc import Callable
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

    @property
    def policy_size(self) -> tuple[int, int]:
        """A camera's frame size the policy was trained on, (height, width) of its (C, H, W) shape."""
        return self.policy_shape[1], self.policy_shape[2]

    def describe(self) -> str:
        if self.kind is MismatchKind.MISSING:
            return f"{self.key}: the policy reads it, the dataset has no such feature"
        if self.kind is MismatchKind.IMAGE_SIZE and self.dataset_shape is not None:
            (ph, pw), (dh, dw) = self.policy_size, self.dataset_shape[:2]
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
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    from harness.policies.lerobot_policy import load_policy_config

    config = load_policy_config(path)
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


BATCH = 32           # frames per model call: one call per batch, not per frame
LATENCY_SAMPLES = 10  # single-frame calls timed for the latency columns (a closed loop calls with one)


def _select(dataset: Any, max_frames: int) -> list[int]:
    """Dataset indices of the first `max_frames` frames of each episode, read from the parquet
    column (no video decoded)."""
    seen: dict[int, int] = {}
    chosen = []
    for i, episode in enumerate(dataset.hf_dataset["episode_index"]):
        episode = int(episode)
        if seen.get(episode, 0) < max_frames:
            seen[episode] = seen.get(episode, 0) + 1
            chosen.append(i)
    return chosen


def _stack(items: list[dict[str, Any]], sizes: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Dataset items as one batch; camera frames resized to `sizes[key]` (height, width)."""
    batch: dict[str, Any] = {}
    for k, v in items[0].items():
        if isinstance(v, torch.Tensor):
            stacked = torch.stack([item[k] for item in items])
            if k in sizes:
                stacked = torch.nn.functional.interpolate(stacked, size=sizes[k], mode="bilinear", antialias=True,
                                                          align_corners=False)
            batch[k] = stacked
        else:
            batch[k] = [item[k] for item in items]
    return batch


def evaluate_checkpoint(path: Path, root: Path, episodes: list[int], max_frames: int = 200,
                        device: str = "cpu", resize: bool = False,
                        progress: Callable[[int, int], None] | None = None) -> EvalResult:
    """Refuses (ValueError naming each mismatch) a checkpoint whose inputs differ from the dataset's,
    unless `resize` and every difference is an image size, which is then resized to the policy's.

    Each frame is decoded once (the item with the policy's action chunk also holds the observation
    and, first in the chunk, the recorded action) and the model runs on batches of frames; the
    predictions are those of one frame at a time (eval mode). The validation loss is the policy's
    own loss pooled over every held-out action step that is not padding (each batch weighted by its
    valid steps, as ACT's loss divides by them), so the figure does not depend on the batch size.
    `progress(done, total)` after each batch."""
    mismatches = input_mismatches(path, root)
    if any(m.kind is not MismatchKind.IMAGE_SIZE for m in mismatches) or (mismatches and not resize):
        raise ValueError("; ".join(m.describe() for m in mismatches))
    sizes = {m.key: m.policy_size for m in mismatches}
    policy, pre, post = _load(path, device)
    dataset = _dataset(root, episodes, policy)
    chosen = _select(dataset, max_frames)
    errors: list[np.ndarray] = []
    latencies: list[float] = []
    losses: list[tuple[float, float]] = []
    for start in range(0, len(chosen), BATCH):
        items = [dataset[i] for i in chosen[start:start + BATCH]]
        full = _stack(items, sizes)
        recorded = full["action"] if full["action"].ndim == 2 else full["action"][:, 0]
        observation = {k: v for k, v in full.items() if k.startswith("observation.") or k == "task"}
        with torch.inference_mode():
            while len(latencies) < LATENCY_SAMPLES and len(latencies) < len(items):
                one = {k: v[len(latencies):len(latencies) + 1] for k, v in observation.items()}
                t0 = time.perf_counter()
                post(policy.predict_action_chunk(pre(one))[:, 0])
                latencies.append(1000 * (time.perf_counter() - t0))
            actions = post(policy.predict_action_chunk(pre(observation))[:, 0])
            training_batch = pre(full)
            loss, _ = policy.forward(training_batch)
            pad = training_batch.get("action_is_pad")
            weight = float((~pad).sum()) if pad is not None else float(len(items))
            losses.append((float(loss) * weight, weight))
        errors.extend(actions.cpu().numpy() - recorded.numpy())
        if progress is not None:
            progress(min(start + BATCH, len(chosen)), len(chosen))
    err = np.abs(np.array(errors))
    return EvalResult(
        checkpoint=str(path), frames=len(err), action_mae=float(err.mean()),
        joint_accuracy=float((err <= TOLERANCE).mean()), frame_accuracy=float((err <= TOLERANCE).all(axis=1).mean()),
        latency_ms_p50=statistics.median(latencies), latency_ms_p95=float(np.percentile(latencies, 95)),
        val_loss=sum(total for total, _ in losses) / max(sum(w for _, w in losses), 1.0) if losses else None,
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
