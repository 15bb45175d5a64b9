"""A simulated camera's frame is the scene even when the garbage collector frees a renderer mid-draw.

MuJoCo's EGL contexts release the freeing thread's current context (`harness.sim.gl_draw`). The collector
frees unclosed renderers at moments nobody chooses; here the free is put at the worst one, inside MuJoCo's
draw call, which is where a CI run's calibrated-spot picture came out as noise."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from harness.models.defaults import DEFAULT_START_POSE
from harness.sim.world import SimWorld

pytestmark = pytest.mark.slow   # builds two scenes


def _free_another_renderer_during_the_next_draw(monkeypatch: pytest.MonkeyPatch, other: SimWorld) -> None:
    draw = mujoco.mjr_render

    def draw_while_a_renderer_is_freed(*args):
        monkeypatch.setattr(mujoco, "mjr_render", draw)
        other.close()   # what the collector's call of an unclosed renderer's __del__ does
        return draw(*args)

    monkeypatch.setattr(mujoco, "mjr_render", draw_while_a_renderer_is_freed)


def test_a_renderer_freed_mid_draw_does_not_spoil_the_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    world, other = SimWorld(), SimWorld()
    try:
        world.set_arm(DEFAULT_START_POSE)
        world.place_cube((0.22, -0.05), 0.0)
        before = world.render("top", 160, 120).astype(int)
        other.render("top", 64, 48)
        _free_another_renderer_during_the_next_draw(monkeypatch, other)
        during = world.render("top", 160, 120).astype(int)
        after = world.render("top", 160, 120).astype(int)
        assert np.abs(during - before).max() <= 1, "the frame drawn while a context was freed is the scene"
        assert np.abs(after - before).max() <= 1, "and the camera keeps drawing the scene after it"
    finally:
        world.close()
        other.close()
