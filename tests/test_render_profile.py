"""Render profiles (issue 42): the coarse mesh set changes frames, not physics, and stays close to the full
meshes at the sizes policies use; the profile decides the mesh set by frame size."""

from __future__ import annotations

import harness.sim  # noqa: F401  (selects the GL backend; must precede mujoco)

# isort: split
import mujoco
import numpy as np
import pytest

from harness.models.render_profile import MeshDetail, RenderProfile
from harness.sim.render_check import profile_ssim, ssim
from harness.sim.scene import build_model
from harness.sim.world import SimWorld


def _trajectory(model: mujoco.MjModel, steps: int = 600) -> np.ndarray:
    data = mujoco.MjData(model)
    cube = model.joint("cube_joint").qposadr[0]
    data.qpos[cube:cube + 3] = [0.22, -0.05, 0.0155]
    mujoco.mj_forward(model, data)
    out = []
    for i in range(steps):
        data.ctrl[:] = 0.6 * np.sin(np.arange(6) + i / 60.0)
        mujoco.mj_step(model, data)
        out.append(data.qpos.copy())
    return np.array(out)


def test_coarse_meshes_leave_physics_bit_identical():
    with_coarse = build_model(coarse_meshes=True)
    without = build_model(coarse_meshes=False)
    assert with_coarse.ngeom > without.ngeom   # the coarse set is there ...
    np.testing.assert_array_equal(with_coarse.body_mass, without.body_mass)
    np.testing.assert_array_equal(_trajectory(with_coarse), _trajectory(without))   # ... and moves nothing


def test_profile_picks_meshes_by_frame_size():
    assert RenderProfile.SIZED.detail_for(96, 72) is MeshDetail.COARSE
    assert RenderProfile.SIZED.detail_for(160, 120) is MeshDetail.COARSE
    assert RenderProfile.SIZED.detail_for(320, 240) is MeshDetail.FULL
    assert RenderProfile.FULL.detail_for(96, 72) is MeshDetail.FULL
    world = SimWorld(render_profile=RenderProfile.SIZED)
    try:
        assert world.frame_request("top", 96, 72).detail is MeshDetail.COARSE
        assert world.frame_request("top", 640, 480).detail is MeshDetail.FULL
    finally:
        world.close()


def test_ssim_is_one_for_equal_frames_and_falls_with_difference():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (72, 96, 3), dtype=np.uint8)
    assert ssim(frame, frame) == pytest.approx(1.0)
    assert ssim(frame, 255 - frame) < 0.2
    with pytest.raises(ValueError):
        ssim(frame, frame[:10])


@pytest.mark.parametrize("size", [(96, 72), (128, 96)])
def test_coarse_frames_stay_close_to_the_full_meshes(size):
    """Arm poses across the workspace: the coarse frames differ from the full ones (else nothing was saved)
    but keep their structure (SSIM; the full benchmark's figures are in docs/benchmarks.md)."""
    model = build_model()
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(4):
        qpos = np.zeros(model.nq)
        qpos[:6] = rng.uniform(-0.8, 0.8, 6)
        cube = model.joint("cube_joint").qposadr[0]
        qpos[cube:cube + 7] = [0.22, -0.05, 0.015, 1, 0, 0, 0]
        samples.append(qpos)
    scores = profile_ssim(samples, ("top", "wrist"), *size)
    for cam, values in scores.items():
        assert min(values) > 0.85, (cam, values)
        assert min(values) < 1.0, (cam, values)
