"""LeRobot's own `lerobot-eval` on the `harness_so101` environment (plugins/lerobot_env_harness_sim): the same trials
as `harness run`, with the same outcomes, trial for trial (docs/lerobot.md)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np
import pytest

from harness.models.protocol import JOINT_NAMES
from tests.cli_process import HarnessCli
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "tests" / "data" / "small.yaml"
# the tiny ACT's actions centre on a pose reaching down and forward, jaws half open: the arm moves, so the two
# runs are compared on a trace and a cube that are not simply standing still
REACH = {"shoulder_pan": 5.0, "shoulder_lift": 10.0, "elbow_flex": 20.0, "wrist_flex": 60.0, "wrist_roll": 0.0,
         "gripper": 40.0}


def lerobot_eval(harness_cli: HarnessCli, policy: Path, out: Path, batch_size: int,
                 *flags: str) -> tuple[dict, list[dict]]:
    """`lerobot-eval` (LeRobot's `lerobot.scripts.lerobot_eval`, the module its console script runs) in a process
    of its own, forked from the suite's preloaded server as `harness` commands are (tests/cli_process.py: a forked
    LeRobot tool behaves as a fresh one, test_cli_process); its eval_info.json and the environment's outcomes file."""
    require_plugin()
    outcomes = out / "outcomes.jsonl"
    args = ["--env.type=harness_so101", f"--env.protocol={PROTOCOL}", "--env.cameras=[top]",
            "--env.camera_width=128", "--env.camera_height=96", f"--env.outcomes={outcomes}",
            f"--policy.path={policy}", "--policy.device=cpu", "--eval.n_episodes=2",
            f"--eval.batch_size={batch_size}", f"--output_dir={out / 'eval'}", *flags]
    done = harness_cli.run(args, module="lerobot.scripts.lerobot_eval", capture_output=True, text=True, timeout=600,
                           cwd=out)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((out / "eval" / "eval_info.json").read_text())
    return info, [json.loads(line) for line in outcomes.read_text().splitlines()]


@pytest.fixture(scope="module")
def act(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_act(tmp_path_factory.mktemp("act") / "pretrained_model",
                         action_mean=[REACH[n] for n in JOINT_NAMES])


def harness_run(policy: Path, folder: Path) -> list:
    from harness import RunRequest, evaluate
    from harness.models.run_request import EvidenceRequest, RobotRequest
    from harness.models.scoresheet import load_scoresheet

    request = RunRequest(protocol=PROTOCOL, policies=(str(policy),), robot=RobotRequest(kind="sim"),
                         scoresheet=folder / "sheet.yaml", runs_dir=folder / "runs", headless=True,
                         evidence=EvidenceRequest(video="none"), max_trials=2)
    assert evaluate(request) == 0
    return load_scoresheet(folder / "sheet.yaml").attempts


def require_plugin() -> None:
    """scripts/setup installs the plugin (LeRobot imports every `lerobot_env_*` distribution before parsing its
    flags); a venv set up before it existed fails here in one line rather than deep in lerobot-eval."""
    try:
        importlib.metadata.distribution("lerobot_env_harness_sim")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("lerobot_env_harness_sim is not installed: run scripts/setup (or pip install --no-deps -e "
                    "plugins/lerobot_env_harness_sim)")


def test_the_plugin_is_installed_where_lerobot_finds_it() -> None:
    require_plugin()


@pytest.mark.slow   # two harness trials and lerobot-eval's start (a minute or two on two cores)
def test_lerobot_eval_scores_the_trials_harness_run_scores_with_the_same_outcomes(harness_cli: HarnessCli, act: Path,
                                                                                   tmp_path: Path) -> None:
    attempts = harness_run(act, tmp_path / "harness")
    info, outcomes = lerobot_eval(harness_cli, act, tmp_path, 1)

    episodes = info["per_task"][0]["metrics"]["successes"] if "per_task" in info else None
    overall = info["overall"]
    assert overall["n_episodes"] == 2
    assert [o["trial_index"] for o in outcomes] == [a.trial_index for a in attempts] == [1, 2]
    assert [o["label"] for o in outcomes] == [a.label.value for a in attempts]
    successes = sum(a.label.value == "success" for a in attempts)
    assert overall["pc_success"] == pytest.approx(100 * successes / 2)
    if episodes is not None:
        assert [bool(s) for s in episodes] == [a.label.value == "success" for a in attempts]
    # the same trial, step for step: where the cube ended, what the trace says the arm did
    for outcome, attempt in zip(outcomes, attempts, strict=True):
        assert outcome["true_placement_error_cm"] == attempt.judge.true_placement_error_cm
        assert outcome["detail"] == attempt.judge.detail
        assert outcome["anatomy"]["first_motion_s"] == attempt.anatomy.first_motion_s
        assert outcome["anatomy"]["summary"] == attempt.anatomy.summary
    assert outcomes[0]["anatomy"]["first_motion_s"] is not None   # the arm moved: a trace worth comparing


@pytest.mark.slow
def test_a_vectorized_batch_runs_both_trials_at_once(harness_cli: HarnessCli, act: Path, tmp_path: Path) -> None:
    info, outcomes = lerobot_eval(harness_cli, act, tmp_path, 2)
    assert info["overall"]["n_episodes"] == 2
    assert sorted(o["trial_index"] for o in outcomes) == [1, 2]
    assert all(o["anatomy"] is not None for o in outcomes)


def test_observations_and_actions_are_the_so101_followers(tmp_path: Path) -> None:
    from lerobot.envs.utils import env_to_policy_features

    from harness.app.lerobot_env import HarnessSimEnv, HarnessSimEnvConfig

    config = HarnessSimEnvConfig(cameras=["top", "wrist"], camera_width=160, camera_height=120)
    features = env_to_policy_features(config)
    assert features["observation.state"].shape == (6,)
    assert features["observation.images.top"].shape == (3, 120, 160)
    assert features["observation.images.wrist"].shape == (3, 120, 160)
    assert features["action"].shape == (6,)

    env = HarnessSimEnv(protocol=str(PROTOCOL), cameras=("top",), camera_width=160, camera_height=120)
    try:
        observation, info = env.reset(seed=1001)   # the protocol's second trial
        assert info["trial_index"] == 2
        assert observation["pixels"]["top"].shape == (120, 160, 3)
        assert observation["pixels"]["top"].dtype == np.uint8
        start = observation["agent_pos"]   # the follower's units: degrees, gripper 0..100, at the start pose
        assert start == pytest.approx([0.0, -60.0, 60.0, 70.0, 0.0, 10.0], abs=0.5)
        held = np.array(start, dtype=np.float32)
        held[-1] = 60.0   # open the jaws
        for _ in range(15):
            observation, *_ = env.step(held)
        assert observation["agent_pos"][-1] > 40
        assert env.render().shape == (240, 320, 3)
    finally:
        env.close()


def test_without_a_protocol_the_seed_draws_the_start() -> None:
    from harness.app.lerobot_env import HarnessSimEnv

    env = HarnessSimEnv(cameras=(), radius_cm=6.0)
    try:
        first = env.trial_for(1000)
        assert env.trial_for(1000) == first
        assert env.trial_for(1001) != first
        assert (first.dx_cm ** 2 + first.dy_cm ** 2) ** 0.5 <= 6.0
    finally:
        env.close()
