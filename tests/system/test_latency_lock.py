"""The latency model and the inference engine are locked with the run; each trial records what the arm
experienced (observation-to-action latency, queue underruns, chunk switches); older sheets still verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import StaleRunError
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
from harness.models.sheet_records import LoopStats
from tests.helpers import fake_attempt, small_protocol_copy
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def _run(protocol: Path, tmp_path: Path, *extra: str) -> int:
    return main(["run", str(protocol), "--headless", "--no-video", "--scoresheet", str(tmp_path / "s.yaml"),
                 "--runs-dir", str(tmp_path / "runs"), *extra])


def _edit(path: Path, old: str, new: str) -> None:
    """Edit a sheet's text by hand, as someone tampering with it would."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.slow
def test_a_new_sheet_locks_its_latency_and_engine(tmp_path: Path) -> None:
    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--latency-ms", "100", "--max-trials", "1") == 0
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert sheet.locked.latency_ms == 100.0 and sheet.latency_ms == 100.0
    assert sheet.locked.inference is not None and sheet.inference_engine == "sync"
    assert {"latency_ms", "inference"} <= set(sheet.lock["field_sha256"])


def test_a_sheet_without_the_new_fields_still_verifies(tmp_path: Path) -> None:
    """A sheet locked before latency was: it hashes as it did, and its settings still say the latency."""
    protocol_path = small_protocol_copy(tmp_path)
    locked = build_locked(load_protocol(protocol_path), protocol_path, "expert", "sim")
    sheet = lock_scoresheet(tmp_path / "old.yaml", locked, {"latency_ms": 50.0})
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    again = load_scoresheet(tmp_path / "old.yaml")
    assert "latency_ms" not in again.locked_data and again.latency_ms == 50.0 and again.inference_engine == "sync"
    assert again.attempts[0].loop == LoopStats()


@pytest.mark.slow
def test_a_locked_latency_edited_by_hand_is_caught(tmp_path: Path) -> None:
    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--latency-ms", "250", "--max-trials", "1") == 0
    _edit(tmp_path / "s.yaml", '"latency_ms": 250.0,\n    "inference"', '"latency_ms": 125.0,\n    "inference"')
    with pytest.raises(StaleRunError) as caught:
        load_scoresheet(tmp_path / "s.yaml")
    assert caught.value.field == "locked.latency_ms"


@pytest.mark.slow
def test_a_locked_latency_removed_by_hand_is_caught(tmp_path: Path) -> None:
    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--latency-ms", "250", "--max-trials", "1") == 0
    _edit(tmp_path / "s.yaml", '"latency_ms": 250.0,\n    "inference"', '"inference"')
    with pytest.raises(StaleRunError) as caught:
        load_scoresheet(tmp_path / "s.yaml")
    assert caught.value.field == "locked.latency_ms"


@pytest.mark.slow
def test_a_resume_with_another_latency_or_engine_is_refused(tmp_path: Path, capsys) -> None:
    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--latency-ms", "100", "--max-trials", "1") == 0
    before = (tmp_path / "s.yaml").read_bytes()
    capsys.readouterr()
    assert _run(protocol, tmp_path, "--resume", "--latency-ms", "50") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "locked.latency_ms" in err[0] and "100 ms" in err[0]
    assert _run(protocol, tmp_path, "--resume", "--latency", "measured") == 2
    assert _run(protocol, tmp_path, "--resume", "--inference", "rtc") == 2
    assert "locked.inference" in capsys.readouterr().err
    assert (tmp_path / "s.yaml").read_bytes() == before
    assert _run(protocol, tmp_path, "--resume", "--max-trials", "1") == 0   # not asking keeps the locked latency
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert [a.loop.obs_to_action_ms_p50 for a in sheet.attempts] == [100.0, 100.0]


@pytest.mark.slow
def test_each_trial_records_what_the_arm_experienced(tmp_path: Path) -> None:
    """100 ms of simulated latency at 30 Hz: every action lands 100 ms after its observation, three control
    periods late; lock-step: at once, never late."""
    protocol = small_protocol_copy(tmp_path)
    assert _run(protocol, tmp_path, "--latency-ms", "100", "--max-trials", "1") == 0
    loop = load_scoresheet(tmp_path / "s.yaml").attempts[0].loop
    assert (loop.obs_to_action_ms_p50, loop.obs_to_action_ms_p95, loop.obs_to_action_ms_max) == (100.0, 100.0, 100.0)
    assert loop.obs_to_action_clock == "simulated"
    assert loop.queue_underruns == loop.steps > 0
    assert loop.chunk_switches is None   # the expert is not a chunked policy

    lock_step = tmp_path / "lock_step"
    lock_step.mkdir()
    assert _run(protocol, lock_step, "--max-trials", "1") == 0
    sheet = load_scoresheet(lock_step / "s.yaml")
    loop = sheet.attempts[0].loop
    assert sheet.locked.latency_ms is None and "latency_ms" in sheet.locked_data   # lock-step, said so
    assert (loop.obs_to_action_ms_p50, loop.obs_to_action_ms_max, loop.queue_underruns) == (0.0, 0.0, 0)


def test_rtc_is_refused_for_a_policy_without_it_before_anything_is_written(tmp_path: Path, capsys) -> None:
    """ACT has no Real-Time Chunking (LeRobot's `supports_rtc()` is False): one line, exit 2, no sheet."""
    protocol = small_protocol_copy(tmp_path)
    ckpt = save_tiny_act(tmp_path / "tiny_act")
    assert _run(protocol, tmp_path, "--policy", str(ckpt), "--inference", "rtc") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--inference" in err[0] and "Real-Time Chunking" in err[0]
    assert not (tmp_path / "s.yaml").exists() and not (tmp_path / "runs").exists()
    assert _run(protocol, tmp_path, "--inference", "rtc") == 2   # nor has the built-in expert
    assert not (tmp_path / "s.yaml").exists()


def test_a_chunked_policy_counts_the_chunks_it_starts(tmp_path: Path) -> None:
    """The tiny ACT executes 10 actions per chunk: 25 steps start 3 chunks; a new trial counts afresh."""
    import numpy as np

    from harness.models.protocol import JOINT_NAMES
    from harness.policies.lerobot_policy import LeRobotPolicy

    policy = LeRobotPolicy(save_tiny_act(tmp_path / "tiny_act"), task="t", device="cpu")
    observation = {**{f"{n}.pos": 0.0 for n in JOINT_NAMES}, "top": np.zeros((96, 128, 3), dtype=np.uint8)}
    try:
        for _ in range(25):
            policy.select_action(observation)
        assert policy.chunk_switches == 3
        policy.reset(None)
        policy.select_action(observation)
        assert policy.chunk_switches == 1
    finally:
        policy.close()


@pytest.mark.slow
def test_a_chunked_latency_holds_the_arm_at_each_new_chunk_and_counts_the_episode_in_commands(
        tmp_path: Path, capsys) -> None:
    """`--latency-chunk-ms`: the tiny ACT computes a chunk of 10 every tenth step; each of those actions lands 200 ms
    after its observation (a stall), the others 5 ms; the episode is the protocol's 12 s x 30 commands, as a paced
    arm's is, however long the stalls make it in simulated time. Locked; another one is refused, as is a chunk's
    latency over measured steps."""
    protocol = small_protocol_copy(tmp_path)
    ckpt = save_tiny_act(tmp_path / "tiny_act")
    chunked = ("--policy", str(ckpt), "--latency-ms", "5", "--latency-chunk-ms", "200")
    assert _run(protocol, tmp_path, *chunked, "--max-trials", "1") == 0
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert sheet.locked_data["latency_ms"] == {"step_ms": 5.0, "chunk_ms": 200.0}
    loop = sheet.attempts[0].loop
    assert loop.steps == 360 and loop.chunk_switches == 36 and loop.queue_underruns == 36
    assert (loop.obs_to_action_ms_p50, loop.obs_to_action_ms_max) == pytest.approx((6.667, 200.0), abs=3.4)
    assert loop.episode_s == pytest.approx(36 * 0.2 + 324 / 30, abs=36 / 300)   # a physics step's rounding a stall
    capsys.readouterr()
    assert _run(protocol, tmp_path, "--resume", "--policy", str(ckpt), "--latency-chunk-ms", "100") == 2
    assert "5 ms, 200 ms at each new chunk" in capsys.readouterr().err
    other = tmp_path / "measured"
    other.mkdir()
    assert _run(protocol, other, "--policy", str(ckpt), "--latency-chunk-ms", "200", "--latency", "measured") == 2
    assert "--latency-chunk-ms" in capsys.readouterr().err and not (other / "s.yaml").exists()
