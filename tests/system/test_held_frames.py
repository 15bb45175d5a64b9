"""A learned policy that pops queued actions does not make the simulator draw frames nobody looks at, and its
trials come out exactly as when every frame is drawn (issue 42)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.app.parts import Parts, make_policy
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from harness.sim.world import SimWorld
from tests.helpers import short_protocol_copy, two_sim_trials
from tests.tiny_policy import save_tiny_act


@pytest.mark.slow
def test_a_held_observation_repeats_the_last_frames_and_the_next_drawn_frame_is_unchanged() -> None:
    """Holding skips the drawing, not the sensor: the frame drawn after a hold is the frame an arm that drew
    every step shows at that moment."""
    arms = []
    for _ in range(2):
        arm = SimSO101(SimSO101Config(id="held", render_cameras=["top", "wrist"], camera_width=96,
                                      camera_height=72), world=SimWorld(control_fps=30))
        arm.connect()
        arms.append(arm)
    drawing, holding = arms
    pose = {f"{name}.pos": value for name, value in DEFAULT_START_POSE.items()}
    drawn_tops = []
    try:
        for step in range(6):
            action = dict(pose, **{"shoulder_pan.pos": pose["shoulder_pan.pos"] + 4.0 * step})
            drawn = drawing.get_observation()
            previous = holding._last_frames.copy()
            if step % 3:
                holding.hold_frames_once()
            seen = holding.get_observation()
            for cam in ("top", "wrist"):
                if step % 3:
                    assert seen[cam] is previous[cam]        # nothing drawn: the last frames again
                else:
                    np.testing.assert_array_equal(seen[cam], drawn[cam])
                    drawn_tops += [seen[cam]] if cam == "top" else []
            assert seen["shoulder_pan.pos"] == drawn["shoulder_pan.pos"]   # joints are read every step
            drawing.send_action(action)
            holding.send_action(action)
        assert np.abs(drawn_tops[-1].astype(int) - drawn_tops[0].astype(int)).max() > 20   # the arm moved in view
    finally:
        for arm in arms:
            arm.disconnect()


class AlwaysLooks:
    """The same policy, declared to read every frame: the simulator draws every step, as before issue 42."""

    def __init__(self, policy: Any) -> None:
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)

    def reads_frames_next(self) -> bool:
        return True


@pytest.mark.slow
def test_an_act_that_pops_its_queue_runs_the_same_trials_without_drawing_its_frames(tmp_path: Path) -> None:
    # an image-dependent tiny ACT (10-action chunks) driven away from the start pose: every frame it reads counts
    mean = [DEFAULT_START_POSE[n] + (25.0 if n == "shoulder_pan" else 0.0) for n in JOINT_NAMES]
    policy = save_tiny_act(tmp_path / "ckpt", height=72, width=96, action_mean=mean)
    protocol = short_protocol_copy(tmp_path, seconds=2.0)
    held = two_sim_trials(protocol, policy, tmp_path, "held", None)
    looked = two_sim_trials(protocol, policy, tmp_path, "every-frame",
                  Parts(policy=lambda *a, **k: AlwaysLooks(make_policy(*a, **k))))  # type: ignore[arg-type]
    assert held[0] == looked[0]
    assert len(held[1]) == len(looked[1]) == 2
    for a, b in zip(held[1], looked[1], strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.abs(held[1][0][-1] - held[1][0][0]).max() > 0.05   # the policy moved the arm
