"""Checkpoints named by training run and step; offline-eval refuses (or, asked, resizes) a policy whose
inputs differ from the dataset's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.models.checkpoint import checkpoint_labels, checkpoint_name

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def _lerobot_run(root: Path, steps: list[int]) -> Path:
    """The folder layout `lerobot-train` writes: checkpoints/<step>/pretrained_model, and `last`."""
    for step in steps:
        folder = root / "checkpoints" / f"{step:06d}"
        (folder / "pretrained_model").mkdir(parents=True)
        (folder / "training_state").mkdir()
        (folder / "training_state" / "training_step.json").write_text(json.dumps({"step": step}))
    os.symlink(f"{steps[-1]:06d}", root / "checkpoints" / "last")
    return root


def test_checkpoints_are_named_by_run_and_step(tmp_path) -> None:
    run = _lerobot_run(tmp_path / "outputs" / "act_demos", [150, 300])
    assert checkpoint_name(run / "checkpoints/000150/pretrained_model").label == "act_demos-step150"
    assert checkpoint_name(run / "checkpoints/000300/pretrained_model/").label == "act_demos-step300"
    assert checkpoint_name(run / "checkpoints/000300").label == "act_demos-step300"
    assert checkpoint_name(run / "checkpoints/last/pretrained_model").label == "act_demos-step300"


def test_folders_outside_a_training_run_keep_their_own_name(tmp_path) -> None:
    plain = tmp_path / "models" / "my_act"
    plain.mkdir(parents=True)
    assert checkpoint_name(plain).label == "my_act"
    copied = tmp_path / "act_copy" / "pretrained_model"
    copied.mkdir(parents=True)
    assert checkpoint_name(copied).label == "act_copy"
    (tmp_path / "act_copy" / "training_state").mkdir()
    (tmp_path / "act_copy" / "training_state" / "training_step.json").write_text('{"step": 40}')
    assert checkpoint_name(copied).label == "act_copy-step40"


def test_two_runs_with_the_same_name_are_told_apart(tmp_path) -> None:
    a = _lerobot_run(tmp_path / "a" / "act", [100])
    b = _lerobot_run(tmp_path / "b" / "act", [100])
    labels = checkpoint_labels([a / "checkpoints/000100/pretrained_model", b / "checkpoints/000100/pretrained_model"])
    assert labels[0] != labels[1] and all(label.startswith("act-step100 (") for label in labels)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from tests.generators.synthetic import make_dataset

    return make_dataset(tmp_path_factory.mktemp("offline") / "small", episodes=2, frames_per_episode=8)


@pytest.mark.slow
def test_a_policy_trained_at_another_size_is_refused_in_one_line_then_resized_on_request(dataset, tmp_path,
                                                                                          capsys) -> None:
    from harness.cli import main
    from harness.data.offline_eval import MismatchKind, evaluate_checkpoint, input_mismatches
    from tests.tiny_policy import save_tiny_act

    small = save_tiny_act(tmp_path / "act_64x48", height=48, width=64)
    [mismatch] = input_mismatches(small, dataset.root)
    assert mismatch.kind is MismatchKind.IMAGE_SIZE and mismatch.key == "observation.images.top"
    with pytest.raises(ValueError, match="trained on 64x48 frames, the dataset has 128x96"):
        evaluate_checkpoint(small, dataset.root, [0], max_frames=2)

    assert main(["offline-eval", "--dataset", str(dataset.root), "--checkpoints", str(small), "--episodes", "0",
                 "--frames", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "64x48" in err and "128x96" in err and "--resize-images" in err

    assert main(["offline-eval", "--dataset", str(dataset.root), "--checkpoints", str(small), "--episodes", "0",
                 "--frames", "2", "--resize-images"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: act_64x48: observation.images.top" in out and "| act_64x48 | 2 |" in out


@pytest.mark.slow
def test_a_policy_reading_a_camera_the_dataset_lacks_is_refused_even_with_resizing(dataset, tmp_path,
                                                                                   capsys) -> None:
    from harness.cli import main
    from tests.tiny_policy import save_tiny_act

    front = save_tiny_act(tmp_path / "act_front", camera="front")
    assert main(["offline-eval", "--dataset", str(dataset.root), "--checkpoints", str(front), "--episodes", "0",
                 "--frames", "2", "--resize-images"]) == 2
    assert "observation.images.front: the policy reads it, the dataset has no such feature" in capsys.readouterr().err


@pytest.mark.slow
def test_the_verdict_names_checkpoints_by_step_not_pretrained_model(dataset, tmp_path, capsys) -> None:
    import numpy as np
    import pandas as pd

    from harness.cli import main
    from tests.tiny_policy import save_tiny_act

    actions = np.stack(pd.read_parquet(dataset.root / "data/chunk-000/file-000.parquet")["action"].to_numpy())
    run = tmp_path / "act_demos"
    save_tiny_act(run / "checkpoints/000150/pretrained_model")
    save_tiny_act(run / "checkpoints/000300/pretrained_model", action_mean=actions.mean(axis=0).tolist())
    assert main(["offline-eval", "--dataset", str(dataset.root), "--episodes", "0", "--frames", "4",
                 "--checkpoints", str(run / "checkpoints/000150/pretrained_model"),
                 str(run / "checkpoints/000300/pretrained_model")]) == 0
    out = capsys.readouterr().out
    assert "| act_demos-step150 |" in out and "| act_demos-step300 |" in out
    assert "action accuracy picks act_demos-step300" in out and "pretrained_model" not in out


@pytest.mark.slow
def test_batched_scores_equal_frame_by_frame_with_each_frame_decoded_once(dataset, tmp_path, monkeypatch) -> None:
    """Batching the model is a speed-up, not a change of figures: the same error and loss as one
    frame at a time; every chosen frame is read from the dataset once; progress reaches the total."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    import harness.data.offline_eval as offline
    from tests.tiny_policy import save_tiny_act

    policy = save_tiny_act(tmp_path / "act")
    reads = []
    original = LeRobotDataset.__getitem__
    monkeypatch.setattr(LeRobotDataset, "__getitem__", lambda self, i: reads.append(i) or original(self, i))
    seen = []
    batched = offline.evaluate_checkpoint(policy, dataset.root, [0, 1], max_frames=6,
                                          progress=lambda done, total: seen.append((done, total)))
    assert batched.frames == 12 and len(reads) == 12 == len(set(reads))
    assert seen[-1] == (12, 12)
    monkeypatch.setattr(offline, "BATCH", 1)
    single = offline.evaluate_checkpoint(policy, dataset.root, [0, 1], max_frames=6)
    assert batched.action_mae == pytest.approx(single.action_mae, rel=1e-5)
    assert batched.val_loss == pytest.approx(single.val_loss, rel=1e-5)
