"""A worker keeps its loaded policies and simulators across runs (a sweep's cells, issue 42): the same outcomes,
step for step, as fresh loads, with one load per checkpoint and one scene build."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.app.worker_cache import WorkerCache
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from tests.helpers import small_protocol_copy, two_sim_trials
from tests.tiny_policy import save_tiny_act


def _protocol(folder: Path) -> Path:
    path = small_protocol_copy(folder)
    path.write_text(path.read_text().replace("episode_time_limit_s: 12.0", "episode_time_limit_s: 2.0"))
    return path


@pytest.mark.slow
def test_kept_policy_and_world_give_the_outcomes_of_fresh_loads(tmp_path: Path) -> None:
    # the arm is driven away from its start pose by an image-dependent policy: every frame and action counts
    mean = [DEFAULT_START_POSE[n] + (25.0 if n == "shoulder_pan" else 0.0) for n in JOINT_NAMES]
    policy = save_tiny_act(tmp_path / "ckpt", height=72, width=96, action_mean=mean)
    protocol = _protocol(tmp_path)
    kept = WorkerCache()
    try:
        first = two_sim_trials(protocol, policy, tmp_path, "cell-1", kept.parts())
        second = two_sim_trials(protocol, policy, tmp_path, "cell-2", kept.parts())
        assert (kept.policy_loads, kept.world_builds) == (1, 1)   # loaded and built once for both cells
    finally:
        kept.close()
    fresh = two_sim_trials(protocol, policy, tmp_path, "fresh", None)
    for reused in (first, second):
        assert reused[0] == fresh[0]
        assert len(reused[1]) == len(fresh[1]) == 2
        for a, b in zip(reused[1], fresh[1], strict=True):
            np.testing.assert_array_equal(a, b)
    moved = np.abs(fresh[1][0][-1] - fresh[1][0][0]).max()
    assert moved > 0.05   # the policy moved the arm: equal trajectories are not two arms standing still
