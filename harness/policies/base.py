"""The small contract between the run engine and anything that picks actions.

The engine calls every member of `EvalPolicy`; the optional capabilities (`image_size`, `end_episode`,
`reads_frames_next`, `computes_next`, `inference_stats`) have defaults in `BasePolicy`, so a policy that needs
none of them inherits it and writes the four methods that matter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial


@dataclass(frozen=True)
class TrialContext:
    protocol: EvalProtocol
    trial: Trial
    world: Any | None = None  # the SimWorld, for built-ins that read the truth; None on a real arm

    def simulator(self) -> Any:
        """The SimWorld, for a policy that reads the truth; refused on a real arm, which has none."""
        if self.world is None:
            raise RuntimeError("this policy reads the simulator's truth and runs only with --robot sim")
        return self.world


@dataclass(frozen=True)
class InferenceStats:
    """What the arm experienced of a trial's inference, where only the policy knows it (an action queue's
    policy: LeRobot's RTC, an asynchronous client). None: not measured by the policy; the engine measures
    what it can itself."""

    round_trips_ms: tuple[float, ...] | None = None   # each chunk, observation to landing, in `clock`'s time
    clock: str = "wall"                               # "wall", or "simulated" (RTC replayed beside the simulator)
    queue_underruns: int | None = None                # steps the action queue was empty
    chunk_switches: int | None = None                 # new action chunks started (None: not a chunked policy)
    rtc_inference_delays: tuple[int, ...] = ()        # RTC: steps of each chunk's horizon spent on latency
    inference_ms: tuple[float, ...] = ()              # the policy's own time per chunk (wall), where it measures it


class EvalPolicy(Protocol):
    name: str
    camera_keys: tuple[str, ...]

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(width, height) the cameras render at; None: the robot's default."""
        ...

    def reset(self, context: TrialContext) -> None:
        """Forget the previous trial (action queues, hidden state)."""

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        """One action in so101_follower units (`shoulder_pan.pos`, ..., `gripper.pos`)."""
        ...

    def end_episode(self) -> None:
        """Called on every way out of an episode: stop what runs beside the loop (a client's threads)."""

    def reads_frames_next(self) -> bool:
        """Whether the next `select_action` looks at the camera frames. False only for a policy that will pop
        an action it already holds (a chunk's queue) and ignores the observation meanwhile: the simulator then
        need not draw frames nobody sees."""
        ...

    def computes_next(self) -> bool:
        """Whether the next `select_action` computes (a chunk, or one action) rather than popping an action it
        already holds: what a paced arm under LeRobot's synchronous engine waits for, and what a simulated arm's
        chunked latency model lands late by (`harness twin`)."""
        ...

    def inference_stats(self) -> InferenceStats:
        """The trial's inference as the arm experienced it, read once its episode has ended."""
        ...

    def close(self) -> None:
        """Release devices and threads."""


class BasePolicy:
    """The defaults of `EvalPolicy`'s optional capabilities: the robot's own image size, nothing to stop
    between episodes, no statistics of its own (one action per observation, measured by the engine)."""

    image_size: tuple[int, int] | None = None

    def end_episode(self) -> None:
        return None

    def reads_frames_next(self) -> bool:
        return True

    def computes_next(self) -> bool:
        return True

    def inference_stats(self) -> InferenceStats:
        return InferenceStats()
