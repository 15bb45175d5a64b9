"""`harness score DATASET` on a dataset LeRobot's own `lerobot-rollout --strategy.type=episodic` recorded through the
simulated SO-101 (the `harness_so101_sim` robot plugin) with a tiny ACT: a post-hoc sheet that says it is not
pre-registered, labels from the operator (plain mode) or the proposals, resumable, one writer, bad datasets
refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import build_parser, main
from harness.errors import HarnessInputError
from harness.models.anatomy import GraspSignal
from harness.models.posthoc import NOTICE, load_posthoc
from harness.models.protocol import JOINT_NAMES
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from tests.cli_process import HarnessCli
from tests.helpers import refused
from tests.tiny_policy import save_tiny_act

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow   # LeRobot's recorder runs its episodes in real time (about 30 s)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, harness_cli: HarnessCli) -> Path:
    """LeRobot's `lerobot.scripts.lerobot_rollout` (what its `lerobot-rollout` console script runs) in a process of
    its own, forked from the suite's preloaded server (tests/cli_process.py), as lerobot-train and lerobot-eval are."""
    folder = tmp_path_factory.mktemp("rollout")
    act = save_tiny_act(folder / "act", action_mean=[5.0, 10.0, 20.0, 60.0, 0.0, 40.0])
    root = folder / "rollout_sim"
    done = harness_cli.run(
        ["--strategy.type=episodic", "--robot.type=harness_so101_sim", "--robot.id=sim",
         "--robot.render_cameras=[top]", "--robot.camera_width=128", "--robot.camera_height=96",
         f"--policy.path={act}", "--policy.device=cpu", "--dataset.repo_id=local/rollout_sim",
         f"--dataset.root={root}", "--dataset.single_task=Pick up the cube and place it in the bowl.",
         "--dataset.num_episodes=2", "--dataset.episode_time_s=3", "--dataset.reset_time_s=0",
         "--dataset.push_to_hub=false", "--display_data=false", "--play_sounds=false"],
        module="lerobot.scripts.lerobot_rollout", capture_output=True, text=True, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _score(argv: list[str], answers: list[str]) -> int:
    from harness.app.score_command import score_from_args

    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        if not answers:
            raise KeyboardInterrupt   # the operator walked away
        return answers.pop(0)

    args = build_parser().parse_args(["score", "--plain", *argv])
    try:
        return score_from_args(args, read)
    finally:
        _score.prompts = prompts   # type: ignore[attr-defined]


def test_the_operator_labels_each_episode_beside_its_video_and_the_sheet_says_not_pre_registered(
        recorded: Path, workdir: Path, capsys) -> None:
    assert _score([str(recorded), "--scoresheet", "s.yaml"], ["", "w"]) == 0
    prompts = _score.prompts   # type: ignore[attr-defined]
    assert len(prompts) == 2 and "observation.images.top" in prompts[0] and " from 0.00 s to " in prompts[0]
    sheet = load_posthoc("s.yaml")
    assert [e.episode for e in sheet.episodes] == [0, 1]
    assert sheet.episodes[0].label is Label(sheet.episodes[0].proposal["label"])   # Enter: the proposal
    assert sheet.episodes[1].label is Label.WRONG_PLACEMENT and sheet.episodes[1].scored_by == "operator"
    assert not sheet.dataset.gripper_load and sheet.dataset.robot_type == "harness_so101_sim"
    for episode in sheet.episodes:   # the trace's anatomy, read without the gripper's load
        assert episode.anatomy is not None and episode.anatomy.grasp_signal is not GraspSignal.LOAD
    lengths = pd.read_parquet(next((recorded / "meta" / "episodes").glob("*/*.parquet")))["length"].tolist()
    assert [e.frames for e in sheet.episodes] == lengths   # every recorded frame read
    out = capsys.readouterr().out.splitlines()
    assert out[0] == NOTICE
    assert any("no gripper load" in line for line in out)
    assert main(["report", "s.yaml"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == NOTICE
    # never mistaken for a protocol run: not a scoresheet, not on a model card
    with pytest.raises(HarnessInputError, match=r"not a harness\.scoresheet"):
        load_scoresheet("s.yaml")
    assert "NOT PRE-REGISTERED" in refused(["report", "s.yaml", "--model-card", "README.md"], workdir, capsys)


def test_an_interrupted_scoring_resumes_at_the_first_unlabelled_episode(recorded: Path, workdir: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        _score([str(recorded), "--scoresheet", "s.yaml"], ["n"])
    assert [e.episode for e in load_posthoc("s.yaml").episodes] == [0]
    assert _score([str(recorded), "--scoresheet", "s.yaml"], ["d"]) == 0
    assert len(_score.prompts) == 1 and _score.prompts[0].startswith("episode 1:")   # type: ignore[attr-defined]
    assert [e.label for e in load_posthoc("s.yaml").episodes] == [Label.NO_GRASP, Label.GRASPED_THEN_DROPPED]


def test_one_writer_at_a_time(recorded: Path, workdir: Path, capsys) -> None:
    from harness.storage.lock import WriterLock

    with WriterLock(workdir / "s.yaml"):
        said = refused(["score", str(recorded), "--scoresheet", "s.yaml", "--accept-proposals"], workdir, capsys)
    assert "s.yaml" in said


def _copy(recorded: Path, workdir: Path) -> Path:
    return Path(shutil.copytree(recorded, workdir / "copy"))


def test_a_dataset_of_another_robot_is_refused_in_one_line(recorded: Path, workdir: Path, capsys) -> None:
    root = _copy(recorded, workdir)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["robot_type"] = "koch_follower"
    (root / "meta" / "info.json").write_text(json.dumps(info))
    assert "robot_type" in refused(["score", str(root), "--accept-proposals"], workdir, capsys)


def test_a_dataset_without_the_joint_trace_is_refused_in_one_line(recorded: Path, workdir: Path, capsys) -> None:
    root = _copy(recorded, workdir)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["observation.state"]["names"] = [f"{n}.vel" for n in JOINT_NAMES]
    (root / "meta" / "info.json").write_text(json.dumps(info))
    assert "observation.state" in refused(["score", str(root), "--accept-proposals"], workdir, capsys)
    info["features"]["observation.state"]["names"] = [f"{n}.pos" for n in JOINT_NAMES]
    del info["features"]["action"]
    (root / "meta" / "info.json").write_text(json.dumps(info))
    assert "features.action: missing" in refused(["score", str(root), "--accept-proposals"], workdir, capsys)


def test_an_episode_without_frames_is_refused_in_one_line(recorded: Path, workdir: Path, capsys) -> None:
    root = _copy(recorded, workdir)
    parquet = next((root / "data").glob("*/*.parquet"))
    frames = pd.read_parquet(parquet)
    frames[frames["episode_index"] != 1].to_parquet(parquet)
    assert "episode 1 has no frames" in refused(["score", str(root), "--accept-proposals"], workdir, capsys)


def test_the_labelling_screen_plays_each_episodes_video_beside_its_proposal(recorded: Path, workdir: Path) -> None:
    import asyncio

    from harness.app.score_command import score_from_args

    shown: list[str] = []

    def operator(app) -> None:
        async def drive() -> None:
            async with app.run_test(size=(110, 30)) as pilot:
                await pilot.pause(0.3)
                shown.append(str(app.query_one("#video").render()))
                shown.append(str(app.query_one("#about").render()))
                await pilot.press("enter")   # episode 0: the proposal
                await pilot.pause(0.1)
                await pilot.press("w")       # episode 1: wrong placement
                await pilot.pause(0.1)

        asyncio.run(drive())

    args = build_parser().parse_args(["score", str(recorded), "--scoresheet", "s.yaml"])
    assert score_from_args(args, run_app=operator) == 0
    assert "▀" in shown[0]   # the episode's top camera frames, drawn
    assert "episode 0" in shown[1] and "proposed" in shown[1] and "NOT PRE-REGISTERED" in shown[1]
    sheet = load_posthoc("s.yaml")
    assert [(e.episode, e.scored_by) for e in sheet.episodes] == [(0, "operator"), (1, "operator")]
    assert sheet.episodes[0].label is Label(sheet.episodes[0].proposal["label"])
    assert sheet.episodes[1].label is Label.WRONG_PLACEMENT


def test_a_hub_id_is_scored_from_the_local_hub_cache(recorded: Path, workdir: Path, monkeypatch, capsys) -> None:
    """`harness score me/rollout_sim`: the dataset's snapshot in the Hub cache, laid out as huggingface_hub lays
    one out (no network: HF_HUB_OFFLINE); an id the cache does not hold is one line."""
    import huggingface_hub.constants

    cache = workdir / "hub"
    repo = cache / "datasets--me--rollout_sim"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(recorded, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))   # read once, at import
    assert main(["score", "me/rollout_sim", "--accept-proposals", "--scoresheet", "s.yaml"]) == 0
    sheet = load_posthoc("s.yaml")
    assert sheet.dataset.source == "me/rollout_sim" and sheet.dataset.root.endswith(commit)
    assert len(sheet.episodes) == 2
    assert "Hub cache" in refused(["score", "me/not_cached", "--accept-proposals"], workdir, capsys)
