"""What differs between a simulated arm's episode and a real arm's, behind the one interface the loop reads.

Why: the control loop's steps are the same on both (observe, select, act, record, watch, end), but five things
about a step are not. A simulated arm (a stage with a `world`) dates its steps on the simulator's clock, which
a latency model makes run longer than the control period; its observation-to-action time is the arm's own
record of when each action landed (lock-step: at once); it draws a step's frames only for eyes that look (the
policy, unless it pops a queued action; a dataset; an eager evidence recorder); its latency model is told
whether the policy computes this step; and its evidence rows are dated by the simulator. A real arm's steps are
dated on the wall clock from the episode's start, a late loop's rows when their observation was read; its
observation-to-action time is the wall time from reading the observation to writing the action; its cameras
deliver regardless. `episode_clock` picks one of the two for a loop, once; pacing (sleeping out the period)
is the loop's own setting, since a simulated arm may be paced too.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from harness.policies.base import EvalPolicy
from harness.run.clock import Clock
from harness.run.safety import GuardedRobot

ClockName = Literal["simulated", "wall"]


class EpisodeClock(Protocol):
    """One arm's episode time, started afresh by `begin` at each episode."""

    name: ClockName   # the clock observation-to-action times are on

    def begin(self) -> None:
        """An episode starts now: its time is 0 from here."""
        ...

    def elapsed(self, step: int) -> float:
        """The episode's time at the start of `step`, on the arm's clock."""
        ...

    def frames_wanted(self, policy: EvalPolicy, others_look: bool) -> bool:
        """Whether the next observation draws its frames; `others_look`: a dataset or an eager evidence recorder
        takes them whatever the policy does."""
        ...

    def policy_computes(self, policy: EvalPolicy) -> bool:
        """What the arm is told about the policy's next action: computed (True), or popped from its queue."""
        ...

    def obs_to_action_ms(self, read_s: float, written_s: float) -> float:
        """What the arm experienced from the step's observation to its action (`read_s`, `written_s`: the loop's
        clock before the observation and after the action)."""
        ...

    def read_at(self, elapsed: float, read_s: float) -> float | None:
        """When the step's evidence row is dated (None: at `elapsed`, the simulator's time)."""
        ...

    def episode_s(self) -> float:
        """The episode's length so far, on the arm's clock."""
        ...


class SimulatedEpisodeClock:
    """A simulated arm's episode: the simulator's clock, and the arm's own record of when its actions landed."""

    name: ClockName = "simulated"

    def __init__(self, world: Any, robot: GuardedRobot) -> None:
        self.world = world
        self.robot = robot
        self.landed: list[float] | None = None   # per action: the simulated observation-to-action delay
        self.t_begin = 0.0
        self.landed_from = 0

    def begin(self) -> None:
        self.t_begin = self.world.time
        self.landed = self.robot.landed_latencies_s
        self.landed_from = len(self.landed) if self.landed is not None else 0

    def elapsed(self, step: int) -> float:
        return self.episode_s()   # the simulator's own time, however many steps it took

    def frames_wanted(self, policy: EvalPolicy, others_look: bool) -> bool:
        return others_look or policy.reads_frames_next()

    def policy_computes(self, policy: EvalPolicy) -> bool:
        return policy.computes_next()

    def obs_to_action_ms(self, read_s: float, written_s: float) -> float:
        landed = self.landed
        return 1000 * landed[-1] if landed is not None and len(landed) > self.landed_from else 0.0

    def read_at(self, elapsed: float, read_s: float) -> float | None:
        return None

    def episode_s(self) -> float:
        return float(self.world.time - self.t_begin)


class WallEpisodeClock:
    """A real arm's episode: the loop's own clock, steps due every `period` seconds from the episode's start."""

    name: ClockName = "wall"

    def __init__(self, clock: Clock, period: float) -> None:
        self.clock = clock
        self.period = period
        self.t_start = 0.0

    def begin(self) -> None:
        self.t_start = self.clock.now()

    def elapsed(self, step: int) -> float:
        return step * self.period

    def frames_wanted(self, policy: EvalPolicy, others_look: bool) -> bool:
        return True   # a real arm's cameras deliver regardless

    def policy_computes(self, policy: EvalPolicy) -> bool:
        return True   # a real arm just waits for the action, however it is made

    def obs_to_action_ms(self, read_s: float, written_s: float) -> float:
        return 1000 * (written_s - read_s)

    def read_at(self, elapsed: float, read_s: float) -> float | None:
        # dated when its observation was read (never before its schedule): a late loop's steps are spread over
        # the wall time they took
        return max(elapsed, read_s - self.t_start)

    def episode_s(self) -> float:
        return self.clock.now() - self.t_start


def episode_clock(world: Any | None, robot: GuardedRobot, clock: Clock, period: float) -> EpisodeClock:
    """A stage's world makes the arm simulated, else it is real."""
    if world is not None:
        return SimulatedEpisodeClock(world, robot)
    return WallEpisodeClock(clock, period)
