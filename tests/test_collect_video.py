"""A collected dataset with top and wrist video, end to end: LeRobot loads it, the harness validator
passes it, the coverage tool finds the cube where the collection put it, and lerobot-train trains
on its train split."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.app.collect import CollectRequest, collect
from harness.data.acceptance import AcceptMode
from tests.helpers import REPO

pytestmark = pytest.mark.slow
SIZE = (160, 120)
TOP_FOVY_DEG, TOP_HEIGHT_CM = 45.0, 75.0


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("collect") / "scattered"
    result = collect(CollectRequest(protocol=REPO / "protocols" / "randomized.yaml", policy="expert", episodes=3,
                                    output=root, accept=AcceptMode.CLEAN_RELEASE, image_size=SIZE,
                                    checkpoint_every=2), progress=lambda line: None)
    assert result.complete and result.accepted == 3
    return root


def test_lerobot_loads_the_episodes_with_both_cameras_and_the_task(collected) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(f"local/{collected.name}", root=collected, video_backend="pyav")
    assert dataset.num_episodes == 3 and dataset.fps == 30
    last = dataset[len(dataset) - 1]
    assert tuple(last["observation.images.top"].shape) == (3, SIZE[1], SIZE[0])
    assert tuple(last["observation.images.wrist"].shape) == (3, SIZE[1], SIZE[0])
    assert tuple(last["observation.state"].shape) == (6,) and tuple(last["action"].shape) == (6,)
    assert last["task"] == "Pick up the cube and place it in the bowl."
    assert int(last["episode_index"]) == 2


def test_the_validator_passes_it(collected) -> None:
    from harness.data.validate import validate_dataset

    report = validate_dataset(collected, processes=1)
    assert report.exit_code == 0, [p.message for p in report.errors]
    assert report.episodes == 3


def test_episodes_after_a_checkpoint_keep_the_codec(collected) -> None:
    import av

    info = json.loads((collected / "meta" / "info.json").read_text())
    files = sorted((collected / "videos").rglob("*.mp4"))
    assert len(files) == 4  # two cameras, one file before and one after the checkpoint at episode 2
    for path in files:
        with av.open(str(path)) as container:
            codec = container.streams.video[0].codec_context.codec.canonical_name
        key = path.relative_to(collected / "videos").parts[0]
        assert codec == info["features"][key]["info"]["video.codec"], path


def test_dataset_coverage_finds_the_starts_the_collection_used(collected, tmp_path) -> None:
    from harness.cli import main

    px_per_cm = SIZE[1] / (2 * TOP_HEIGHT_CM * math.tan(math.radians(TOP_FOVY_DEG / 2)))
    plot = tmp_path / "coverage.png"
    assert main(["dataset", "coverage", str(collected), "--px-per-cm", f"{px_per_cm:.4f}", "-o", str(plot)]) == 0
    rows = plot.with_suffix(".csv").read_text().splitlines()[1:]
    found = [tuple(float(v) for v in row.split(",")[:2]) for row in rows]
    truth = [(a["dx_cm"], a["dy_cm"]) for a in json.loads((collected / "meta" / "selection.json").read_text())
             ["accepted"]]
    assert len(found) == len(truth) == 3
    for i, j in combinations(range(3), 2):  # offsets between episodes: whatever origin the tool uses cancels
        measured = np.subtract(found[i], found[j])
        expected = np.subtract(truth[i], truth[j])
        assert np.linalg.norm(measured - expected) < 0.8, (i, j, measured, expected)


def test_lerobot_train_runs_on_the_train_split(collected, tmp_path) -> None:
    splits = json.loads((collected / "meta" / "splits.json").read_text())
    assert len(splits["train"]) == 2 and len(splits["val"]) == 1
    out = tmp_path / "train"
    command = [
        str(Path(sys.executable).with_name("lerobot-train")), "--policy.type=act",
        f"--dataset.repo_id=local/{collected.name}", f"--dataset.root={collected}",
        f"--dataset.episodes={json.dumps(splits['train'])}", "--dataset.video_backend=pyav",
        "--policy.push_to_hub=false", "--wandb.enable=false", "--policy.device=cpu",
        "--policy.pretrained_backbone_weights=null", "--policy.dim_model=32", "--policy.n_heads=2",
        "--policy.dim_feedforward=64", "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1",
        "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8", "--policy.chunk_size=10",
        "--policy.n_action_steps=10", "--steps=2", "--batch_size=2", "--save_freq=2", "--num_workers=0",
        f"--output_dir={out}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"dataset.num_episodes={len(splits['train'])}" in done.stdout + done.stderr
    assert (out / "checkpoints" / "last" / "pretrained_model" / "config.json").is_file()
