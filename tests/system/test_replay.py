"""Evidence as replayable state: a simulated attempt's trajectory draws its frames exactly, videos are drawn
for the attempts that need them, and a trajectory from other model files is refused."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.cli import main
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.models.scoresheet import load_scoresheet
from harness.policies.scripted import plan_pick_and_place
from harness.run.evidence import EvidenceRecorder
from harness.run.replay import ReplaySettings, replay
from harness.sim import trajectory as trajectory_module
from harness.sim.scene import menagerie_dir
from harness.sim.trajectory import TRAJECTORY_FILE, load_trajectory
from harness.sim.units import to_sim
from harness.sim.world import SimWorld
from tests.helpers import small_protocol_copy

CAMERAS = ["top", "wrist"]


def _eager_trial(folder: Path, steps: int = 60) -> dict[str, list[np.ndarray]]:
    """A seeded pick-and-place opening recorded eagerly (every frame drawn in the loop, as `--video all`
    without a writer draws it); returns the frames it drew, per camera."""
    world = SimWorld()
    world.reset((0.22, -0.05), math.radians(12), DEFAULT_START_POSE, seed=3)
    cube, yaw = world.cube_pose()
    start = np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])
    plan = plan_pick_and_place(world.model, 30, start, cube, yaw, world.geometry.bowl_xy)
    recorder = EvidenceRecorder(folder, CAMERAS, world.render, 30, 10.0, (320, 240), True, world=world)
    drawn: dict[str, list[np.ndarray]] = {cam: [] for cam in CAMERAS}
    for step, q in enumerate(plan[:steps]):
        world.step_control(q)
        captured = recorder.record_step(step, step / 30, {}, {}, {})
        for cam, frame in captured.items():
            drawn[cam].append(frame)
    recorder.finish(recorder.final_frames(640, 480), world.judge.verdict(world.data))
    world.close()
    return drawn


def _png_frames(folder: Path) -> list[np.ndarray]:
    return [np.asarray(Image.open(path)) for path in sorted(folder.glob("frame-*.png"))]


@pytest.mark.slow   # a trial drawn eagerly, then replayed from each camera and a free view
def test_replay_with_the_recorded_camera_is_pixel_equal_to_eager_rendering(tmp_path) -> None:
    trial = tmp_path / "runs" / "sheet" / "trial-001-a1"
    drawn = _eager_trial(trial)
    trajectory = load_trajectory(trial / TRAJECTORY_FILE)
    assert trajectory.physics.shape[0] == 60 and len(trajectory.frame_row) == 20
    for cam in CAMERAS:
        out = tmp_path / f"replay-{cam}"
        assert replay(trial, ReplaySettings(camera=cam), out) == 20
        replayed = _png_frames(out)
        assert len(replayed) == len(drawn[cam]) == 20
        assert all(np.array_equal(a, b) for a, b in zip(replayed, drawn[cam], strict=True)), cam
    # a viewpoint no mounted camera has: frames of the asked size that show the scene changing
    out = tmp_path / "free"
    assert replay(trial, ReplaySettings(view=(135.0, -25.0, 0.35), size=(160, 120), fps=5), out) == 10
    free = _png_frames(out)
    assert free[0].shape == (120, 160, 3) and not np.array_equal(free[0], free[-1])


@pytest.fixture(scope="module")
def short_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A six-step trial recorded once for the module: the refusal tests each damage their own copy (a world
    made per case cost about a second each)."""
    trial = tmp_path_factory.mktemp("recorded") / "trial-001-a1"
    _eager_trial(trial, steps=6)
    return trial


def _copy_of(trial: Path, folder: Path) -> Path:
    copy = folder / trial.name
    shutil.copytree(trial, copy)
    return copy


def test_a_trajectory_recorded_on_other_model_files_is_refused(tmp_path, capsys, short_trial: Path) -> None:
    trial = _copy_of(short_trial, tmp_path)
    other = tmp_path / "menagerie"
    shutil.copytree(menagerie_dir(), other)
    with (other / "so101.xml").open("a") as handle:
        handle.write("<!-- an edited model -->\n")
    path = trial / TRAJECTORY_FILE
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["model_fingerprint"] = trajectory_module._fingerprint_of(str(other))   # as recorded on those files
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)
    out = tmp_path / "out.mp4"
    assert main(["replay", str(trial), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model_fingerprint" in err[0] and "other model files" in err[0]
    assert not out.exists() and not list(tmp_path.glob("out*"))


def _damaged(data: bytes, how: str) -> bytes:
    if how.startswith("cut"):
        return data[: int(len(data) * float(how.split()[1]))]
    if how == "flipped bytes":
        middle = bytearray(data)
        for at in range(len(middle) // 3, len(middle) // 3 + 64):
            middle[at] ^= 0xFF
        return bytes(middle)
    return b""


def _rewritten(data: bytes, how: str, folder: Path) -> bytes:
    """The trajectory with one array or meta field made inconsistent, saved as a valid npz."""
    source = folder / "source.npz"
    source.write_bytes(data)
    with np.load(source) as loaded:
        arrays = {name: loaded[name] for name in loaded.files}
    meta = json.loads(str(arrays["meta"]))
    if how == "frame rows past the end":
        arrays["frame_row"] = arrays["frame_row"] + 1000
    elif how == "a short physics array":
        arrays["physics"] = arrays["physics"][:2]
    elif how == "no video size":
        del meta["video_size"]
    elif how == "meta a list":
        meta = [1, 2]
    arrays["meta"] = np.array(json.dumps(meta))
    target = folder / "rewritten.npz"
    np.savez_compressed(target, **arrays)
    return target.read_bytes()


@pytest.mark.parametrize("how", ["cut 0.5", "cut 0.9", "cut 0.02", "empty", "flipped bytes", "frame rows past the end",
                                 "a short physics array", "no video size", "meta a list"])
def test_a_damaged_trajectory_is_one_line_exit_2(tmp_path, capsys, how: str, short_trial: Path) -> None:
    trial = _copy_of(short_trial, tmp_path)
    path = trial / TRAJECTORY_FILE
    data = path.read_bytes()
    path.write_bytes(_damaged(data, how) if how.startswith("cut") or how in ("empty", "flipped bytes")
                     else _rewritten(data, how, tmp_path))
    capsys.readouterr()
    out = tmp_path / "out.mp4"
    assert main(["replay", str(trial), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and TRAJECTORY_FILE in err[0], err
    assert not list(tmp_path.glob("out*"))


@pytest.mark.slow
def test_video_failures_draws_videos_for_exactly_the_failed_and_voided_attempts(workdir) -> None:
    """replay succeeds at the trained position (trial 1) and misses 3-4 cm away (trials 2, 3); a camera
    frozen in trial 3 voids it and pauses the run."""
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--policy", "replay", "--inject-dropout", "3:20"]) == 3
    sheet = load_scoresheet(workdir / "scoresheets" / "small-replay.yaml")
    labels = {a.trial_index: a.label for a in sheet.attempts}
    assert labels[1] == "success" and labels[2] != "success" and labels[3] == "void", labels
    for attempt in sheet.attempts:
        folder = workdir / "runs" / "small-replay" / f"trial-{attempt.trial_index:03d}-a{attempt.attempt}"
        videos = sorted(p.name for p in folder.glob("*.mp4"))
        assert (folder / TRAJECTORY_FILE).is_file() and (folder / "final_top.png").is_file()
        assert videos == ([] if attempt.label == "success" else ["top.mp4", "wrist.mp4"]), (attempt.label, videos)
        assert sorted(n for n in attempt.artifacts if n.endswith(".mp4")) == videos
    # a video removed is drawn again by `replay --failures`, and only that one
    (workdir / "runs" / "small-replay" / "trial-002-a1" / "top.mp4").unlink()
    assert main(["replay", "--failures", "runs/small-replay"]) == 0
    assert (workdir / "runs" / "small-replay" / "trial-002-a1" / "top.mp4").stat().st_size > 1000
    assert not list((workdir / "runs" / "small-replay" / "trial-001-a1").glob("*.mp4"))


def test_video_is_refused_on_a_real_arm_before_anything_is_written(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    code = main(["run", str(protocol), "--headless", "--robot", "so101", "--port", "/dev/null", "--video", "all"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--video" in err[0] and "simulated arm" in err[0]
    assert not (workdir / "scoresheets").exists() and not (workdir / "runs").exists()
