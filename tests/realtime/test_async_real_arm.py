"""LeRobot's asynchronous inference on a real arm (`harness run --robot so101 --policy-server HOST:PORT`): the
action queue in wall time, as LeRobot's `RobotClient` runs it, against a scripted server (exact, with the manual
clock and the receiver driven step by step; then on its own thread), and `harness run` on the emulated arm with
simulated cameras against LeRobot's own policy server serving the tiny ACT."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.emulator.scenario import default_scenario, open_rig
from harness.models.protocol import JOINT_NAMES
from harness.policies.inference.async_client import PolicyServerLost
from harness.policies.inference.async_policy import AsyncSettings
from harness.policies.inference.async_wall import WallClockAsyncPolicy
from harness.run.clock import ManualClock
from tests.lerobot_tool import LeRobotTool
from tests.policy_server import PolicyServerProcess, free_port
from tests.realtime.test_real_arm_path import PLACE, TWO_TRIALS

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

PERIOD = 1 / 30
KEYS = [f"{joint}.pos" for joint in JOINT_NAMES]
SETTINGS = AsyncSettings("127.0.0.1:1", actions_per_chunk=10, chunk_size_threshold=0.5,
                         aggregate_fn="weighted_average")


def _chunk(first: int, offset: float) -> list[Any]:
    from lerobot.async_inference.helpers import TimedAction  # lerobot.policies: 10 s, so at first use

    return [TimedAction(timestamp=0.0, timestep=first + i, action=torch.full((6,), first + i + offset))
            for i in range(10)]


class HeldObservationServer:
    """LeRobot's server as the wall-time client sees it: it holds the latest observation sent, and `GetActions`
    answers a chunk of 10 for it (each action's values its timestep plus 100 per chunk already sent), or
    `Empty` when it holds none."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.held: Any | None = None
        self.chunks = 0
        self.readies = 0

    def ready(self) -> None:
        self.readies += 1

    def send_observation(self, observation: Any) -> None:
        self.sent.append(observation)
        self.held = observation

    def get_actions(self) -> list[Any] | None:
        if self.held is None:
            return None
        chunk = _chunk(self.held.get_timestep(), 100.0 * self.chunks)
        self.held = None
        self.chunks += 1
        return chunk

    def cancel(self) -> None:
        return None

    def close(self) -> None:
        return None


def _observation(value: float) -> dict[str, float]:
    return {key: value for key in KEYS}


def _stepped(clock: ManualClock, server: HeldObservationServer, answer_timeout_s: float = 10.0
             ) -> WallClockAsyncPolicy:
    return WallClockAsyncPolicy(server, SETTINGS, "task", now=clock.now, answer_timeout_s=answer_timeout_s,
                                threaded=False)


def test_a_chunk_joins_the_queue_when_it_arrives_and_its_latency_is_wall_time() -> None:
    """The arm holds its present position until the first chunk arrives (underruns), observations going every
    step meanwhile, the first must-go; the chunk lands between steps 1 and 2 and its latency counts from the
    first observation of its timestep (two periods). At half a chunk the next observations go; the server runs
    the latest, whose chunk lands one period after it and is merged with LeRobot's weighted average."""
    clock = ManualClock()
    server = HeldObservationServer()
    policy = _stepped(clock, server)
    executed = []
    for step in range(9):
        if step in (2, 8):
            assert policy.receive_once()
        executed.append(policy.select_action(_observation(-1.0))["shoulder_pan.pos"])
        clock.advance(PERIOD)
    assert executed[:2] == [-1.0, -1.0]
    assert executed[2:8] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert executed[8] == pytest.approx(0.3 * 6 + 0.7 * 106)
    assert [obs.get_timestep() for obs in server.sent] == [0, 0, 4, 5]
    assert [obs.must_go for obs in server.sent] == [True, False, False, False]
    assert policy.round_trips_ms == pytest.approx([2000 * PERIOD, 1000 * PERIOD])
    assert (policy.queue_underruns, policy.chunk_switches, server.readies) == (2, 2, 1)


def test_an_empty_queue_holds_the_last_command_and_sends_one_must_go_observation() -> None:
    clock = ManualClock()
    server = HeldObservationServer()
    policy = _stepped(clock, server)
    policy.select_action(_observation(-1.0))
    assert policy.receive_once()
    executed = [policy.select_action(_observation(-1.0))["shoulder_pan.pos"] for _ in range(14)]
    assert executed[:10] == [float(v) for v in range(10)]
    assert executed[10:] == [9.0] * 4                           # the last command, held
    assert policy.queue_underruns == 1 + 4
    must_go = [obs.get_timestep() for obs in server.sent if obs.must_go]
    assert must_go == [0, 9]                                   # once at the start, once when the queue ran dry


def test_no_chunk_within_the_answer_timeout_of_a_must_go_observation_is_a_lost_server() -> None:
    clock = ManualClock()
    policy = _stepped(clock, HeldObservationServer(), answer_timeout_s=0.5)
    for _ in range(15):      # 0.5 s of steps: still waiting, the arm holding
        policy.select_action(_observation(0.0))
        clock.advance(PERIOD)
    clock.advance(0.05)
    with pytest.raises(PolicyServerLost, match=r"no actions within 0.5 s of observation #0, which it must run"):
        policy.select_action(_observation(0.0))


def test_a_new_episode_forgets_the_queue_and_tells_the_server() -> None:
    clock = ManualClock()
    server = HeldObservationServer()
    policy = _stepped(clock, server)
    policy.select_action(_observation(0.0))
    policy.receive_once()
    policy.select_action(_observation(0.0))
    policy.reset(None)
    assert (policy.round_trips_ms, policy.queue_underruns, policy.chunk_switches) == ([], 0, 0)
    assert policy.select_action(_observation(7.0))["shoulder_pan.pos"] == 7.0
    assert server.readies == 2 and server.sent[-1].get_timestep() == 0 and server.sent[-1].must_go


class BlockingServer(HeldObservationServer):
    """The same server answering on the receiver thread: `GetActions` waits for an observation (as LeRobot's
    server waits on its queue), until cancelled; `lose_on_call` makes that call fail as a lost server."""

    def __init__(self, lose_on_call: int | None = None) -> None:
        super().__init__()
        self.cond = threading.Condition()
        self.calls = 0
        self.cancels = 0
        self.lose_on_call = lose_on_call
        self.waiting_again = threading.Event()   # a second call began: the first chunk is merged
        self.failed = threading.Event()

    def send_observation(self, observation: Any) -> None:
        with self.cond:
            super().send_observation(observation)
            self.cond.notify_all()

    def get_actions(self) -> list[Any] | None:
        with self.cond:
            self.calls += 1
            if self.calls == 2:
                self.waiting_again.set()
            if self.calls == self.lose_on_call:
                self.failed.set()
                raise PolicyServerLost("policy server 127.0.0.1:1 stopped answering (GetActions UNAVAILABLE: gone)")
            cancels = self.cancels
            self.cond.wait_for(lambda: self.held is not None or self.cancels != cancels, timeout=10)
            return super().get_actions()

    def cancel(self) -> None:
        with self.cond:
            self.cancels += 1
            self.cond.notify_all()


def _receivers() -> list[threading.Thread]:
    """The episode's helper threads: the receiver and the sender."""
    return [t for t in threading.enumerate() if t.name.startswith("async-inference-")]


def test_the_receiver_thread_merges_chunks_as_they_arrive_and_is_joined_when_the_episode_ends() -> None:
    server = BlockingServer()
    policy = WallClockAsyncPolicy(server, SETTINGS, "task", now=ManualClock().now)
    assert _receivers() == []
    policy.select_action(_observation(-1.0))          # the episode's first step starts the receiver and sender
    assert len(_receivers()) == 2
    assert server.waiting_again.wait(10)              # chunk 1 merged on the receiver thread
    assert policy.select_action(_observation(-1.0))["shoulder_pan.pos"] == 0.0
    policy.end_episode()
    assert _receivers() == [] and server.cancels >= 1
    policy.close()


def test_a_server_lost_on_the_receiver_thread_stops_the_next_control_step() -> None:
    server = BlockingServer(lose_on_call=2)
    policy = WallClockAsyncPolicy(server, SETTINGS, "task", now=ManualClock().now)
    policy.select_action(_observation(-1.0))
    assert server.failed.wait(10)
    deadline = time.monotonic() + 10
    with pytest.raises(PolicyServerLost, match="stopped answering"):
        while time.monotonic() < deadline:     # the control loop's next steps, until the failure reaches it
            policy.select_action(_observation(-1.0))
    policy.close()
    assert _receivers() == []


@pytest.mark.slow
def test_a_real_arm_run_against_lerobots_policy_server_in_wall_time(tmp_path: Path, harness_cli) -> None:
    """`harness run --robot so101 --policy-server` as a person runs it: the emulated arm with simulated cameras,
    LeRobot's policy server serving the tiny ACT on 127.0.0.1, the operator placing the cube and scoring; each
    attempt records what its paced arm saw in wall time, and torque is off at the end."""
    from harness.models.scoresheet import load_scoresheet
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(tmp_path / "act")          # reads `top` at 128x96, 10 actions a chunk
    protocol = tmp_path / "desk.yaml"
    protocol.write_text(TWO_TRIALS)
    socket = tmp_path / "cams.sock"
    server = PolicyServerProcess(free_port(), tmp_path / "server").start()
    try:
        with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
            tool = LeRobotTool("harness.cli", ["run", str(protocol), "--robot", "so101", "--port", rig.port,
                                               "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                               "--camera", f"top=sim:{socket}@128x96", "--headless",
                                               "--policy-server", server.address], tmp_path,
                               harness_cli=harness_cli)
            for _ in range(2):
                tool.expect("Place the cube at dx", timeout_s=180)
                tool.expect("then press Enter.")
                dx, dy, yaw = (float(v) for v in PLACE.findall(tool.output)[-1])
                rig.place_cube(dx, dy, yaw)                   # the operator's hands
                tool.send()
                tool.expect("Score:", timeout_s=120)
                tool.send("n")                                # the policy holds still: no grasp
                tool.expect("Note (optional)")
                tool.send("")
            assert tool.finish() == 0, tool.output[-3000:]
            assert not any(s.torque_enabled for s in rig.chain.servos)
    finally:
        server.stop()
    sheet = load_scoresheet(tmp_path / "scoresheets" / "desk-act.yaml")
    assert sheet.locked.inference is not None and sheet.locked.inference.engine == "async"
    assert [a.label for a in sheet.attempts] == ["no_grasp", "no_grasp"]
    for attempt in sheet.attempts:
        loop = attempt.loop
        assert loop.steps >= 60 and loop.realtime is not None               # ~3 s of the paced 30 Hz loop
        assert loop.obs_to_action_clock == "wall"
        assert loop.obs_to_action_ms_p50 is not None and 0 < loop.obs_to_action_ms_p50 <= loop.obs_to_action_ms_max
        assert loop.chunk_switches is not None and loop.chunk_switches >= 1
        assert loop.queue_underruns is not None and 1 <= loop.queue_underruns <= loop.steps   # waits for chunk 1


def test_the_report_says_a_real_arms_round_trips_were_wall_time(tmp_path: Path) -> None:
    from harness.models.protocol import load_protocol
    from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
    from harness.reports.latency import latency_text
    from tests.helpers import small_protocol_copy
    from tests.tiny_policy import save_tiny_act

    protocol_path = small_protocol_copy(tmp_path)
    block = {"engine": "async", "server": "gpu-box:8080", "actions_per_chunk": 10, "chunk_size_threshold": 0.5,
             "aggregate_fn": "weighted_average"}
    locked = build_locked(load_protocol(protocol_path), protocol_path, str(save_tiny_act(tmp_path / "act")), "so101",
                          {"latency_ms": None, "inference": block})
    lock_scoresheet(tmp_path / "s.yaml", locked, {"cameras": {}, "rename_map": {}, "latency_ms": None,
                                                  "inference": dict(block)})
    text = latency_text(load_scoresheet(tmp_path / "s.yaml"))
    assert "policy server at gpu-box:8080, as the arm waited, in wall time" in text
    assert "simulated" not in text


@pytest.mark.slow
def test_a_policy_server_lost_mid_trial_on_a_real_arm_voids_it_and_releases_the_arm(tmp_path: Path,
                                                                                     harness_cli) -> None:
    """LeRobot's server dies at the trial's first inference: no chunk ever reaches the emulated arm, which held
    its position meanwhile; the trial is voided as robot I/O naming the server, the run pauses (exit 3) and
    torque is off."""
    from harness.models.scoresheet import load_scoresheet
    from harness.models.taxonomy import VoidKind
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(tmp_path / "act")
    protocol = tmp_path / "desk.yaml"
    protocol.write_text(TWO_TRIALS.split("- {index: 2")[0])
    socket = tmp_path / "cams.sock"
    server = PolicyServerProcess(free_port(), tmp_path / "server").start()
    try:
        with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
            tool = LeRobotTool("harness.cli", ["run", str(protocol), "--robot", "so101", "--port", rig.port,
                                               "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                               "--camera", f"top=sim:{socket}@128x96", "--headless", "--no-video",
                                               "--policy-server", server.address], tmp_path,
                               harness_cli=harness_cli)
            tool.expect("Place the cube at dx", timeout_s=180)
            tool.expect("then press Enter.")
            dx, dy, yaw = (float(v) for v in PLACE.findall(tool.output)[-1])
            rig.place_cube(dx, dy, yaw)
            server.kill_after(1)
            tool.send()
            assert tool.finish() == 3, tool.output[-3000:]
            assert "Restart the policy server, then resume" in tool.output and "run paused" in tool.output
            assert not any(s.torque_enabled for s in rig.chain.servos)
    finally:
        server.stop()
    voided = load_scoresheet(tmp_path / "scoresheets" / "desk-act.yaml").attempts[-1]
    assert voided.outcome == "void" and voided.void_reason is not None
    assert voided.void_reason.startswith(VoidKind.ROBOT_IO_ERROR.value)
    assert "policy server" in voided.void_reason and server.address in voided.void_reason
    assert voided.loop.chunk_switches == 0 and voided.loop.queue_underruns == voided.loop.steps >= 1
