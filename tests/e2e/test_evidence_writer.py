"""Evidence from the writer process is the evidence the loop used to write itself."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pandas as pd
import pytest
from PIL import Image

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.policies.scripted import plan_pick_and_place
from harness.run.camera_watch import DropoutPolicy
from harness.run.evidence import EvidenceRecorder
from harness.run.evidence_writer import EvidenceWriter
from harness.sim.units import to_sim
from harness.sim.world import SimWorld
from tests.helpers import wait_until

CAMERAS = ["top", "wrist"]


@pytest.fixture(scope="module")
def writer():
    w = EvidenceWriter(scene=None, control_fps=30, lanes=2)   # each camera in its own process
    yield w
    w.close()


def _trial(folder: Path, writer: EvidenceWriter | None, steps: int = 75, freeze_at: int | None = None,
           block: bool = True) -> tuple[dict[str, str], EvidenceRecorder]:
    """A seeded pick-and-place opening, recorded at 10 fps with both cameras."""
    world = SimWorld()
    world.reset((0.22, -0.05), math.radians(12), DEFAULT_START_POSE, seed=3)
    cube, yaw = world.cube_pose()
    start = np.array([to_sim(n, DEFAULT_START_POSE[n]) for n in JOINT_NAMES])
    plan = plan_pick_and_place(world.model, 30, start, cube, yaw, world.geometry.bowl_xy)
    recorder = EvidenceRecorder(folder, CAMERAS, world.render, 30, 10.0, (320, 240), True,
                                writer=writer, world=world, block=block, dropout=DropoutPolicy())
    for step, q in enumerate(plan[:steps]):
        if step == freeze_at:
            world.frozen_cameras.add("top")
        world.step_control(q)
        recorder.record_step(step, step / 30, {"shoulder_pan.pos": float(q[0])}, {"shoulder_pan.pos": float(q[0])},
                             {"policy_ms": 0.0})
    finals = recorder.final_frames(640, 480) if writer else {c: world.render(c, 640, 480) for c in CAMERAS}
    artifacts = recorder.finish(finals, world.judge.verdict(world.data))
    world.close()
    return artifacts, recorder


def _decoded(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(float) - b.astype(float)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255 ** 2 / mse)


def _same_video(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """The same frames, encoded: x264's output is not bit-identical between processes whose floating-point
    state differs (a library imported in one sets flush-to-zero), so the decoded frames are compared by PSNR
    (above 35 dB: the same picture; a frame from another step or camera is far below 25 dB)."""
    return len(a) == len(b) and all(_psnr(x, y) > 35 for x, y in zip(a, b, strict=True))


@pytest.mark.slow
def test_the_writer_process_writes_the_same_evidence_as_the_loop(tmp_path, writer) -> None:
    inline, _ = _trial(tmp_path / "inline" / "trial-001-a1", None)
    offloaded, recorder = _trial(tmp_path / "writer" / "trial-001-a1", writer)
    assert sorted(inline) == sorted(offloaded) == sorted(
        ["final_top.png", "final_wrist.png", "top.mp4", "wrist.mp4", "trajectory.parquet", "judge.json",
         "sim_state.npz"])
    for cam in CAMERAS:
        reference, frames = _decoded(inline[f"{cam}.mp4"]), _decoded(offloaded[f"{cam}.mp4"])
        assert len(frames) == len(reference) == 25
        assert frames[0].shape == reference[0].shape == (240, 320, 3)
        assert _same_video(frames, reference)
        assert min(_psnr(frames[i], reference[i + 5]) for i in range(0, 20, 5)) < 35, "a shifted frame would differ"
        final = np.asarray(Image.open(offloaded[f"final_{cam}.png"]))
        assert final.shape == (480, 640, 3)
        assert np.array_equal(final, np.asarray(Image.open(inline[f"final_{cam}.png"])))
    assert pd.read_parquet(inline["trajectory.parquet"]).equals(pd.read_parquet(offloaded["trajectory.parquet"]))
    assert json.loads(Path(inline["judge.json"]).read_text()) == json.loads(Path(offloaded["judge.json"]).read_text())
    assert recorder.dropped == {"top": 0, "wrist": 0} and recorder.dropout() is None
    assert not (tmp_path / "writer" / "trial-001-a1.partial").exists()


@pytest.mark.slow
def test_an_abandoned_trial_leaves_nothing_and_its_retry_in_the_same_folder_is_whole(tmp_path, writer) -> None:
    folder = tmp_path / "writer" / "trial-004-a1"
    world = SimWorld()
    world.reset((0.22, -0.05), math.radians(12), DEFAULT_START_POSE, seed=3)
    recorder = EvidenceRecorder(folder, CAMERAS, world.render, 30, 10.0, (320, 240), True,
                                writer=writer, world=world, block=True, dropout=DropoutPolicy())
    for step in range(40):   # frames still queued in the lanes when the trial is abandoned
        world.hold(10)
        recorder.record_step(step, step / 30, {}, {}, {})
    recorder.abandon()
    world.close()
    assert not folder.exists() and not (tmp_path / "writer" / "trial-004-a1.partial").exists()
    retried, _ = _trial(folder, writer)
    inline, _ = _trial(tmp_path / "inline" / "trial-004-a1", None)
    assert sorted(retried) == sorted(inline)
    for cam in CAMERAS:
        assert _same_video(_decoded(retried[f"{cam}.mp4"]), _decoded(inline[f"{cam}.mp4"]))


@pytest.mark.slow
def test_a_frozen_camera_in_the_rendered_evidence_is_reported(tmp_path, writer) -> None:
    _, recorder = _trial(tmp_path / "trial-002-a1", writer, steps=90, freeze_at=20)
    assert recorder.dropout() is not None and recorder.dropout().startswith("top repeated the same frame")


@pytest.mark.slow
def test_a_full_queue_drops_frames_and_the_folder_says_so(tmp_path) -> None:
    slow = EvidenceWriter(scene=None, control_fps=30, queue_frames=1, lanes=1)   # both cameras in one process
    try:
        artifacts, recorder = _trial(tmp_path / "trial-003-a1", slow, steps=60, block=False)
    finally:
        slow.close()
    dropped = sum(recorder.dropped.values())
    assert dropped > 0
    said = json.loads(Path(artifacts["evidence_dropped.json"]).read_text())
    assert sum(said["dropped_frames"].values()) == dropped
    assert sum(said["written_frames"].values()) + dropped == 2 * 20
    for cam, written in said["written_frames"].items():
        assert len(_decoded(artifacts[f"{cam}.mp4"])) == written


@pytest.mark.slow
def test_a_killed_run_leaves_no_writer_process_behind() -> None:
    # behaviour: a run that stays alive (60 s) until the test kills it
    script = ("import sys, time\nfrom harness.run.evidence_writer import EvidenceWriter\n"
              "w = EvidenceWriter(lanes=2)\nprint(*w.pids, flush=True)\ntime.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    children = [int(pid) for pid in run.stdout.readline().split()]
    assert len(children) == 2
    run.send_signal(signal.SIGKILL)
    run.wait()
    wait_until(lambda: not any(_running(child) for child in children), 15, "the writer's lanes ending with it")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"
