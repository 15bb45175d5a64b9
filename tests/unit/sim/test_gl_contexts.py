"""Two simulated worlds drawing in one process (a test module's world beside one another test left for the garbage
collector; an operator's top camera beside the placement guide's): closing one must not spoil the other's frames.

MuJoCo's `Renderer.close` freed its GL objects with whatever context was current, and object names are per context,
so closing one world's renderer right after another world drew deleted that world's textures and buffers: its next
frames came out without them (a serial run of tests/unit/run: the final frame had no cube in it). `harness.sim.gl_draw`
makes the closing renderer's own context current first.
"""

from __future__ import annotations

import gc

import numpy as np

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.sim.world import SimWorld


def _differs(one: np.ndarray, other: np.ndarray) -> int:
    """Pixels that differ by more than the simulated sensor's least-significant-bit noise."""
    return int((np.abs(one.astype(int) - other.astype(int)) > 2).any(axis=2).sum())


def test_closing_one_worlds_renderer_leaves_anothers_frames_whole() -> None:
    first, second = SimWorld(), SimWorld()
    try:
        first.render("top", 160, 120)
        before = second.render("top", 160, 120)     # the second world's context is current now
        first.close()
        assert _differs(second.render("top", 160, 120), before) == 0
    finally:
        second.close()


def test_a_world_nobody_closed_and_the_collector_frees_leaves_anothers_frames_whole() -> None:
    second = SimWorld()
    try:
        forgotten = SimWorld()
        forgotten.render("top", 160, 120)
        before = second.render("top", 160, 120)
        del forgotten
        gc.collect()
        assert _differs(second.render("top", 160, 120), before) == 0
    finally:
        second.close()
