"""`harness collect` as a library: filtered attempts become a LeRobot dataset whose meta files agree
with it, the control rate changes actions per second but not physics, and an interrupted
collection resumes to the same dataset it would have written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.data.acceptance import AcceptMode, RejectReason
from harness.data.collect_journal import Journal, state_dir
from harness.data.collect_meta import provenance_record, write_collection_files
from harness.data.collector import Collector, CollectSettings, check_fps
from harness.errors import HarnessInputError
from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
from harness.models.protocol import Protocol, Trial
from harness.policies.scripted import ExpertPolicy, ReplayPolicy
from harness.run.dataset_sink import DatasetSink
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.scene import PHYSICS_DT
from harness.sim.sim_so101 import SimSO101
from harness.sim.world import SimWorld


def _protocol(offsets: list[tuple[float, float]], fps: int = 30) -> Protocol:
    return Protocol(name="collect-test", task="Pick up the cube and place it in the bowl.",
                    start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS, fps=fps,
                    trials=[Trial(index=i + 1, dx_cm=dx, dy_cm=dy) for i, (dx, dy) in enumerate(offsets)])


class Interrupting:
    """A dataset sink that is interrupted (as by Ctrl-C) ten frames into recording its n-th episode."""

    def __init__(self, sink: DatasetSink, at_episode: int) -> None:
        self.sink, self.at_episode = sink, at_episode
        self.cameras, self.size = sink.cameras, sink.size

    def add(self, *args) -> None:
        if self.sink.next_episode_index == self.at_episode and self.sink.frames_in_episode == 10:
            raise KeyboardInterrupt
        self.sink.add(*args)

    def end_episode(self) -> int | None:
        return self.sink.end_episode()

    def discard_episode(self) -> None:
        self.sink.discard_episode()

    def close(self) -> None:
        self.sink.close()


def _collector(root: Path, protocol: Protocol, policy, *, cameras: tuple[str, ...] = (),
               size: tuple[int, int] = (64, 48), accept: AcceptMode = AcceptMode.STRICT,
               checkpoint_every: int = 10, interrupt_at: int | None = None) -> Collector:
    world = SimWorld(control_fps=protocol.fps)
    robot = SimSO101(SimSO101Config(id="collect", render_cameras=[], fps=protocol.fps), world=world)
    robot.connect()
    settings = CollectSettings(protocol.name, "test-sha", policy.name, f"builtin:{policy.name}", accept,
                               protocol.fps, cameras, size, checkpoint_every=checkpoint_every)

    def open_sink():
        sink = DatasetSink(root, protocol.fps, list(cameras), size, protocol.task, robot_type="so_follower")
        return sink if interrupt_at is None else Interrupting(sink, interrupt_at)

    return Collector(protocol, settings, root, robot, policy, open_sink, progress=lambda line: None)


def _episodes_on_disk(root: Path) -> list[int]:
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    return sorted(int(i) for f in files for i in pd.read_parquet(f)["episode_index"])


@pytest.mark.slow
def test_only_accepted_attempts_become_episodes_and_the_meta_files_agree(tmp_path) -> None:
    # replay plays the trained position's motion: right at offset zero, a miss 5 cm away
    protocol = _protocol([(0.0, 0.0), (5.0, 4.0), (0.0, 0.0), (-4.0, -5.0)])
    root = tmp_path / "demos"
    collector = _collector(root, protocol, ReplayPolicy(), checkpoint_every=1)
    result = collector.run(episodes=2)
    assert result.complete and result.accepted == 2 and result.attempts == 3
    summary = collector.summary()
    provenance = provenance_record(protocol, tmp_path / "p.yaml", collector.settings, collector.world, None)
    files = write_collection_files(root, summary, collector.settings, provenance)
    selection, splits = files["selection"], files["splits"]

    present = _episodes_on_disk(root)
    assert present == [0, 1]
    assert json.loads((root / "meta" / "info.json").read_text())["total_episodes"] == 2
    assert [a["episode_index"] for a in selection["accepted"]] == present
    assert [a["attempt"] for a in selection["accepted"]] == [1, 3]
    assert [(a["attempt"], a["dx_cm"]) for a in selection["rejected"]] == [(2, 5.0)]
    assert selection["rejected"][0]["reason"] in {r.value for r in RejectReason}
    assert selection["totals"]["attempts"] == 3 and selection["totals"]["acceptance_rate"] == pytest.approx(2 / 3, 1e-3)
    assert sorted(splits["train"] + splits["val"]) == present and not set(splits["train"]) & set(splits["val"])
    assert set(splits["bins"]) == {str(i) for i in present}
    on_disk = json.loads((root / "meta" / "splits.json").read_text())
    assert on_disk["train"] == splits["train"]
    card = (root / "README.md").read_text()
    assert f"--dataset.episodes={json.dumps(splits['train'], separators=(',', ':'))}" in card
    assert provenance["judge_thresholds"]["grasp_hold_s"] > 0 and provenance["units"]["joints"]["gripper"]

    # raising --episodes extends the same collection, from the next attempt on
    more = _collector(root, protocol, ReplayPolicy(), checkpoint_every=1).run(episodes=3)
    assert more.accepted == 3 and _episodes_on_disk(root) == [0, 1, 2]
    assert [a["attempt"] for a in Journal.open(state_dir(root) / "journal.jsonl").attempts()] == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_30_and_60_hz_run_the_same_physics_steps_per_second(tmp_path) -> None:
    rates = {}
    for fps in (30, 60):
        protocol = _protocol([(0.0, 0.0)], fps=fps)
        collector = _collector(tmp_path / f"hz{fps}", protocol, ExpertPolicy())
        collector.run(episodes=1)
        (attempt,) = collector.journal.attempts()
        assert attempt["accepted"]
        rates[fps] = attempt
        assert json.loads((tmp_path / f"hz{fps}" / "meta" / "info.json").read_text())["fps"] == fps
    assert rates[30]["physics_steps_per_s"] == rates[60]["physics_steps_per_s"] == pytest.approx(1 / PHYSICS_DT)
    assert rates[60]["frames"] == pytest.approx(2 * rates[30]["frames"], abs=4)  # same motion, twice the actions
    check_fps(60, PHYSICS_DT)
    with pytest.raises(HarnessInputError, match="--fps"):
        check_fps(45, PHYSICS_DT)


@pytest.mark.slow
def test_an_interrupted_collection_resumes_from_its_last_checkpoint(tmp_path) -> None:
    protocol = _protocol([(0.0, 0.0), (2.0, -2.0), (-2.0, 2.0)])
    root = tmp_path / "demos"
    with pytest.raises(KeyboardInterrupt):
        _collector(root, protocol, ExpertPolicy(), checkpoint_every=2, interrupt_at=3).run(episodes=4)
    # episodes 0-1 were checkpointed; episode 2 was kept and finalized on the way out, but not checkpointed
    assert _episodes_on_disk(root) == [0, 1, 2]
    resumed = _collector(root, protocol, ExpertPolicy(), checkpoint_every=2)
    result = resumed.run(episodes=4)
    assert result.accepted == 4 and _episodes_on_disk(root) == [0, 1, 2, 3]
    journal = resumed.journal
    (rollback,) = journal.of_kind("rollback")
    assert rollback == {**rollback, "to_episodes": 2, "lost_attempts": [3]}
    summary = resumed.summary()
    assert [a["attempt"] for a in summary["accepted"]] == [1, 2, 4, 5]
    assert summary["interrupted_attempts"] == [3]
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/demos", root=root)
    assert dataset.num_episodes == 4
    assert int(dataset[len(dataset) - 1]["episode_index"]) == 3


@pytest.mark.slow
def test_a_collection_refuses_other_settings_and_foreign_folders(tmp_path) -> None:
    protocol = _protocol([(0.0, 0.0)])
    root = tmp_path / "demos"
    _collector(root, protocol, ExpertPolicy(), checkpoint_every=1).run(episodes=1)
    with pytest.raises(HarnessInputError, match="accept"):
        _collector(root, protocol, ExpertPolicy(), accept=AcceptMode.CLEAN_RELEASE).run(episodes=2)
    foreign = tmp_path / "someone-elses"
    foreign.mkdir()
    with pytest.raises(HarnessInputError, match="not made by harness collect"):
        _collector(foreign, protocol, ExpertPolicy()).run(episodes=1)
    assert _episodes_on_disk(root) == [0]


def test_the_card_trains_smolvla_on_our_two_cameras_through_its_three_camera_input() -> None:
    from harness.data.dataset_card import rename_map_for_smolvla, train_commands

    keys = ["observation.images.wrist", "observation.images.top"]
    assert rename_map_for_smolvla(keys) == {"observation.images.top": "observation.images.camera1",
                                            "observation.images.wrist": "observation.images.camera2"}
    commands = train_commands(Path("/data/demos"), [1, 2, 3], keys)
    assert "--policy.empty_cameras=1" in commands["smolvla"]
    assert "'--dataset.episodes=[1,2,3]'" in commands["act"] and "--dataset.root=/data/demos" in commands["act"]
    assert "--policy.push_to_hub=false" in commands["act"] and "--wandb.enable=false" in commands["smolvla"]


def test_the_progress_line_says_how_long_is_left_at_the_pace_per_kept_episode() -> None:
    from harness.data.collector import time_left

    assert time_left(60.0, kept=2, still_needed=3) == "; about 1 min 30 s left"   # rejections are in the 60 s
    assert time_left(60.0, kept=0, still_needed=3) == ""                          # no pace yet
    assert time_left(60.0, kept=5, still_needed=0) == ""                          # done
