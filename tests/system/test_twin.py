"""`harness twin`: a real (here: rehearsed) sheet's scored attempts re-run in the simulated arm, and its refusals.

The "real" sheet is made the way `harness rehearse` leaves one (robot so101, a LeRobot checkpoint, each attempt
with the start the top camera measured and the latency the arm saw, the locked `rehearsal` block), without the
emulator: the twin reads only the sheet, the protocol and the checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import HarnessInputError
from harness.models.protocol import load_protocol
from harness.models.scoresheet import Scoresheet, build_locked, load_scoresheet, lock_scoresheet
from harness.models.sheet_records import LoopStats
from tests.helpers import fake_attempt
from tests.realtime.test_rehearse import PROTOCOL

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

STARTS = {1: (2.8, -1.9, 14.0), 2: (-2.1, 1.6, -9.0)}   # measured near the planned (3, -2, 15) and (-2, 1.5, -10)


def _real_sheet(folder: Path, *, bowl: str = "18.0, 14.0", robot: str = "so101",
                provenance: dict | None = None, name: str = "real.yaml", chunked: bool = False) -> Scoresheet:
    from tests.tiny_policy import save_tiny_act

    policy = folder / "act"
    if not policy.exists():
        save_tiny_act(policy)
    protocol_path = folder / f"desk-{abs(hash(bowl)) % 1000}.yaml"
    protocol_path.write_text(PROTOCOL % bowl)
    protocol = load_protocol(protocol_path)
    optional = {"latency_ms": None, "inference": {"engine": "sync"},
                **(provenance if provenance is not None else {"rehearsal": {"gap": {}}})}
    locked = build_locked(protocol, protocol_path, str(policy), robot, optional)
    sheet = lock_scoresheet(folder / "scoresheets" / name, locked, {"cameras": {"top": "sim@128x96"}})
    for index, (dx, dy, yaw) in STARTS.items():
        loop = LoopStats(steps=45, obs_to_action_ms_p50=30.0 + index, obs_to_action_clock="wall",
                         **({"chunk_switches": 5, "inference_ms_p50": 460.0 + index, "robot_io_ms_p50": 12.0}
                            if chunked else {}))
        sheet.add_attempt(fake_attempt(index, 1, "no_grasp", loop=loop, measured_start={
            "dx_cm": dx, "dy_cm": dy, "yaw_deg": yaw, "error_cm": 0.2, "yaw_error_deg": 1.0, "uncertainty_cm": 0.3,
            "within_tolerance": True}))
    return sheet


def _nothing_written(folder: Path) -> None:
    assert not (folder / "twins").exists() and not (folder / "runs").exists()
    assert not [p for p in (folder / "scoresheets").iterdir() if "-twin" in p.name]


@pytest.mark.slow
def test_a_twin_sheet_a_simulated_sheet_and_a_gone_or_changed_policy_are_refused_with_nothing_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    real = _real_sheet(tmp_path)
    twin_like = _real_sheet(tmp_path, provenance={"twin_of": {"real_sheet": str(real.path),
                                                              "real_lock_sha256": real.lock["sha256"]}},
                            robot="sim", name="mirror.yaml")
    simulated = _real_sheet(tmp_path, robot="sim", provenance={}, name="sim.yaml")
    for sheet, field in ((twin_like, "locked.twin_of"), (simulated, "locked.robot")):
        assert main(["twin", str(sheet.path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err and str(sheet.path) in err, err
    _nothing_written(tmp_path)

    checkpoint = Path(real.locked.policy.ref)
    with (checkpoint / "config.json").open("a") as handle:
        handle.write(" ")                                      # retrained over the old checkpoint
    assert main(["twin", str(real.path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "locked.policy.fingerprint" in err and "changed" in err, err
    shutil.rmtree(checkpoint)
    assert main(["twin", str(real.path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "locked.policy.ref" in err and "gone" in err, err
    _nothing_written(tmp_path)


@pytest.mark.slow
def test_the_twins_policy_sees_frames_at_the_size_the_real_cameras_delivered_not_its_training_size(
        tmp_path: Path) -> None:
    """A policy trained at 128x96 fed 640x480 frames on the arm computed on those: the twin renders what the arm's
    cameras delivered (the real sheet's `sim@WxH`, or a real camera's size), so it mirrors that run."""
    from types import SimpleNamespace

    from harness.app.parts import make_sim_robot
    from harness.app.twin import twin_protocol

    real = _real_sheet(tmp_path)
    real.settings = real.settings.model_copy(update={"cameras": {"top": "sim:/tmp/x/cameras.sock@160x120"}})
    protocol = twin_protocol(real, load_protocol(Path(real.locked.protocol_file)))
    assert protocol.run.cameras == {"top": "sim@160x120"}
    policy = SimpleNamespace(camera_keys=("top",), image_size=(128, 96))   # what the policy was trained at
    robot = make_sim_robot(protocol, policy, realtime=False)                # type: ignore[arg-type]
    try:
        assert robot.get_observation()["top"].shape == (120, 160, 3)
    finally:
        robot.disconnect()
    plain = make_sim_robot(load_protocol(Path(real.locked.protocol_file)), policy, realtime=False)  # type: ignore[arg-type]
    try:
        assert plain.get_observation()["top"].shape == (96, 128, 3)        # a plain sim run: the training size
    finally:
        plain.disconnect()


@pytest.mark.slow
def test_a_rehearsal_whose_protocol_scene_is_not_the_emulated_table_is_refused_naming_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    moved = _real_sheet(tmp_path, bowl="10.0, 20.0")
    assert main(["twin", str(moved.path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "scene.bowl_xy_cm" in err and "18, 14" in err, err
    _nothing_written(tmp_path)
    real = _real_sheet(tmp_path, name="good.yaml")
    for argv in (["no-such-sheet.yaml"], [str(real.path), "--max-trials", "0"], [str(real.path), "--workers", "0"]):
        assert main(["twin", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        _nothing_written(tmp_path)


@pytest.mark.slow
def test_the_twin_runs_each_real_attempt_from_its_measured_start_and_resume_and_ray_give_the_serial_sheet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    real = _real_sheet(tmp_path)
    assert main(["twin", str(real.path), "--scoresheet", "scoresheets/serial.yaml"]) == 0
    serial = load_scoresheet(tmp_path / "scoresheets" / "serial.yaml")
    assert serial.locked.robot == "sim" and serial.complete
    assert serial.locked.twin_of is not None and serial.locked.twin_of.real_sheet == str(real.path)
    assert serial.locked.twin_of.real_lock_sha256 == real.lock["sha256"]
    assert serial.locked.policy == real.locked.policy
    assert serial.locked.latency_ms == 31.5                          # the median of what the real arm saw
    assert serial.locked.inference == real.locked.inference
    assert {t.index: (t.dx_cm, t.dy_cm, t.yaw_deg) for t in serial.locked.trials} == STARTS

    assert main(["twin", str(real.path), "--scoresheet", "scoresheets/resumed.yaml", "--max-trials", "1"]) == 0
    assert not load_scoresheet(tmp_path / "scoresheets" / "resumed.yaml").complete
    assert main(["twin", str(real.path), "--scoresheet", "scoresheets/resumed.yaml"]) == 2   # exists: --resume
    capsys.readouterr()
    assert main(["twin", str(real.path), "--scoresheet", "scoresheets/resumed.yaml", "--resume"]) == 0
    assert main(["twin", str(real.path), "--scoresheet", "scoresheets/ray.yaml", "--workers", "2"]) == 0

    def outcomes(sheet: Scoresheet) -> list[tuple[int, str, float | None]]:
        return [(a.trial_index, a.label.value, a.judge.max_lift_cm if a.judge else None) for a in sheet.attempts]

    for name in ("resumed", "ray"):
        other = load_scoresheet(tmp_path / "scoresheets" / f"{name}.yaml")
        assert other.locked.trials == serial.locked.trials and other.locked.twin_of == serial.locked.twin_of
        assert outcomes(other) == outcomes(serial), name

    capsys.readouterr()
    assert main(["report", "--json", "scoresheets/serial.yaml"]) == 0
    import json

    fidelity = json.loads(capsys.readouterr().out)["twin_fidelity"]["twins"][0]
    assert fidelity["real_sheet"] == str(real.path) and fidelity["rehearsal_gap"] == {}
    assert fidelity["paired"] == 2 and fidelity["pending"] == 0
    labels = [a.label for a in serial.attempts]
    assert fidelity["label_agreement"]["k"] == sum(1 for label in labels if label.value == "no_grasp")


def test_the_twins_run_is_built_as_a_request_and_the_line_it_shows_runs_the_same(tmp_path: Path) -> None:
    """The twin hands its run down as a `RunRequest` built from the real sheet (no argument list parsed again);
    the `harness run` line it shows a person asks for exactly that run, flags from its own command included."""
    from harness.app.request import as_request
    from harness.app.twin import plan_twin, twin_request
    from harness.cli import build_parser
    from harness.models.twin_request import TwinRequest

    real = _real_sheet(tmp_path, provenance={"rehearsal": {"gap": {}}})
    args = TwinRequest.from_flags(vars(build_parser().parse_args(
        ["twin", str(real.path), "--workers", "2", "--max-trials", "1", "--runs-dir", str(tmp_path / "runs"),
         "--twins-dir", str(tmp_path / "twins")])))
    plan = plan_twin(args)
    request = twin_request(plan, args)
    assert request.robot.kind == "sim" and request.policies == (real.locked.policy.ref,)
    assert request.workers.count == 2 and request.max_trials == 1
    assert request.latency == 31.5   # the median of what the real attempts saw (31 and 32 ms)
    assert request.provenance == plan.provenance
    shown = as_request(build_parser().parse_args(request.command_line()))
    assert shown.updated(provenance=plan.provenance) == request
    bad = TwinRequest.from_flags(vars(build_parser().parse_args(["twin", str(real.path), "--workers", "0"])))
    with pytest.raises(HarnessInputError, match="--workers"):
        twin_request(plan_twin(bad), bad)
    _nothing_written(tmp_path)


def test_a_chunking_policys_twin_stalls_its_arm_at_each_new_chunk_as_the_paced_arm_stalled(tmp_path: Path) -> None:
    """Under LeRobot's synchronous engine the paced arm waited a whole inference at each new chunk: the twin's arm
    is held that long when its policy computes one (`ChunkLatency`), and the line shown asks for the same."""
    from harness.app.request import as_request
    from harness.app.twin import plan_twin, twin_request
    from harness.cli import build_parser
    from harness.models.run_settings import ChunkLatency
    from harness.models.twin_request import TwinRequest

    real = _real_sheet(tmp_path, chunked=True)
    args = TwinRequest.from_flags(vars(build_parser().parse_args(
        ["twin", str(real.path), "--runs-dir", str(tmp_path / "runs"), "--twins-dir", str(tmp_path / "twins")])))
    plan = plan_twin(args)
    request = twin_request(plan, args)
    # between chunks what the arm saw (31 and 32 ms); at a chunk the policy's time and the step's I/O (473.5 ms)
    assert request.latency == ChunkLatency(step_ms=31.5, chunk_ms=473.5)
    shown = request.command_line()
    assert "--latency-ms=31.5" in shown and "--latency-chunk-ms=473.5" in shown
    assert as_request(build_parser().parse_args(shown)).updated(provenance=plan.provenance) == request
    _nothing_written(tmp_path)
