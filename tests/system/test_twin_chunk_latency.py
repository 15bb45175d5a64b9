"""The twin of a chunking policy's paced run: the real arm stalls for a whole inference at each new chunk, and the
twin's arm, given the latency the real loop recorded (`app.twin.latency_seen`), stalls as often and gets its commands
at the same rate. On manual clocks: the real policy's inference costs time on the paced loop's clock, nothing sleeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.app.twin import latency_seen
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import load_protocol
from harness.models.run_settings import ChunkLatency, InferenceEngine
from harness.models.sheet_records import LoopStats
from harness.policies.base import BasePolicy, InferenceStats
from harness.run.arm_motion import ArmMotion
from harness.run.clock import ManualClock
from harness.run.control_loop import ControlLoop, LoopSettings
from harness.run.evidence import EvidenceRecorder, VideoMode
from harness.run.safety import GuardedRobot
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from harness.sim.world import SimWorld
from tests.helpers import REPO
from tests.unit.run.test_control_loop import _episode
from tests.unit.run.test_loop_timing import PersonStage, Scorer, SlowRobot

EPISODE_S = 4.0
RATE_TOLERANCE = 0.02   # the arm's command rate, twin against real: within 2 %


class ChunkingPolicy(BasePolicy):
    """LeRobot's synchronous chunking in miniature: a chunk of `n` actions computed when the queue runs out, which
    costs `infer_s` on its clock, then the queued actions popped at `pop_s` each."""

    name = "chunking"
    camera_keys: tuple[str, ...] = ()

    def __init__(self, clock: ManualClock, n: int = 10, infer_s: float = 0.45, pop_s: float = 0.001) -> None:
        self.clock, self.n, self.infer_s, self.pop_s = clock, n, infer_s, pop_s
        self.queued, self.switches, self.inference_ms = 0, 0, []

    def reset(self, context) -> None:
        self.queued, self.switches, self.inference_ms = 0, 0, []

    def computes_next(self) -> bool:
        return self.queued == 0

    def select_action(self, observation):
        if self.queued == 0:
            self.clock.advance(self.infer_s)
            self.queued, self.switches = self.n, self.switches + 1
            self.inference_ms.append(1000 * self.infer_s)
        else:
            self.clock.advance(self.pop_s)
        self.queued -= 1
        return {k: v for k, v in observation.items() if k.endswith(".pos")}

    def inference_stats(self) -> InferenceStats:
        return InferenceStats(chunk_switches=self.switches, inference_ms=tuple(self.inference_ms))

    def close(self) -> None:
        pass


class WorldStage(PersonStage):
    def __init__(self, world: SimWorld) -> None:
        self.world = world

    def may_freeze_camera(self, trial) -> bool:
        return False


def _real(tmp_path: Path) -> LoopStats:
    """The paced real arm's episode: 4.5 ms of I/O a step, the policy's chunks at 450 ms."""
    clock = ManualClock()
    episode, loop, _ = _episode(tmp_path, SlowRobot(clock, 0.0045, lambda call: None), ChunkingPolicy(clock),
                                seconds=EPISODE_S, paced=True)
    return loop.stats(episode)


def _twin(tmp_path: Path, latency: float | ChunkLatency) -> LoopStats:
    """The same policy on the simulated arm, lock-step, with `latency` (its compute time here costs nothing)."""
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml").model_copy(
        update={"episode_time_limit_s": EPISODE_S})
    world = SimWorld()
    world.reset((0.22, -0.05), 0.0, DEFAULT_START_POSE)
    setting = latency.model_dump() if isinstance(latency, ChunkLatency) else latency
    robot = SimSO101(SimSO101Config(id="twin", render_cameras=[], latency_ms=setting), world=world)
    robot.connect()
    guard = GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    clock = ManualClock()
    loop = ControlLoop(protocol, guard, ChunkingPolicy(ManualClock()), WorldStage(world), Scorer(), clock,
                       LoopSettings(paced=False, evidence_cameras=[]), ArmMotion(guard, protocol.fps, clock, False))
    recorder = EvidenceRecorder(tmp_path / "twin", [], lambda cam, w, h: None, protocol.fps, video=VideoMode.NONE)
    try:
        return loop.stats(loop.run(protocol.trials[0], recorder))
    finally:
        robot.disconnect()


def _rate(loop: LoopStats) -> float:
    """Commands a second on the arm's clock, stalls included."""
    assert loop.episode_s is not None
    return loop.steps / loop.episode_s


def test_the_twin_of_a_paced_chunking_run_stalls_as_often_and_gets_its_commands_at_the_same_rate(tmp_path) -> None:
    real = _real(tmp_path)
    assert real.steps == 120 and real.chunk_switches == 12 and real.queue_underruns == 12   # a stall each chunk
    assert _rate(real) < 15   # of the 30 asked: 108 commands at the period, 12 after 450 ms stalls

    latency = latency_seen([real], InferenceEngine.SYNC)
    assert latency == ChunkLatency(step_ms=5.5, chunk_ms=454.5)   # a pop's time; a chunk's, with the step's I/O
    twin = _twin(tmp_path, latency)
    assert (twin.steps, twin.chunk_switches, twin.queue_underruns) == (real.steps, 12, 12)
    assert twin.obs_to_action_clock == "simulated" and twin.obs_to_action_ms_max == pytest.approx(454.5, abs=3.4)
    assert _rate(twin) == pytest.approx(_rate(real), rel=RATE_TOLERANCE)

    # one number a step (the old twin's model) lets the arm run through every chunk without a stall
    single = _twin(tmp_path, latency.step_ms)
    assert single.queue_underruns == 0 and _rate(single) == pytest.approx(30.0, rel=RATE_TOLERANCE)


@pytest.mark.parametrize(("loop", "engine", "expected"), [
    (LoopStats(steps=450, obs_to_action_ms_p50=19.9, obs_to_action_clock="wall", chunk_switches=45,
               inference_ms_p50=470.0, robot_io_ms_p50=10.0), InferenceEngine.SYNC,
     ChunkLatency(step_ms=19.9, chunk_ms=480.0)),
    (LoopStats(steps=450, obs_to_action_ms_p50=19.9, obs_to_action_clock="wall", chunk_switches=45,
               inference_ms_p50=470.0, robot_io_ms_p50=10.0), InferenceEngine.RTC, 19.9),   # chunks beside the loop
    (LoopStats(steps=450, obs_to_action_ms_p50=19.9, obs_to_action_clock="wall"), InferenceEngine.SYNC, 19.9),
    (LoopStats(steps=450), InferenceEngine.SYNC, "measured"),   # nothing recorded: this machine's compute time
])
def test_the_twin_gives_a_chunking_policy_the_stall_its_real_arm_saw(loop, engine, expected) -> None:
    assert latency_seen([loop], engine) == expected
