"""The expert must be reliable and replay must fall off with distance: that pair is the
project's demonstration of why a randomized protocol exists."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import harness.sim  # noqa: F401
from harness.models.protocol import JOINT_NAMES, Trial, load_protocol
from harness.policies.base import TrialContext
from harness.policies.scripted import ExpertPolicy, ReplayPolicy
from harness.run.stages import SimStage
from harness.sim.units import to_sim
from harness.sim.world import SimWorld

REPO = Path(__file__).resolve().parents[3]
PROTOCOL = load_protocol(REPO / "protocols" / "randomized.yaml")


def _run(world: SimWorld, policy, trial: Trial) -> dict:
    world.set_arm(PROTOCOL.start_pose)
    SimStage(world, PROTOCOL).place_cube(trial, attempt=1)
    policy.reset(TrialContext(PROTOCOL, trial, world))
    for _ in range(round(PROTOCOL.episode_time_limit_s * PROTOCOL.fps)):
        action = policy.select_action({})
        world.step_control(np.array([to_sim(n, action[f"{n}.pos"]) for n in JOINT_NAMES]))
        if world.judge.finished:
            break
    return world.judge.verdict(world.data)


@pytest.mark.slow
def test_expert_succeeds_across_the_randomized_protocol(world) -> None:
    subset = PROTOCOL.trials[::5]
    labels = [_run(world, ExpertPolicy(), trial).label for trial in subset]
    assert labels.count("success") / len(labels) >= 0.95, labels


@pytest.mark.slow
def test_replay_succeeds_at_the_trained_position_and_fails_far_from_it(world) -> None:
    replay = ReplayPolicy()
    assert _run(world, replay, Trial(index=1, dx_cm=0.0, dy_cm=0.0)).label == "success"
    far = [t for t in PROTOCOL.trials if math.hypot(t.dx_cm, t.dy_cm) > 3.5][:4]
    assert far and all(_run(world, replay, t).label != "success" for t in far)


def test_builtins_refuse_a_real_arm() -> None:
    with pytest.raises(RuntimeError, match="--robot sim"):
        ExpertPolicy().reset(TrialContext(PROTOCOL, PROTOCOL.trials[0], None))
