"""`harness run` end to end on the simulated arm: scoring, evidence, kill and resume, dropout, LeRobot policies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from tests.helpers import REPO, short_protocol_copy, small_protocol_copy, wait_until
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def _wait_for(predicate, timeout: float) -> bool:
    return bool(wait_until(predicate, timeout, "the run's progress", poll_s=0.05))


def _finals(sheet_path: Path) -> list[int]:
    return [a.trial_index for a in load_scoresheet(sheet_path).attempts if a.outcome != "void"]


@pytest.mark.slow
def test_kill_mid_trial_then_resume_scores_every_trial_exactly_once(workdir, harness_cli) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    sheet = workdir / "scoresheets" / "small-expert.yaml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # --video all: every attempt's whole evidence is drawn, so a kill mid-drawing is tested too
    child = harness_cli.popen(["run", str(protocol), "--headless", "--video", "all"], cwd=workdir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert _wait_for(lambda: sheet.exists() and len(load_scoresheet(sheet).attempts) >= 1, 120)
    assert _wait_for(lambda: any(workdir.glob("runs/small-expert/*.partial")), 60), "trial 2 never started"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert _finals(sheet) == [1]

    done = harness_cli.run(["run", str(protocol), "--resume", "--headless", "--video", "all"], cwd=workdir, env=env,
                           capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Success     3/3" in done.stdout
    assert sorted(_finals(sheet)) == [1, 2, 3]
    for trial in (1, 2, 3):
        folder = workdir / "runs" / "small-expert" / f"trial-{trial:03d}-a1"
        for name in ("final_top.png", "final_wrist.png", "top.mp4", "wrist.mp4", "trajectory.parquet", "judge.json",
                     "sim_state.npz"):
            assert (folder / name).stat().st_size > 0, (trial, name)
        trajectory = pd.read_parquet(folder / "trajectory.parquet")
        assert {"action.gripper.pos", "obs.gripper.pos", "policy_ms", "missed"} <= set(trajectory.columns)
        assert json.loads((folder / "judge.json").read_text())["label"] == "success"
    assert not list(workdir.glob("runs/small-expert/*.partial"))

    again = harness_cli.run(["run", str(protocol), "--resume", "--headless"], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "all 3 trials are scored" in again.stdout


@pytest.mark.slow
def test_camera_dropout_voids_the_trial_pauses_and_the_resume_retries_it(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    code = main(["run", str(protocol), "--headless", "--inject-dropout", "2:60", "--video-fps", "5",
                 "--video-size", "160x120"])
    assert code == 3
    assert "--resume" in capsys.readouterr().err
    sheet_path = workdir / "scoresheets" / "small-expert.yaml"
    sheet = load_scoresheet(sheet_path)
    assert [(a.trial_index, a.outcome) for a in sheet.attempts] == [(1, "success"), (2, "void")]
    assert sheet.attempts[1].void_reason.startswith("camera dropout: top")
    assert main(["run", str(protocol), "--resume", "--headless", "--no-video"]) == 0
    sheet = load_scoresheet(sheet_path)
    assert [(a.trial_index, a.attempt, a.outcome) for a in sheet.attempts] == [
        (1, 1, "success"), (2, 1, "void"), (2, 2, "success"), (3, 1, "success")]


@pytest.mark.slow
def test_hand_edited_scoresheet_blocks_resume_with_the_field_name(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--no-video", "--max-trials", "1"]) == 0
    sheet_path = workdir / "scoresheets" / "small-expert.yaml"
    data = yaml.safe_load(sheet_path.read_text())
    data["locked"]["success_definition"] = "the cube ends near the bowl"
    sheet_path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = sheet_path.read_text()
    capsys.readouterr()
    assert main(["run", str(protocol), "--resume", "--headless"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "locked.success_definition" in err
    assert sheet_path.read_text() == before, "a refused resume must not write"


def _short_protocol(folder: Path, seconds: float = 1.0, trials: int = 2) -> Path:
    return short_protocol_copy(folder, seconds, trials)


@pytest.mark.slow
def test_a_lerobot_act_checkpoint_runs_through_its_own_processors(workdir) -> None:
    ckpt = save_tiny_act(workdir / "tiny_act")
    protocol = _short_protocol(workdir / "protocols")
    assert main(["run", str(protocol), "--policy", str(ckpt), "--headless", "--device", "cpu",
                 "--video-fps", "5"]) == 0
    sheet = load_scoresheet(workdir / "scoresheets" / "small-tiny_act.yaml")
    assert sheet.locked.policy.fingerprint.startswith("sha256:")
    assert [a.trial_index for a in sheet.scored_attempts()] == [1, 2]
    for attempt in sheet.scored_attempts():
        assert attempt.label == "no_grasp"  # an untrained policy holds the start pose
        assert attempt.loop.steps == 30 and attempt.loop.policy_latency_ms_max > 0


@pytest.mark.slow
def test_rename_map_feeds_the_policy_its_own_camera_names(workdir) -> None:
    ckpt = save_tiny_act(workdir / "tiny_cam1", camera="camera1")
    protocol = _short_protocol(workdir / "protocols", trials=1)
    assert main(["run", str(protocol), "--policy", str(ckpt), "--headless", "--device", "cpu", "--no-video",
                 "--rename-map", '{"top": "camera1"}']) == 0
    sheet = load_scoresheet(workdir / "scoresheets" / "small-tiny_cam1.yaml")
    assert sheet.settings.rename_map == {"top": "camera1"}
    assert len(sheet.scored_attempts()) == 1


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "protocols/missing.yaml"], "cannot read"),
        (["run", "PROTO", "--policy", "no/such/ckpt"], "--policy"),
        (["run", "PROTO", "--video-size", "big"], "--video-size"),
    ],
)
def test_bad_run_input_is_one_line_and_exit_2(workdir, capsys, argv, fragment) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    argv = [str(protocol) if a == "PROTO" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment in err


@pytest.mark.slow
def test_record_dataset_writes_a_lerobot_dataset_that_lerobot_loads(workdir) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    protocol = _short_protocol(workdir / "protocols", seconds=1.0, trials=2)
    root = workdir / "eval_dataset"
    assert main(["run", str(protocol), "--headless", "--no-video", "--record-dataset", str(root)]) == 0
    dataset = LeRobotDataset("local/eval_dataset", root=root, video_backend="pyav")
    assert dataset.meta.total_episodes == 2 and dataset.num_frames == 60
    item = dataset[45]
    assert item["observation.images.top"].shape == (3, 96, 128)   # --record-size default
    assert item["observation.state"].shape == (6,) and item["action"].shape == (6,)
    sheet = load_scoresheet(workdir / "scoresheets" / "small-expert.yaml")
    assert [a.artifacts["dataset_episode"] for a in sheet.attempts] == ["0", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", [KeyboardInterrupt, RuntimeError, OSError])
def test_torque_is_released_on_interrupts_and_crashes_and_nothing_half_written(workdir, fault) -> None:
    from harness.app.parts import Parts, make_sim_robot
    from harness.app.run_command import run_from_args
    from harness.cli import build_parser
    from harness.errors import PolicyFailed
    from harness.policies.scripted import ExpertPolicy

    robots = []

    def keep_robot(*args, **kwargs):
        robots.append(make_sim_robot(*args, **kwargs))
        return robots[-1]

    class FailingExpert(ExpertPolicy):
        calls = 0

        def select_action(self, observation):
            self.calls += 1
            if self.calls == 300:  # in the middle of trial 2
                raise fault("operator pressed Ctrl-C" if fault is KeyboardInterrupt else "policy crashed")
            return super().select_action(observation)

    parts = Parts(policy=lambda *args: FailingExpert(), sim_robot=keep_robot)
    protocol = small_protocol_copy(workdir / "protocols")
    args = build_parser().parse_args(["run", str(protocol), "--headless", "--no-video"])
    if fault is KeyboardInterrupt:
        assert run_from_args(args, parts) == 130
    else:
        # the policy's own error, an OSError too, is not voided as a robot fault: nothing recorded for trial 2
        with pytest.raises(PolicyFailed, match=f"policy raised {fault.__name__} in trial 2: policy crashed"):
            run_from_args(args, parts)
    robot = robots[0].robot  # the simulated SO-101 itself, under the guard
    assert robot.torque_enabled is False and robot.is_connected is False
    sheet = load_scoresheet(workdir / "scoresheets" / "small-expert.yaml")
    assert [a.trial_index for a in sheet.attempts] == [1]
    assert not list((workdir / "runs" / "small-expert").glob("*.partial"))


@pytest.mark.slow
def test_a_policy_needing_a_camera_the_robot_lacks_is_refused_and_nothing_is_written(workdir, capsys) -> None:
    from harness.emulator.pty_port import PtyBus
    from harness.emulator.scenario import build_chain, default_scenario

    ckpt = save_tiny_act(workdir / "act_top")
    protocol = small_protocol_copy(workdir / "protocols")
    with PtyBus(build_chain(default_scenario())) as bus:
        code = main(["run", str(protocol), "--robot", "so101", "--port", bus.port, "--robot-id", "emulated_follower",
                     "--policy", str(ckpt), "--headless"])
    assert code == 2
    assert "needs camera(s) ['top']" in capsys.readouterr().err
    assert not list(workdir.glob("scoresheets/*.yaml")), "a refused run must not leave a locked scoresheet"


@pytest.mark.slow
def test_what_the_policy_load_built_is_out_of_the_collectors_reach_for_the_run_and_collectable_after(workdir) -> None:
    """A full collection walking torch's and LeRobot's half a million objects took 0.35 s of CPU with the interpreter
    lock held (1-4 s on two loaded cores) and held up the first cube prompt (issue 40): they are frozen once the policy
    has loaded, for the run, and collectable again once it has ended, so a process that runs one run after another
    (`harness.evaluate` in a notebook) keeps nothing of the last."""
    import gc

    from harness.app.parts import Parts
    from harness.app.run_command import run_from_args
    from harness.cli import build_parser
    from harness.policies.scripted import ExpertPolicy

    frozen_in_trials: list[int] = []

    class Noting(ExpertPolicy):
        def reset(self, context):
            frozen_in_trials.append(gc.get_freeze_count())
            super().reset(context)

    gc.unfreeze()   # from nothing frozen
    protocol = small_protocol_copy(workdir / "protocols")
    args = build_parser().parse_args(["run", str(protocol), "--headless", "--no-video", "--max-trials", "1"])
    assert run_from_args(args, Parts(policy=lambda *args: Noting())) == 0
    assert len(frozen_in_trials) == 1 and frozen_in_trials[0] > 10_000
    assert gc.get_freeze_count() == 0
