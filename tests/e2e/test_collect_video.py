"""A collected dataset with top and wrist video, end to end: LeRobot loads it, the harness validator
passes it, the coverage tool finds the cube where the collection put it, and lerobot-train trains
on its train split."""

from __future__ import annotations

import json
import math
import os
import subprocess
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.app.collect_command import CollectRequest, collect
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


def test_the_cards_cpu_command_trains_on_the_train_split_offline_as_printed(collected, tmp_path) -> None:
    """The README's ACT command, pasted into a shell on a machine without network (an unreachable
    proxy, the hub offline), only shrunk to toy size by options appended after it: it finds
    lerobot-train, downloads nothing, trains on the train split on the CPU, prints no traceback."""
    from harness.data.dataset_card import imagenet_weights_cached

    splits = json.loads((collected / "meta" / "splits.json").read_text())
    assert len(splits["train"]) == 2 and len(splits["val"]) == 1
    card = (collected / "README.md").read_text()
    command = card.split("ACT on a CPU", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0].strip()
    out = tmp_path / "train"
    toy = (" --policy.dim_model=32 --policy.n_heads=2 --policy.dim_feedforward=64 --policy.n_encoder_layers=1"
           " --policy.n_vae_encoder_layers=1 --policy.latent_dim=8 --policy.chunk_size=10 --policy.n_action_steps=10"
           f" --steps=2 --batch_size=2 --save_freq=2 --num_workers=0 --output_dir={out}")
    offline = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "OMP_NUM_THREADS")},
               "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",  # lerobot-train found by the card's path alone
               "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    done = subprocess.run(["bash", "-c", command + toy], capture_output=True, text=True, timeout=900,
                          env=offline, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert f"dataset.num_episodes={len(splits['train'])}" in output
    config = json.loads((out / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text())
    assert config["device"] == "cpu"
    assert config["pretrained_backbone_weights"] == ("ResNet18_Weights.IMAGENET1K_V1" if imagenet_weights_cached()
                                                     else None)
