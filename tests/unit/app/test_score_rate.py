"""`harness score` reads a dataset's episodes at the dataset's own frame rate: the proposal's "let go at least 1 s
before the end" is a time, and a dataset recorded at 15 fps has half as many frames in that second as one at 30."""

from __future__ import annotations

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.app.score_command import Episode, score_episode
from harness.models.protocol import Scene
from harness.models.taxonomy import Label
from harness.run.anatomy import GraspPoints
from harness.run.proposal import Reason


def _pick_and_place(fps: float, let_go_before_end_s: float) -> Episode:
    """A pick and place read with the gripper's load, at `fps`: opened, squeezed on the cube, lifted, carried over the
    bowl and let go `let_go_before_end_s` before the last frame. The grasp point is read from three joints (the
    test's own kinematics) so that the bowl is where the scene says."""
    bx, by = (c / 100 for c in Scene().bowl_xy_cm)

    def span(s: float) -> int:
        return round(s * fps)
    # (gripper, x, y, z, load)
    frames = [(60.0, 0.25, 0.0, 0.02, 0.0)] * span(0.4) + [(18.0, 0.25, 0.0, 0.02, -1000.0)] * span(0.4) \
        + [(18.0, 0.25, 0.0, 0.10, -1000.0)] * span(0.4) + [(18.0, bx, by, 0.08, -1000.0)] * span(1.0) \
        + [(60.0, bx, by, 0.10, 0.0)] * span(let_go_before_end_s)
    state = np.array([[x, y, z, 0.0, 0.0, grip] for grip, x, y, z, _ in frames])
    load = np.array([f[4] for f in frames])
    return Episode(0, fps, np.arange(len(frames)) / fps, state, state.copy(), load, None, None, None)


def _grasp_point(joints: dict[str, float]) -> np.ndarray:
    return np.array([joints["shoulder_pan"], joints["shoulder_lift"], joints["elbow_flex"]])


@pytest.mark.parametrize("fps", [15.0, 30.0, 60.0])
def test_a_release_1_5_s_before_the_end_is_a_success_at_any_frame_rate(fps: float) -> None:
    _, early = score_episode(_pick_and_place(fps, 1.5), Scene(), 5.0, GraspPoints(), _grasp_point, None, None)
    assert early.label is Label.SUCCESS, early.line()
    _, late = score_episode(_pick_and_place(fps, 0.5), Scene(), 5.0, GraspPoints(), _grasp_point, None, None)
    assert late.label is None and Reason.LET_GO_LATE in late.reasons, late.line()
