"""The latency model of the simulated arm, exact on a manual clock: actions land N ms of simulated
time after the observation they came from, and the arm executes its last command meanwhile."""

from __future__ import annotations

import itertools

import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.run.clock import ManualClock
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import LatencyModel, SimSO101
from harness.sim.units import to_sim
from harness.sim.world import SimWorld

DT = 1 / 300
PERIOD_STEPS = 10  # physics steps per 30 Hz control period


class CreepingPolicy:
    """Answers from what it sees: the pan joint 2 units beyond where the observation says it is.
    Thinking costs `think_s` on the clock it is given (what `--latency measured` reads)."""

    def __init__(self, clock: ManualClock, think_s: float = 0.0) -> None:
        self.clock = clock
        self.think_s = think_s

    def select_action(self, observation: dict) -> dict[str, float]:
        self.clock.advance(self.think_s)
        action = {f"{n}.pos": observation[f"{n}.pos"] for n in JOINT_NAMES}
        action["shoulder_pan.pos"] += 2.0
        return action


def _robot(latency_ms, clock: ManualClock) -> SimSO101:
    world = SimWorld()
    world.reset((0.22, -0.05), 0.0, DEFAULT_START_POSE)
    world.command_log = []
    robot = SimSO101(SimSO101Config(id="t", render_cameras=[], latency_ms=latency_ms), world=world, clock=clock)
    robot.connect()
    return robot


def _run(robot: SimSO101, policy: CreepingPolicy, steps: int) -> list[tuple[float, float, float]]:
    """(observation time, observed pan, the pan target the action asked for) per step."""
    seen = []
    for _ in range(steps):
        t_obs = robot.world.time
        observation = robot.get_observation()
        action = policy.select_action(observation)
        robot.send_action(action)
        seen.append((t_obs, observation["shoulder_pan.pos"], action["shoulder_pan.pos"]))
    return seen


@pytest.mark.parametrize(("latency_ms", "think_s", "delay_steps"), [
    (100, 0.0, 30),          # 100 ms = 30 physics steps, longer than a 33 ms control period
    (20, 0.0, 6),            # shorter than a period: the next observation still comes a period later
    ("measured", 0.25, 75),  # the policy's own time on the clock: 250 ms
])
def test_each_action_lands_its_latency_after_its_observation(latency_ms, think_s, delay_steps) -> None:
    clock = ManualClock()
    robot = _robot(latency_ms, clock)
    start_t = robot.world.time
    seen = _run(robot, CreepingPolicy(clock, think_s), steps=6)
    log = robot.world.command_log
    assert len(log) == len(seen)
    step_between = max(PERIOD_STEPS, delay_steps)
    for k, ((t_obs, observed, asked), (t_landed, targets)) in enumerate(zip(seen, log, strict=True)):
        assert round((t_obs - start_t) / DT) == k * step_between        # observations, one loop apart
        assert round((t_landed - t_obs) / DT) == delay_steps             # ... and each action lands late
        assert targets[0] == pytest.approx(to_sim("shoulder_pan", asked))  # the action from that observation
        assert asked == pytest.approx(observed + 2.0)
    assert robot.landed_latencies_s == pytest.approx([delay_steps * DT] * 6)
    robot.disconnect()


def test_the_arm_keeps_its_last_command_while_the_policy_thinks() -> None:
    clock = ManualClock()
    robot = _robot(250, clock)
    _run(robot, CreepingPolicy(clock), steps=3)
    log = robot.world.command_log
    # between two commands, nothing else reached the arm for a whole 250 ms
    assert [round((b[0] - a[0]) / DT) for a, b in itertools.pairwise(log)] == [75, 75]
    robot.disconnect()


def test_lock_step_stays_the_default() -> None:
    clock = ManualClock()
    robot = _robot(None, clock)
    assert robot.latency is None
    seen = _run(robot, CreepingPolicy(clock, think_s=0.5), steps=3)  # however slow the policy, no time passes
    assert [round((t - seen[0][0]) / DT) for t, _, _ in seen] == [0, 10, 20]
    assert [round((t - seen[0][0]) / DT) for t, _ in robot.world.command_log] == [0, 10, 20]
    robot.disconnect()


def test_a_bad_latency_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="latency_ms"):
        LatencyModel.from_setting(-5, 30)
    assert LatencyModel.from_setting("measured", 30).describe() == "measured"
    assert LatencyModel.from_setting(50, 30).describe() == "50 ms"


def test_a_chunked_model_lands_computed_actions_after_the_chunk_and_popped_ones_after_the_step() -> None:
    clock = ManualClock()
    robot = _robot({"step_ms": 20, "chunk_ms": 250}, clock)
    assert robot.latency.describe() == "20 ms, 250 ms at each new chunk" and robot.episode_in_commands
    start_t = robot.world.time
    policy = CreepingPolicy(clock, think_s=0.5)   # its time here is not what lands: the real arm's is
    computes = [True, False, False, True, False]
    observed_at = []
    for computed in computes:
        observed_at.append(robot.world.time)
        robot.policy_computes_next(computed)
        robot.send_action(policy.select_action(robot.get_observation()))
    robot.send_action(policy.select_action(robot.get_observation()))   # nobody said it was computed: a step's
    landed = [round((t - t_obs) / DT) for (t, _), t_obs in zip(robot.world.command_log, observed_at, strict=False)]
    assert landed == [75, 6, 6, 75, 6]
    # a stall delays the next observation by the chunk's time, a popped action by one control period
    assert [round((t - start_t) / DT) for t in observed_at] == [0, 75, 85, 95, 170]
    assert robot.landed_latencies_s[-1] == pytest.approx(6 * DT)
    robot.disconnect()


def test_a_fixed_or_measured_model_keeps_the_simulators_clock_for_episodes() -> None:
    clock = ManualClock()
    for setting in (50, "measured"):
        robot = _robot(setting, clock)
        assert not robot.episode_in_commands
        robot.disconnect()
    with pytest.raises(ValueError, match="latency_ms"):
        LatencyModel.from_setting({"step_ms": 20, "chunk_ms": -1}, 30)
