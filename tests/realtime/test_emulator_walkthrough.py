"""docs/emulator.md's walkthroughs (setup, calibrate, teleoperate and record, rollout and run) replayed as
written, from a folder that is not the repository: the commands, what is typed at each prompt and in the
emulator's console, and what the programs print. Then what each leaves behind is checked."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.doc_walkthrough import Desk, walkthroughs

DOC = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"
WALKTHROUGHS = walkthroughs(DOC.read_text())
POLICY = Path("outputs/train/act_desk/checkpoints/last/pretrained_model")


def test_the_doc_has_every_walkthrough() -> None:
    assert list(WALKTHROUGHS) == ["setup", "calibrate", "teleoperate-record", "rollout-run"]


@pytest.fixture()
def folder():
    """A fresh folder outside the repository; short, so the default camera socket path fits a Unix socket."""
    with tempfile.TemporaryDirectory(prefix="walk-") as path:
        yield Path(path)


def _desk(folder: Path) -> Desk:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TMPDIR": str(folder), "HF_LEROBOT_HOME": str(folder / "lerobot-home"), "HF_HUB_OFFLINE": "1"}
    return Desk(folder, env)


def _play(folder: Path, name: str) -> Desk:
    desk = _desk(folder)
    try:
        desk.play(WALKTHROUGHS[name])
        codes = desk.finish()
    finally:
        desk.close()
    assert set(codes.values()) == {0}, f"{codes}\n{desk.transcript()}"
    return desk


@pytest.mark.slow
def test_setup_walkthrough(folder: Path) -> None:
    _play(folder, "setup")


@pytest.mark.slow
def test_calibrate_walkthrough(folder: Path) -> None:
    _play(folder, "calibrate")
    saved = json.loads((folder / "lerobot-home" / "calibration" / "robots" / "so_follower" / "desk_arm.json")
                       .read_text())
    assert all(c["range_max"] - c["range_min"] > 800 for n, c in saved.items() if n != "wrist_roll"), saved
    assert saved["gripper"]["homing_offset"] != 0            # held half open when the middle was taken


@pytest.mark.slow
def test_teleoperate_and_record_walkthrough(folder: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    _play(folder, "teleoperate-record")
    dataset = LeRobotDataset("local/desk_demos", root=folder / "demos")
    assert dataset.num_episodes == 1 and dataset.num_frames >= 60
    last = dataset[dataset.num_frames - 1]
    assert last["observation.images.top"].shape == (3, 240, 320)
    elbow = list(dataset.meta.features["action"]["names"]).index("elbow_flex.pos")
    assert float(last["action"][elbow]) == pytest.approx(30.0, abs=3.0)   # the leader's pose, by hand


@pytest.mark.slow
def test_rollout_and_run_walkthrough(folder: Path) -> None:
    from harness.models.scoresheet import load_scoresheet
    from tests.tiny_policy import save_tiny_act

    save_tiny_act(folder / POLICY, height=240, width=320)     # the policy the doc says was trained
    _play(folder, "rollout-run")
    attempts = load_scoresheet(next((folder / "scoresheets").glob("desk-*.yaml"))).attempts
    assert [(a.trial_index, a.label, a.scored_by) for a in attempts] == [(1, "no_grasp", "operator")]
