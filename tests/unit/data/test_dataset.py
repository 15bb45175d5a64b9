"""`harness dataset validate` and `split` on small LeRobot v3.0 datasets made here, clean and damaged."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from harness.cli import main
from harness.data.split import every_nth_split
from harness.data.validate import validate_dataset
from tests.generators.defects import DEFECTS
from tests.generators.synthetic import make_dataset

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "clean_h264", episodes=6, frames_per_episode=24)


def test_a_clean_dataset_passes_and_lerobot_loads_it(clean) -> None:
    report = validate_dataset(clean.root, processes=1)
    assert report.exit_code == 0, report.problems
    assert report.episodes == 6 and report.frames == 144 and report.camera_frames_decoded == 288
    from lerobot.datasets.lerobot_dataset import LeRobotDataset  # at use: its import alone takes seconds

    dataset = LeRobotDataset(f"local/{clean.root.name}", root=clean.root, video_backend="pyav")
    assert dataset.num_episodes == 6 and dataset[100]["observation.images.top"].shape == (3, 96, 128)


@pytest.mark.slow
def test_an_av1_dataset_written_with_lerobots_defaults_passes(tmp_path) -> None:
    av1 = make_dataset(tmp_path / "clean_av1", episodes=3, frames_per_episode=12, vcodec="libsvtav1")
    assert validate_dataset(av1.root, processes=2, pool_min_frames=0).exit_code == 0   # in two processes, as a
    assert validate_dataset(av1.root, processes=2).exit_code == 0                      # large one is; here, small


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_class_is_caught_with_its_code(clean, tmp_path, defect) -> None:
    damage, code = DEFECTS[defect]
    root = tmp_path / defect
    shutil.copytree(clean.root, root)
    damage(root)
    report = validate_dataset(root, processes=1)
    assert report.exit_code == 1
    assert code in {p.code for p in report.problems}, [p.code for p in report.problems]


@pytest.mark.slow
def test_json_output_and_exit_codes(clean, tmp_path, capsys) -> None:
    assert main(["dataset", "validate", str(clean.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0
    root = tmp_path / "nan"
    shutil.copytree(clean.root, root)
    DEFECTS["nan_in_actions"][0](root)
    assert main(["dataset", "validate", str(root), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems[0]["code"] == "NONFINITE" and problems[0]["episode"] == 1
    assert main(["dataset", "validate", str(tmp_path / "nothing"), "--json"]) == 2


def test_split_holds_out_every_tenth_index_not_the_last_tenth(clean, tmp_path) -> None:
    split = every_nth_split(list(range(50)))
    assert split["val"] == [0, 10, 20, 30, 40] and len(split["train"]) == 45
    out = tmp_path / "splits.json"
    assert main(["dataset", "split", str(clean.root), "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == {"train": [1, 2, 3, 4, 5], "val": [0]}


def test_coverage_finds_the_known_cube_positions_within_2px(clean) -> None:
    from harness.data.coverage import first_frames, locate_starts

    coverage = locate_starts(first_frames(clean.root))
    assert len(coverage.found) == clean.episodes
    for start, (cx, cy) in zip(coverage.starts, clean.cube_px, strict=True):
        assert abs(start.centre_px[0] - (cx - 0.5)) <= 2 and abs(start.centre_px[1] - (cy - 0.5)) <= 2
    assert min(s.score for s in coverage.starts) > 0.6


@pytest.mark.slow
def test_coverage_says_plainly_when_the_data_cover_one_spot(tmp_path, capsys) -> None:
    one_spot = make_dataset(tmp_path / "one_spot", episodes=4, frames_per_episode=6, cube_spread_px=1.0)
    out = tmp_path / "coverage.png"
    assert main(["dataset", "coverage", str(one_spot.root), "--px-per-cm", "4", "-o", str(out),
                 "--protocol", "protocols/randomized.yaml"]) == 0
    text = capsys.readouterr().out
    assert "cover a single position" in text and "trials are more than 2 cm from every training start" in text
    assert out.stat().st_size > 5000 and out.with_suffix(".csv").read_text().startswith("dx_cm,dy_cm")


@pytest.mark.slow
def test_offline_eval_scores_checkpoints_and_says_which_one_each_criterion_picks(clean, tmp_path, capsys) -> None:
    import numpy as np

    from harness.data.offline_eval import evaluate_checkpoint
    from tests.tiny_policy import save_tiny_act

    actions = np.stack(pd.read_parquet(clean.root / "data/chunk-000/file-000.parquet")["action"].to_numpy())
    near = save_tiny_act(tmp_path / "ckpt_near", action_mean=actions.mean(axis=0).tolist())
    far = save_tiny_act(tmp_path / "ckpt_far")
    result = evaluate_checkpoint(near, clean.root, [0], max_frames=12)
    assert result.frames == 12 and result.latency_ms_p50 > 0 and result.val_loss is not None
    assert result.action_mae < evaluate_checkpoint(far, clean.root, [0], max_frames=12).action_mae
    assert main(["offline-eval", "--dataset", str(clean.root), "--checkpoints", str(near), str(far),
                 "--frames", "6"]) == 0
    out = capsys.readouterr().out
    assert "held-out episodes: [0]" in out and "action accuracy picks ckpt_near" in out
