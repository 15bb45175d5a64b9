"""Render profiles (issue 42): the coarse mesh set changes frames, not physics, and stays close to the full
meshes at the sizes policies use; the profile decides the mesh set by frame size."""

from __future__ import annotations

import harness.sim  # noqa: F401  (selects the GL backend; must precede mujoco)

# isort: split
import mujoco
import numpy as np
import pytest

from harness.models.render_profile import MeshDetail, RenderProfile
from harness.models.run_request import RunRequest
from harness.sim.render_check import profile_ssim, ssim
from harness.sim.scene import build_model
from harness.sim.world import SimWorld


def _asking(profile: str | None) -> RunRequest:
    """A run's request asking for `profile` (`--render-profile`; None: not asked)."""
    return RunRequest(protocol="p.yaml", render_profile=profile)


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


@pytest.mark.slow
def test_full_profile_frames_are_the_frames_drawn_before_profiles_existed():
    """The coarse set is hidden from a full frame: the bytes are those of a model without it."""
    model = build_model()
    plain = build_model(coarse_meshes=False)
    frames = []
    for m in (model, plain):
        data = mujoco.MjData(m)
        data.qpos[:6] = [0.3, -0.5, 0.7, 0.2, 0.4, 0.3]
        mujoco.mj_forward(m, data)
        renderer = mujoco.Renderer(m, 72, 96)
        renderer.update_scene(data, camera="top")
        frames.append(renderer.render().copy())
        renderer.close()
    np.testing.assert_array_equal(frames[0], frames[1])


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


@pytest.mark.slow
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


# --- the profile is locked with a run, recorded with a dataset, and a mismatch is stated ---------------------

def _run(protocol, tmp_path, *extra: str) -> int:
    from harness.cli import main

    return main(["run", str(protocol), "--headless", "--no-video", "--scoresheet", str(tmp_path / "s.yaml"),
                 "--runs-dir", str(tmp_path / "runs"), *extra])


@pytest.mark.slow
def test_a_run_locks_its_render_profile_and_a_resume_is_held_to_it(tmp_path, capsys):
    from harness.models.scoresheet import load_scoresheet
    from tests.helpers import small_protocol_copy

    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--max-trials", "1") == 0
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert sheet.locked.render_profile is RenderProfile.SIZED and sheet.render_profile is RenderProfile.SIZED
    assert "render_profile" in sheet.lock["field_sha256"]   # hashed: an edit by hand is caught
    before = (tmp_path / "s.yaml").read_bytes()
    capsys.readouterr()
    assert _run(protocol, tmp_path, "--resume", "--render-profile", "full-v1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "locked.render_profile" in err[0] and "sized-v1" in err[0]
    assert (tmp_path / "s.yaml").read_bytes() == before   # nothing written
    assert _run(protocol, tmp_path, "--resume", "--max-trials", "1", "--render-profile", "sized-v1") == 0
    assert len(load_scoresheet(tmp_path / "s.yaml").attempts) == 2


def test_a_sheet_locked_before_profiles_draws_full_meshes_and_refuses_another(tmp_path):
    from harness.app.sheet import check_same_render_profile
    from harness.errors import StaleRunError
    from harness.models.protocol import load_protocol
    from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
    from tests.helpers import small_protocol_copy

    path = small_protocol_copy(tmp_path)
    lock_scoresheet(tmp_path / "old.yaml", build_locked(load_protocol(path), path, "expert", "sim"), {})
    old = load_scoresheet(tmp_path / "old.yaml")
    assert "render_profile" not in old.locked_data and old.render_profile is RenderProfile.FULL
    check_same_render_profile(old, _asking("full-v1"))
    with pytest.raises(StaleRunError):
        check_same_render_profile(old, _asking("sized-v1"))


def _checkpoint(tmp_path, recorded: str | None, size: tuple[int, int] = (96, 72)):
    """A checkpoint's two config files (no weights: the statement reads configs only) over a dataset's
    provenance recorded with `recorded` (None: a dataset collected before profiles existed)."""
    import json

    data = tmp_path / "data"
    (data / "meta").mkdir(parents=True)
    recording = {"cameras": ["top"], "image_size_wh": list(size)}
    if recorded is not None:
        recording["render_profile"] = recorded
    (data / "meta" / "provenance.json").write_text(json.dumps({"recording": recording}))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "train_config.json").write_text(json.dumps({"dataset": {"root": str(data)}}))
    features = {"observation.state": {"type": "STATE", "shape": [6]},
                "observation.images.top": {"type": "VISUAL", "shape": [3, size[1], size[0]]}}
    (ckpt / "config.json").write_text(json.dumps({"type": "act", "input_features": features}))
    return ckpt


def test_a_policy_trained_on_other_frames_is_stated(tmp_path):
    from harness.data.render_provenance import profile_statement, training_render_profile

    legacy = _checkpoint(tmp_path / "a", None)
    assert training_render_profile(legacy)[0] is RenderProfile.FULL
    said = profile_statement(RenderProfile.SIZED, legacy)
    assert said and "full-v1" in said and "sized-v1" in said and "96x72" in said
    assert profile_statement(RenderProfile.FULL, legacy) is None
    sized = _checkpoint(tmp_path / "b", "sized-v1")
    assert profile_statement(RenderProfile.SIZED, sized) is None
    assert "sized-v1" in profile_statement(RenderProfile.FULL, sized)
    big = _checkpoint(tmp_path / "c", None, (640, 480))   # both profiles draw 640x480 from the full meshes
    assert profile_statement(RenderProfile.SIZED, big) is None
    assert training_render_profile(tmp_path / "nowhere") == (None, None)


def test_a_collection_records_its_profile_and_old_journals_still_resume():
    from harness.data.acceptance import AcceptMode
    from harness.data.collector import CollectSettings

    base = dict(protocol_name="p", protocol_sha256="x", policy_ref="expert", policy_fingerprint="builtin:expert",
                accept=AcceptMode.STRICT, fps=30, cameras=("top",), image_size=(96, 72))
    assert "render_profile" not in CollectSettings(**base).locked()   # as journals were before profiles
    assert CollectSettings(**base, render_profile=RenderProfile.SIZED).locked()["render_profile"] == "sized-v1"


def test_a_real_arm_refuses_a_render_profile_and_a_sim_run_defaults_to_sized():
    from harness.app.sheet import render_profile_from
    from harness.errors import HarnessInputError
    from harness.models.run_settings import RobotKind

    with pytest.raises(HarnessInputError) as refused:
        render_profile_from(_asking("sized-v1"), RobotKind.SO101, None)
    assert refused.value.field == "--render-profile"
    assert render_profile_from(_asking(None), RobotKind.SO101, None) is None
    assert render_profile_from(_asking(None), RobotKind.SIM, None) is RenderProfile.SIZED
    assert render_profile_from(_asking("full-v1"), RobotKind.SIM, None) is RenderProfile.FULL


def test_a_run_of_a_checkpoint_trained_on_full_meshes_says_so_once(tmp_path, caplog):
    import logging

    from harness.app.sheet import render_profile_from
    from harness.models.run_settings import RobotKind

    ckpt = _checkpoint(tmp_path, None)   # its dataset was collected before profiles: full-v1
    with caplog.at_level(logging.WARNING, logger="harness.app.sheet"):
        chosen = render_profile_from(_asking(None), RobotKind.SIM, str(ckpt))
    assert chosen is RenderProfile.SIZED
    said = [r.getMessage() for r in caplog.records if "render profile" in r.getMessage()]
    assert len(said) == 1 and "--render-profile full-v1" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="harness.app.sheet"):
        render_profile_from(_asking("full-v1"), RobotKind.SIM, str(ckpt))
    assert not [r for r in caplog.records if "render profile" in r.getMessage()]
