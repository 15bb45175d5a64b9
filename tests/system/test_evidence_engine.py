"""The run engine with the evidence writer: complete folders, and a frozen camera still voids the trial."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.errors import RunPaused
from harness.models.protocol import load_protocol
from harness.policies.scripted import ExpertPolicy, PlanCache
from harness.run.clock import MonotonicClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.evidence_writer import EvidenceWriter
from harness.run.safety import GuardedRobot
from harness.run.stages import SimStage
from harness.run.terminal import TerminalObserver
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from harness.sim.world import SimWorld
from tests.helpers import locked_sheet


def _engine(tmp_path, writer: EvidenceWriter, dropout_at=None) -> tuple[RunEngine, object]:
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml")
    world = SimWorld(control_fps=protocol.fps)
    robot = SimSO101(SimSO101Config(id="t", render_cameras=[], fps=protocol.fps), world=world)
    robot.connect()
    options = RunOptions(runs_dir=tmp_path / "runs", video_fps=5.0, start_pose_s=0.5, max_attempts=1,
                         evidence_writer=writer)
    guarded = GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    engine = RunEngine(protocol, sheet, guarded, ExpertPolicy(plans=PlanCache()),
                       SimStage(world, protocol, dropout_at), TerminalObserver(False, out=io.StringIO()),
                       MonotonicClock(), options)
    return engine, sheet


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [None, 0], ids=["lane-processes", "inline"])
def test_a_trial_is_recorded_only_with_its_complete_evidence(tmp_path, lanes) -> None:
    writer = EvidenceWriter(SimWorld().geometry, control_fps=30, lanes=lanes)
    try:
        engine, sheet = _engine(tmp_path, writer)
        engine.run()
    finally:
        writer.close()
    attempt = sheet.attempts[0]
    assert attempt.label == "success"
    assert sorted(attempt.artifacts) == sorted(
        ["final_top.png", "final_wrist.png", "top.mp4", "wrist.mp4", "trajectory.parquet", "judge.json",
         "sim_state.npz"])
    assert not list((tmp_path / "runs").rglob("*.partial"))


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [None, 0], ids=["lane-processes", "inline"])
def test_a_camera_frozen_in_the_rendered_evidence_voids_the_trial_and_pauses(tmp_path, lanes) -> None:
    writer = EvidenceWriter(SimWorld().geometry, control_fps=30, lanes=lanes)
    try:
        engine, sheet = _engine(tmp_path, writer, dropout_at=(1, 30))
        with pytest.raises(RunPaused):
            engine.run()
    finally:
        writer.close()
    attempt = sheet.attempts[0]
    assert attempt.outcome == "void"
    assert attempt.void_reason.startswith("camera dropout: top repeated the same frame")


@pytest.mark.slow
def test_evidence_drawn_inline_is_what_the_lane_processes_draw_and_starts_no_process(tmp_path) -> None:
    import os

    import psutil

    def children() -> set[int]:
        return {p.pid for p in psutil.Process().children(recursive=True)}

    finals = {}
    for lanes in (2, 0):
        before = children()
        writer = EvidenceWriter(SimWorld().geometry, control_fps=30, lanes=lanes)
        try:
            started = children() - before
            if lanes:
                assert len(writer.pids) == 2 and set(writer.pids) <= started
            else:
                assert writer.pids == [os.getpid()] and not started
            folder = tmp_path / f"lanes{lanes}"
            folder.mkdir()
            engine, sheet = _engine(folder, writer)
            engine.run()
        finally:
            writer.close()
        artifacts = sheet.attempts[0].artifacts
        finals[lanes] = {name: Path(artifacts[name]).read_bytes() for name in ("final_top.png", "final_wrist.png")}
    assert finals[0] == finals[2]
