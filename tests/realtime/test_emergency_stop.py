"""The emergency stop pressed at any instant of a run: the arm stops, torque goes off before the next
step, the trial in flight is recorded as an emergency-stop void (never scored), nothing after it runs,
and the run pauses resumably. Pressed through the simulated arm at many random instants (a property
test), and through the emulated real arm (LeRobot's SO101Follower over the STS3215 emulator) at the
instants that matter on a desk: the start-pose move, placement, the episode, and the scoring prompt."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.sim  # noqa: F401
from harness.app.parts import make_real_robot
from harness.bus import packets as p
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import build_chain, default_scenario
from harness.emulator.servos import ServoChain
from harness.errors import RunPaused
from harness.models.protocol import load_protocol
from harness.models.run_settings import RunSettings
from harness.models.taxonomy import Label, VoidKind
from harness.policies.scripted import ExpertPolicy
from harness.run.clock import MonotonicClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.safety import GuardedRobot
from harness.run.stages import OperatorStage, SimStage
from harness.run.terminal import StopKey, TerminalObserver
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from tests.helpers import locked_sheet
from tests.realtime.test_run_bus_faults import HoldStartPose

pytestmark = pytest.mark.slow   # whole simulated and emulated trials


@dataclass
class Press:
    """Presses the stop at the `at`-th event of a run, and remembers what the run looked like then."""

    at: int
    guard: GuardedRobot | None = None
    sheet: Any = None
    events: list[str] = field(default_factory=list)
    started: int = 0
    pressed_in_flight: bool | None = None
    attempts_at_press: int | None = None
    steps_after_press: int = 0
    sends_after_release: int = 0
    released: threading.Event = field(default_factory=threading.Event)

    def event(self, name: str, in_robot_call: bool = False) -> None:
        self.events.append(name)
        if self.pressed_in_flight is not None:
            if name == "step" and not self.released.is_set():
                self.steps_after_press += 1
            return
        if len(self.events) - 1 != self.at:
            return
        self.attempts_at_press = len(self.sheet.attempts)
        self.pressed_in_flight = self.started > self.attempts_at_press
        if in_robot_call:
            # as a key from the UI thread would: the gate shuts now, torque goes off once the call in flight
            # (past the gate already) has returned the bus
            self.guard.shut_gate()
            threading.Thread(target=self._stop).start()
        else:
            self._stop()

    def _stop(self) -> None:
        self.guard.emergency_stop()
        self.released.set()


class CountingRobot:
    """The simulated arm, with every call an event and every motion command after the release counted."""

    def __init__(self, robot: SimSO101, press: Press) -> None:
        self.robot, self.press = robot, press

    def __getattr__(self, name: str) -> Any:
        return getattr(self.robot, name)

    def get_observation(self) -> dict[str, Any]:
        self.press.event("get_observation", in_robot_call=True)
        return self.robot.get_observation()

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        self.press.event("send_action", in_robot_call=True)
        if self.press.released.is_set():
            self.press.sends_after_release += 1
        return self.robot.send_action(action)


class PressingObserver(TerminalObserver):
    def __init__(self, press: Press) -> None:
        super().__init__(operator_scores=False, out=io.StringIO())
        self.press = press

    def trial_started(self, trial, attempt, done, total) -> None:
        self.press.started += 1
        self.press.event("trial_started")

    def phase(self, name: str) -> None:
        self.press.event(f"phase:{name}")

    def step(self, step, timing) -> None:
        self.press.event("step")

    def score(self, trial, verdict, void):
        self.press.event("score")
        return super().score(trial, verdict, void)

    def trial_scored(self, attempt) -> None:
        self.press.event("trial_scored")


def sim_run(folder: Path, press_at: int) -> tuple[Press, RunEngine, SimSO101, RunPaused | None]:
    press = Press(press_at)
    sheet = locked_sheet(folder)
    protocol = load_protocol(folder / "small.yaml")
    robot = SimSO101(SimSO101Config(render_cameras=[]))
    robot.connect()
    guard = GuardedRobot(CountingRobot(robot, press), release=robot.disable_torque, simulated=robot)
    press.guard, press.sheet = guard, sheet
    engine = RunEngine(protocol, sheet, guard, ExpertPolicy(), SimStage(robot.world, protocol),
                       PressingObserver(press), MonotonicClock(),
                       RunOptions(runs_dir=folder / "runs", video=False, evidence_cameras=[], max_attempts=2))
    press.event("before the run")   # the check screen: pressed before anything moved
    paused = None
    try:
        engine.run()
    except RunPaused as exc:
        paused = exc
    return press, engine, robot, paused


@pytest.fixture(scope="module")
def unpressed(tmp_path_factory) -> list[str]:
    """The events of a whole two-trial run nobody stops: the instants to press at."""
    press, engine, _, paused = sim_run(tmp_path_factory.mktemp("unpressed"), press_at=-1)
    assert paused is None and [a.outcome for a in engine.sheet.attempts] == ["success", "success"]
    return press.events


def _instants(events: list[str]) -> st.SearchStrategy[int]:
    """Any event, with the ones a careless test would miss drawn often: the check screen, placement,
    the first step, the last step of an episode, scoring, and just after a trial was recorded."""
    named = [0]
    for i, name in enumerate(events):
        if name in ("phase:placing cube", "phase:running", "phase:scoring", "score", "trial_scored"):
            named.append(i)
        if name == "step" and (i + 1 == len(events) or events[i + 1] != "get_observation"):
            named.append(i)   # the last step of an episode
        if name == "step" and events[i - 3] == "phase:running":
            named.append(i)
    return st.one_of(st.sampled_from(named), st.integers(0, len(events) - 1))


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_stop_at_any_instant_of_a_simulated_run_voids_the_trial_in_flight(unpressed, tmp_path_factory,
                                                                           data) -> None:
    at = data.draw(_instants(unpressed), label="press at event")
    press, engine, robot, paused = sim_run(tmp_path_factory.mktemp("pressed"), at)
    press.released.wait(5)
    attempts = engine.sheet.attempts
    assert paused is not None and paused.void.kind is VoidKind.EMERGENCY_STOP, f"pressed at {unpressed[at]}"
    assert robot.torque_enabled is False
    assert press.sends_after_release == 0, "a motion command reached the arm after the stop released torque"
    assert press.steps_after_press <= 1, "torque stayed on past the step in flight"
    assert all(a.outcome == Label.SUCCESS for a in attempts[:press.attempts_at_press]), "earlier trials kept"
    if press.pressed_in_flight:
        assert len(attempts) == press.attempts_at_press + 1, f"pressed at {unpressed[at]}"
        assert attempts[-1].outcome == Label.VOID and attempts[-1].void_reason == VoidKind.EMERGENCY_STOP.value
    else:   # between trials: nothing in flight, nothing recorded, nothing started
        assert len(attempts) == press.attempts_at_press
    assert engine.sheet.pending_trials()[0] == len([a for a in attempts if a.outcome != Label.VOID]) + 1


# --- the emulated real arm ------------------------------------------------------------------------------

class StopAtGoal(ServoChain):
    """The arm as wired, with a person pressing the stop (from another thread, as the TUI's key does)
    when the `at`-th goal position arrives; every goal written after torque went off is counted."""

    def __init__(self, servos, at: int, press) -> None:
        super().__init__(servos, None)
        self.at, self.press, self.goals, self.goals_after_release = at, press, 0, 0
        self.released = threading.Event()

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        if packet.code == p.SYNC_WRITE and packet.params[:1] == bytes([p.ADDR_GOAL_POSITION]):
            self.goals += 1
            if self.released.is_set():
                self.goals_after_release += 1
            if self.goals == self.at:
                self.press()
        return super().handle(packet, baud)


class KeyWhileReading(io.StringIO):
    """The operator's terminal: Ctrl+C arrives while the engine waits for a typed score."""

    def __init__(self, stop_key: list[StopKey]) -> None:
        super().__init__("")
        self.stop_key = stop_key

    def readline(self, size: int = -1) -> str:
        self.stop_key[0].press()
        return super().readline(size)


@pytest.mark.parametrize("where", ["start-pose move", "placement", "episode", "scoring"])
def test_a_stop_on_the_emulated_real_arm_voids_the_trial_and_no_goal_follows_it(tmp_path, where) -> None:
    protocol_path = tmp_path / "short.yaml"
    sheet = locked_sheet(tmp_path)
    text = (tmp_path / "small.yaml").read_text().replace("episode_time_limit_s: 12.0", "episode_time_limit_s: 1.0")
    protocol_path.write_text(text)
    protocol = load_protocol(protocol_path)
    stop_key: list[StopKey] = []
    guard_box: list[GuardedRobot] = []

    def release() -> None:
        guard_box[0].emergency_stop()
        chain.released.set()

    def press() -> None:   # the key: the gate shuts at once, torque goes off once the bus is free
        guard_box[0].shut_gate()
        threading.Thread(target=release).start()

    at = {"start-pose move": 20, "episode": 75}.get(where, -1)
    chain = StopAtGoal(build_chain(default_scenario()).servos, at, press)
    placed = (lambda trial: release()) if where == "placement" else (lambda trial: None)
    observer = TerminalObserver(operator_scores=True, out=io.StringIO(), stdin=KeyWhileReading(stop_key))
    with PtyBus(chain) as bus:
        guard = make_real_robot(RunSettings(port=bus.port, robot_id="emulated_follower"), protocol)
        guard_box.append(guard)
        stop_key.append(StopKey(guard, lambda: observer.asking, out=io.StringIO()))
        engine = RunEngine(protocol, sheet, guard, HoldStartPose(protocol.start_pose), OperatorStage(placed),
                           observer, MonotonicClock(),
                           RunOptions(runs_dir=tmp_path / "runs", paced=True, video=False, evidence_cameras=[]))
        try:
            with pytest.raises(RunPaused) as paused:
                engine.run()
            if where == "scoring":
                assert stop_key[0].released.wait(5)
                chain.released.set()
        finally:
            chain.released.wait(5)
            guard.disconnect()
    assert paused.value.void.kind is VoidKind.EMERGENCY_STOP
    assert [(a.trial_index, a.outcome, a.void_reason) for a in sheet.attempts] == [
        (1, Label.VOID, VoidKind.EMERGENCY_STOP.value)]
    assert not any(s.torque_enabled for s in chain.servos)
    assert chain.goals_after_release == 0
    if where in ("start-pose move", "episode"):
        assert chain.goals == at, "not one goal position was written after the key"
    assert sheet.pending_trials()[0] == 1


# --- the stop key in plain mode, as a terminal sends it (SIGINT to the foreground process group) -------

@pytest.mark.parametrize("extra", [["--realtime"], ["--workers", "2"]], ids=["serial", "ray-workers"])
def test_ctrl_c_in_plain_mode_is_the_emergency_stop(tmp_path, extra, harness_cli) -> None:
    import os
    import signal
    import subprocess

    from harness.models.scoresheet import load_scoresheet
    from tests.helpers import small_protocol_copy, wait_until

    protocol = small_protocol_copy(tmp_path)
    sheet = tmp_path / "plain.yaml"
    # --video all: every trial draws its videos while it runs (seconds), so the stop lands while trial 2 is in
    # flight; with the default (failures) a successful trial can end before the stop arrives
    command = ["run", str(protocol), "--headless", "--policy", "expert", "--scoresheet", str(sheet), "--runs-dir",
               str(tmp_path / "runs"), "--video", "all", *extra]
    run = harness_cli.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert run.stdout is not None
    said = []
    for line in run.stdout:   # the first trial is recorded ...
        said.append(line)
        if "trial   1" in line:
            break
    if "--workers" not in extra:   # ... and the second is under way (its evidence folder is being written): Ctrl+C
        assert wait_until(lambda: any((tmp_path / "runs" / "plain").glob("trial-002-a1*")), 60, "trial 2 to start")
    os.killpg(run.pid, signal.SIGINT)
    rest, _ = run.communicate(timeout=120)
    said.append(rest)
    assert run.returncode == 3, "".join(said)
    assert "EMERGENCY STOP: torque released" in rest
    attempts = load_scoresheet(sheet).attempts
    assert attempts[0].outcome == Label.SUCCESS
    # the trial in flight is void (with workers, one or two were in flight; a later one is never recorded)
    assert attempts[-1].void_reason == VoidKind.EMERGENCY_STOP.value
    assert all(a.outcome == Label.SUCCESS for a in attempts[:-1])
