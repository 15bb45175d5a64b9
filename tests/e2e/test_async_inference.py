"""LeRobot's asynchronous inference (`harness run --policy-server HOST:PORT`): the client's queue in simulated
time against a scripted server (exact, with the manual clock), bad input refused before the lock, and
`harness run` against LeRobot's own policy server serving the tiny ACT, stopped mid-trial and resumed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.cli import main
from harness.models.protocol import JOINT_NAMES
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import VoidKind
from harness.policies.inference.async_client import PolicyServerLost, ServerAddress
from harness.policies.inference.async_policy import AsyncServerPolicy, AsyncSettings
from harness.run.clock import ManualClock
from tests.helpers import short_protocol_copy, small_protocol_copy
from tests.policy_server import PolicyServerProcess, free_port
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

FPS = 30
KEYS = [f"{joint}.pos" for joint in JOINT_NAMES]


def _features() -> dict[str, dict]:
    """Imported at first use: lerobot.utils.feature_utils pulls in lerobot.configs (transformers, torchvision)."""
    from lerobot.utils.feature_utils import hw_to_dataset_features

    return hw_to_dataset_features({key: float for key in KEYS}, "observation", use_video=False)


class ScriptedServer:
    """The policy server as the client sees it: a chunk of 10 actions per observation it runs, each action's
    values its timestep plus 100 per chunk already sent, answered after a scripted round trip."""

    def __init__(self, clock: ManualClock, round_trip_s: float, empty: bool = False) -> None:
        self.clock = clock
        self.round_trip_s = round_trip_s
        self.empty = empty
        self.readies = 0
        self.sent: list[Any] = []
        self.ran: list[int] = []

    def ready(self) -> None:
        self.readies += 1

    def send_observation(self, observation: Any) -> None:
        self.sent.append(observation)

    def get_actions(self) -> list[Any] | None:
        self.clock.advance(self.round_trip_s)
        if self.empty:
            return None
        first = self.sent[-1].get_timestep()
        offset = 100.0 * len(self.ran)
        self.ran.append(first)
        from lerobot.async_inference.helpers import TimedAction  # lerobot.policies: 10 s, so at first use

        return [TimedAction(timestamp=0.0, timestep=first + i, action=torch.full((6,), first + i + offset))
                for i in range(10)]

    def close(self) -> None:
        return None


def _policy(server: ScriptedServer, clock: ManualClock, aggregate: str = "weighted_average") -> AsyncServerPolicy:
    settings = AsyncSettings("127.0.0.1:1", actions_per_chunk=10, chunk_size_threshold=0.5, aggregate_fn=aggregate)
    return AsyncServerPolicy(server, settings, "task", FPS, _features(), now=clock.now)


def _observation(value: float) -> dict[str, float]:
    return {key: value for key in KEYS}


def test_a_chunk_reaches_the_arm_its_round_trip_later_and_merges_with_the_queue() -> None:
    """50 ms round trips at 30 Hz land two control steps after their observation: the arm holds for the first
    two steps (underruns), then runs the chunk; the next observation goes at half a chunk, and its chunk is
    merged with LeRobot's weighted average where it overlaps the queue (0.3 old + 0.7 new)."""
    clock = ManualClock()
    server = ScriptedServer(clock, round_trip_s=0.05)
    policy = _policy(server, clock)
    executed = [policy.select_action(_observation(float(step)))["shoulder_pan.pos"] for step in range(12)]
    assert executed[:2] == [0.0, 0.0]                       # holding its present position: nothing has landed
    assert executed[2:9] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [obs.get_timestep() for obs in server.sent] == [0, 4, 8]   # at steps 0, 7 and 11: half a chunk left
    assert [obs.must_go for obs in server.sent] == [True, False, False]
    assert executed[9] == pytest.approx(0.3 * 7 + 0.7 * 107)      # lands at step 9, #7 still queued
    assert executed[10:] == pytest.approx([0.3 * 8 + 0.7 * 108, 0.3 * 9 + 0.7 * 109])
    assert policy.round_trips_ms == pytest.approx([50.0, 50.0, 50.0])   # the third lands at step 13
    assert (policy.queue_underruns, policy.chunk_switches, server.readies) == (2, 2, 1)


def test_the_aggregate_function_is_lerobots_by_name() -> None:
    clock = ManualClock()
    policy = _policy(ScriptedServer(clock, round_trip_s=0.05), clock, aggregate="latest_only")
    executed = [policy.select_action(_observation(float(step)))["shoulder_pan.pos"] for step in range(10)]
    assert executed[9] == 107.0


def test_an_observation_the_server_would_drop_is_sent_but_not_awaited() -> None:
    """An arm that does not move: LeRobot's server drops an observation too like the last one it ran, so the
    queue drains; the observation sent on the empty queue must go, and its chunk lands after the round trip."""
    clock = ManualClock()
    server = ScriptedServer(clock, round_trip_s=0.05)
    policy = _policy(server, clock)
    for _ in range(15):
        policy.select_action(_observation(1.0))
    assert server.ran == [0, 9]
    assert [obs.get_timestep() for obs in server.sent] == [0, 4, 5, 6, 7, 8, 9]
    assert [obs.must_go for obs in server.sent] == [True, False, False, False, False, False, True]
    assert policy.queue_underruns == 4 and policy.round_trips_ms == pytest.approx([50.0, 50.0])


def test_each_trial_is_a_new_episode_for_the_server_told_inside_the_loop() -> None:
    clock = ManualClock()
    server = ScriptedServer(clock, round_trip_s=0.0)
    policy = _policy(server, clock)
    policy.select_action(_observation(0.0))
    policy.reset(None)
    assert server.readies == 1 and policy.round_trips_ms == [] and policy.queue_underruns == 0
    policy.select_action(_observation(0.0))
    assert server.readies == 2 and server.sent[-1].get_timestep() == 0 and server.sent[-1].must_go


def test_no_actions_for_an_observation_the_server_holds_is_a_lost_server() -> None:
    clock = ManualClock()
    policy = _policy(ScriptedServer(clock, round_trip_s=1.0, empty=True), clock)
    with pytest.raises(PolicyServerLost, match="no actions"):
        policy.select_action(_observation(0.0))


@pytest.mark.parametrize(("text", "expected"), [("127.0.0.1:8080", ("127.0.0.1", 8080)),
                                                ("gpu-box:50051", ("gpu-box", 50051)), ("[::1]:9000", ("::1", 9000))])
def test_a_server_address_parses(text: str, expected: tuple[str, int]) -> None:
    address = ServerAddress.parse(text)
    assert (address.host, address.port) == expected and ServerAddress.parse(str(address)) == address


@pytest.mark.parametrize("text", ["localhost", "127.0.0.1:", ":8080", "host:port", "host:70000", "host:0"])
def test_a_bad_server_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|1\.\.65535"):
        ServerAddress.parse(text)


def _run(protocol: Path, folder: Path, *extra: str) -> int:
    return main(["run", str(protocol), "--headless", "--no-video", "--scoresheet", str(folder / "s.yaml"),
                 "--runs-dir", str(folder / "runs"), *extra])


@pytest.mark.parametrize(("extra", "field"), [
    (["--policy-server", "localhost"], "--policy-server"),
    (["--policy-server", f"127.0.0.1:{free_port()}"], "--policy-server"),   # nothing listening
    (["--actions-per-chunk", "10"], "--actions-per-chunk"),                  # without a server
    (["--policy-server", "127.0.0.1:1", "--latency-ms", "100"], "--latency-ms"),
    (["--policy-server", "127.0.0.1:1", "--aggregate-fn", "median"], "--aggregate-fn"),
    (["--policy-server", "127.0.0.1:1", "--chunk-size-threshold", "1.5"], "--chunk-size-threshold"),
    (["--policy-server", "127.0.0.1:1", "--workers", "2"], "--workers"),
    (["--policy-server", f"127.0.0.1:{free_port()}", "--robot", "so101", "--port", "/dev/null"],
     "--policy-server"),                                                     # a real arm: nothing listening
])
def test_bad_async_input_is_one_line_before_anything_is_written(tmp_path: Path, capsys, extra: list[str],
                                                                field: str) -> None:
    protocol = small_protocol_copy(tmp_path)
    policy = save_tiny_act(tmp_path / "tiny_act")
    assert _run(protocol, tmp_path, "--policy", str(policy), *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert not (tmp_path / "s.yaml").exists() and not (tmp_path / "runs").exists()


def _short_protocol(folder: Path, seconds: float = 2.0) -> Path:
    """The small protocol with short episodes: the tiny ACT never grasps, so every trial runs its time out."""
    return short_protocol_copy(folder, seconds)


@pytest.mark.slow
def test_a_run_against_lerobots_policy_server_survives_the_server_stopping(tmp_path: Path, capsys) -> None:
    """The tiny ACT in LeRobot's own policy server: trial 1 completes with what its arm saw; the server is
    killed at trial 2's first inference (the trial is voided as robot I/O, the run pauses, exit 3); a resume
    with the server down is refused in one line, and after restarting it the run completes."""
    protocol = _short_protocol(tmp_path)
    policy = save_tiny_act(tmp_path / "tiny_act")
    server = PolicyServerProcess(free_port(), tmp_path / "server").start()
    try:
        assert _run(protocol, tmp_path, "--policy", str(policy), "--policy-server", server.address,
                    "--actions-per-chunk", "10", "--max-trials", "1") == 0
        sheet = load_scoresheet(tmp_path / "s.yaml")
        inference = sheet.locked.inference
        assert inference is not None and (inference.engine, inference.server, inference.actions_per_chunk,
                                          inference.chunk_size_threshold, inference.aggregate_fn) == (
            "async", server.address, 10, 0.5, "weighted_average")
        loop = sheet.attempts[0].loop
        assert sheet.attempts[0].outcome != "void" and loop.obs_to_action_clock == "wall"
        assert loop.obs_to_action_ms_p50 is not None and 0 < loop.obs_to_action_ms_p50 <= loop.obs_to_action_ms_max
        assert loop.chunk_switches is not None   # how many landed depends on the machine's load
        assert loop.queue_underruns is not None and 1 <= loop.queue_underruns <= loop.steps   # waits for chunk 1

        capsys.readouterr()
        server.kill_after(1)
        assert _run(protocol, tmp_path, "--resume") == 3
        assert "run paused" in capsys.readouterr().err
        voided = load_scoresheet(tmp_path / "s.yaml").attempts[-1]
        assert voided.trial_index == 2 and voided.outcome == "void"
        assert voided.void_reason is not None and voided.void_reason.startswith(VoidKind.ROBOT_IO_ERROR.value)
        assert "policy server" in voided.void_reason and server.address in voided.void_reason

        before = (tmp_path / "s.yaml").read_bytes()
        assert _run(protocol, tmp_path, "--resume") == 2       # still down: one line, nothing written
        assert "--policy-server" in capsys.readouterr().err
        assert (tmp_path / "s.yaml").read_bytes() == before

        server = PolicyServerProcess(server.port, tmp_path / "server").start()
        assert _run(protocol, tmp_path, "--resume") == 0
        sheet = load_scoresheet(tmp_path / "s.yaml")
        assert sheet.complete and [a.trial_index for a in sheet.attempts] == [1, 2, 2, 3]
        assert all(a.loop.obs_to_action_ms_p50 is not None for a in sheet.scored_attempts())
    finally:
        server.stop()


def _async_sheet(folder: Path, server: str = "127.0.0.1:50051") -> Path:
    """A sheet locked for asynchronous inference, as `harness run --policy-server` locks one."""
    from harness.models.protocol import load_protocol
    from harness.models.scoresheet import build_locked, lock_scoresheet

    protocol_path = small_protocol_copy(folder)
    policy = save_tiny_act(folder / "tiny_act")
    block = {"engine": "async", "server": server, "actions_per_chunk": 10, "chunk_size_threshold": 0.5,
             "aggregate_fn": "weighted_average"}
    locked = build_locked(load_protocol(protocol_path), protocol_path, str(policy), "sim",
                          {"latency_ms": None, "inference": block})
    lock_scoresheet(folder / "s.yaml", locked, {"cameras": {}, "rename_map": {}, "latency_ms": None,
                                                "inference": dict(block)})
    return protocol_path


@pytest.mark.parametrize(("extra", "named"), [
    (["--policy-server", "127.0.0.1:50052"], "--policy-server"),
    (["--actions-per-chunk", "5"], "--actions-per-chunk"),
    (["--chunk-size-threshold", "0.8"], "--chunk-size-threshold"),
    (["--aggregate-fn", "latest_only"], "--aggregate-fn"),
    (["--inference", "sync"], "inference engine"),
    (["--latency-ms", "100"], "latency"),
])
def test_a_resume_asking_for_another_server_or_queue_setting_is_refused(tmp_path: Path, capsys, extra: list[str],
                                                                        named: str) -> None:
    protocol = _async_sheet(tmp_path)
    before = (tmp_path / "s.yaml").read_bytes()
    assert _run(protocol, tmp_path, "--resume", *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("locked.inference" in err[0] or "locked.latency_ms" in err[0])
    assert named in err[0]
    assert (tmp_path / "s.yaml").read_bytes() == before and not (tmp_path / "runs").exists()


def test_a_resume_uses_the_locked_server_whatever_the_settings_say(tmp_path: Path, capsys) -> None:
    """Settings edited by hand to point elsewhere: the resume still asks the locked server (here, nobody)."""
    dead = f"127.0.0.1:{free_port()}"
    protocol = _async_sheet(tmp_path, server=dead)
    path = tmp_path / "s.yaml"
    text = path.read_text()
    settings_at = text.index("settings:")
    path.write_text(text[:settings_at] + text[settings_at:].replace(dead, "127.0.0.1:1", 1))
    assert _run(protocol, tmp_path, "--resume") == 2
    assert f"nothing answers at {dead}" in capsys.readouterr().err


def test_the_report_says_the_run_was_scored_with_the_servers_round_trips(tmp_path: Path) -> None:
    from harness.reports.latency import latency_text

    _async_sheet(tmp_path)
    text = latency_text(load_scoresheet(tmp_path / "s.yaml"))
    assert "round trip to LeRobot's policy server at 127.0.0.1:50051" in text
    assert "10 actions per chunk" in text and "weighted_average" in text and "locked" in text
