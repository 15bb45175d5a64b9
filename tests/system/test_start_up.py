"""A real arm's run from its start to the first cube prompt (issue 40): the start-pose move takes the time its
distance needs at a capped joint speed, the check screen is shown while the policy still loads, the first
trial waits for it with nothing moving, and the stop key and a failed load end that wait with torque off and
no scoresheet written."""

from __future__ import annotations

import asyncio
import io
import threading
from dataclasses import dataclass

import numpy as np
import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import Static

from harness.errors import HarnessInputError, RunPaused
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.models.taxonomy import VoidKind
from harness.policies.background import BackgroundPolicy
from harness.run.arm_motion import ArmMotion, MoveSpeed
from harness.run.clock import ManualClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.safety import GuardedRobot
from harness.tui.screens import CheckReport, CheckScreen
from tests.helpers import locked_sheet
from tests.unit.run.test_loop_timing import CostlyPolicy, PersonStage, Scorer, SlowRobot, _live


def _arm_at(clock: ManualClock, pose: dict[str, float]) -> SlowRobot:
    robot = SlowRobot(clock, 0.0, _live)
    robot.position = {f"{n}.pos": pose[n] for n in JOINT_NAMES}
    return robot


def _moved(offsets: dict[str, float]) -> tuple[float, float]:
    """(seconds on the clock, peak joint speed in deg/s) of a paced move to the start pose from `offsets` off it."""
    clock = ManualClock()
    robot = _arm_at(clock, {n: DEFAULT_START_POSE[n] + offsets.get(n, 0.0) for n in JOINT_NAMES})
    sent: list[np.ndarray] = []
    send = robot.send_action

    def recording(action):
        sent.append(np.array([action[f"{n}.pos"] for n in JOINT_NAMES]))
        return send(action)

    robot.send_action = recording
    motion = ArmMotion(GuardedRobot(robot, release=robot.disable_torque), 30, clock, paced=True)
    motion.move_to(dict(DEFAULT_START_POSE), MoveSpeed())
    start = np.array([DEFAULT_START_POSE[n] + offsets.get(n, 0.0) for n in JOINT_NAMES])
    steps = np.diff(np.vstack([start, *sent]), axis=0)
    assert np.allclose(sent[-1], [DEFAULT_START_POSE[n] for n in JOINT_NAMES])
    return clock.now(), float(np.abs(steps[:, :-1]).max()) * 30


def test_the_start_pose_move_takes_the_time_its_distance_needs_at_a_capped_joint_speed() -> None:
    near, _ = _moved({"elbow_flex": 1.0})
    far, far_peak = _moved({"shoulder_lift": 60.0, "elbow_flex": -60.0, "wrist_flex": -70.0})   # the emulator's zeros
    turned, turned_peak = _moved({"shoulder_pan": 150.0})
    assert near == pytest.approx(0.2, abs=0.04)            # an arm at its start pose does not spend 2 s
    assert far == pytest.approx(1.5 * 70 / 90, abs=0.04)   # the farthest joint decides
    assert turned == pytest.approx(1.5 * 150 / 90, abs=0.04)   # longer than the old fixed 2 s: the cap holds
    assert far_peak <= 90 * 1.02 and turned_peak <= 90 * 1.02
    gripper, _ = _moved({"gripper": 60.0})
    assert gripper == pytest.approx(1.5 * 60 / 100, abs=0.04)


class Loads:
    """A policy load that ends when the test says (or fails with `error`)."""

    def __init__(self, clock: ManualClock, error: Exception | None = None) -> None:
        self.go = threading.Event()
        self.error = error
        self.policy = CostlyPolicy(clock, [0.005])
        self.closed = False
        self.policy.close = self._closed   # type: ignore[method-assign]

    def _closed(self) -> None:
        self.closed = True

    def __call__(self) -> CostlyPolicy:
        assert self.go.wait(30)
        if self.error is not None:
            raise self.error
        return self.policy


def _engine(tmp_path, loads: Loads, clock: ManualClock) -> tuple[RunEngine, SlowRobot, BackgroundPolicy, list[str]]:
    robot = _arm_at(clock, {n: 0.0 for n in JOINT_NAMES})
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml").model_copy(update={"episode_time_limit_s": 0.3})
    policy = BackgroundPolicy(loads, "act:tiny")
    ready: list[str] = []
    policy.on_ready(lambda _: ready.append("scoresheet written"))   # what `harness run` does once it has loaded
    options = RunOptions(runs_dir=tmp_path / "runs", paced=True, video=False, evidence_cameras=[],
                         start_pose_s=MoveSpeed(), max_attempts=1)
    guard = GuardedRobot(robot, release=robot.disable_torque)
    return RunEngine(protocol, sheet, guard, policy, PersonStage(), Scorer(), clock, options), robot, policy, ready


@dataclass
class LoadingRun:
    """A run started on its own thread while its policy is still loading (`loads.go` lets the load finish)."""

    loads: Loads
    engine: RunEngine
    robot: SlowRobot
    policy: BackgroundPolicy
    ready: list[str]
    thread: threading.Thread
    raised: list[BaseException]


def _start_while_loading(tmp_path) -> LoadingRun:
    clock = ManualClock()
    loads = Loads(clock)
    engine, robot, policy, ready = _engine(tmp_path, loads, clock)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return LoadingRun(loads, engine, robot, policy, ready, thread, raised)


def test_the_first_trial_waits_for_a_loading_policy_and_nothing_moves_until_it_has(tmp_path) -> None:
    run = _start_while_loading(tmp_path)
    run.thread.join(0.5)
    assert run.thread.is_alive() and not run.policy.loaded
    assert run.robot.position == {f"{n}.pos": 0.0 for n in JOINT_NAMES} and run.ready == []   # nothing moved or written
    run.loads.go.set()
    run.thread.join(30)
    assert not run.raised and run.ready == ["scoresheet written"]
    assert [a.label for a in run.engine.sheet.attempts] == ["no_grasp"]
    assert not run.robot.torque_enabled


def test_an_emergency_stop_while_the_policy_loads_ends_the_wait_with_torque_off_and_no_scoresheet(tmp_path) -> None:
    run = _start_while_loading(tmp_path)
    run.thread.join(0.3)
    run.engine.robot.emergency_stop()
    run.thread.join(5)
    assert not run.thread.is_alive(), "the stop key ends the wait for the policy at once"
    assert isinstance(run.raised[0], RunPaused) and run.raised[0].void.kind is VoidKind.EMERGENCY_STOP
    assert not run.robot.torque_enabled and run.engine.sheet.attempts == [] and run.ready == []
    run.policy.close()          # the run ends while the policy still loads: it is closed once it has
    run.loads.go.set()
    assert run.policy.wait(5) and run.loads.closed
    assert run.ready == [], "a run that ended while its policy loaded writes no scoresheet"


def test_once_the_policy_has_loaded_its_checks_run_while_the_check_screen_waits(tmp_path) -> None:
    """The scoresheet is written and the cameras checked on the loading thread as soon as the policy has loaded,
    not between Enter and the arm's first move (issue 40); a check that fails is the load's error, which the check
    screen shows, and the first trial raises it before anything moves."""
    clock = ManualClock()
    loads = Loads(clock)
    policy = BackgroundPolicy(loads, "act:tiny")
    done: list[str] = []
    policy.on_ready(lambda _: done.append(threading.current_thread().name))
    assert done == []
    loads.go.set()
    assert policy.wait(5) and policy.error is None
    assert done == ["harness-policy-load"]   # nobody has asked for the policy yet
    policy.ready()
    assert done == ["harness-policy-load"]   # once
    policy.on_ready(lambda _: done.append(threading.current_thread().name))   # registered after the load
    policy.ready()
    assert done == ["harness-policy-load", threading.current_thread().name]

    def cameras_missing(_) -> None:
        raise HarnessInputError(None, "--camera", "the policy needs camera(s) ['top'] but the robot has none")

    failing = Loads(clock)
    refused = BackgroundPolicy(failing, "act:tiny")
    refused.on_ready(cameras_missing)
    failing.go.set()
    assert refused.wait(5) and isinstance(refused.error, HarnessInputError)
    with pytest.raises(HarnessInputError, match="needs camera"):
        refused.ready()


def test_a_policy_that_fails_to_load_ends_the_run_before_anything_moves_and_writes_nothing(tmp_path) -> None:
    clock = ManualClock()
    loads = Loads(clock, HarnessInputError(tmp_path / "act", None, "cannot load this policy (OSError: truncated)"))
    loads.go.set()
    engine, robot, _, ready = _engine(tmp_path, loads, clock)
    with pytest.raises(HarnessInputError, match="cannot load this policy"):
        engine.run()
    assert robot.position == {f"{n}.pos": 0.0 for n in JOINT_NAMES} and ready == []
    assert not robot.torque_enabled and engine.sheet.attempts == []


@pytest.mark.slow
def test_the_check_screen_is_shown_while_the_policy_loads_and_follows_it(tmp_path) -> None:
    clock = ManualClock()
    loads = Loads(clock)
    policy = BackgroundPolicy(loads, "act:tiny")
    report = CheckReport(robot="so101 (SO-101 follower)", cameras=[("top", 30.0)], policy=policy.name,
                         policy_warmup_ms=None, locked=locked_sheet(tmp_path).locked, scored=0, voids=0,
                         scoresheet="sheet.yaml", loading=policy)

    class Check(App[None]):
        def on_mount(self) -> None:
            self.push_screen(CheckScreen(report))

    def shown(app: App[None]) -> str:
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(app.screen.query_one("#check", Static).content)
        return console.export_text()

    async def look() -> tuple[str, str]:
        app = Check()
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause(0.3)
            before = shown(app)
            loads.go.set()
            assert policy.wait(5)
            await pilot.pause(1.0)
            after = shown(app)
        return before, after

    before, after = asyncio.run(look())
    assert "loading" in before and "Nothing moves until you press Enter" in before
    assert "loaded in" in after and "loading" not in after
