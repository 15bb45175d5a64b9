"""The names a run is configured with, defined once: robot kinds, inference engines, built-in policies,
and the unlocked `settings` block of a scoresheet.

Each is stored by its value (`"sim"`, `"rtc"`, `"expert"`), as scoresheets, protocols and sweep files
always spelled them, so files written before these types existed read unchanged; code compares members.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RobotKind(StrEnum):
    """What a run drives: the simulated SO-101 or LeRobot's SO-101 follower on a serial port."""

    SIM = "sim"
    SO101 = "so101"

    @property
    def simulated(self) -> bool:
        return self is RobotKind.SIM


class InferenceEngine(StrEnum):
    """Which of LeRobot's inference engines picks the actions (locked: what the arm experiences depends on it)."""

    SYNC = "sync"     # one action per observation, in the loop
    RTC = "rtc"       # Real-Time Chunking: chunks inpainted against the previous one
    ASYNC = "async"   # LeRobot's policy server and its client's action queue


class BuiltinPolicy(StrEnum):
    """The policies the harness ships, named instead of given as a checkpoint folder."""

    EXPERT = "expert"   # plans from the simulator's true cube pose
    REPLAY = "replay"   # replays one recorded demonstration, whatever the cube does

    @classmethod
    def named(cls, ref: str) -> BuiltinPolicy | None:
        """The built-in a policy reference names, or None (a checkpoint folder)."""
        return next((policy for policy in cls if policy.value == ref), None)


class ChunkLatency(BaseModel):
    """A paced real arm's latency under a chunking policy, for the simulated arm to mirror (`harness twin`).

    LeRobot's synchronous engine computes a whole chunk in the loop when its queue runs out, so a paced arm
    holds its last command for that inference (about 480 ms for the reference ACT on 2 cores) and then pops the
    queued actions a few milliseconds each: one number a step cannot say both. Each action lands `step_ms` after
    its observation, and `chunk_ms` when the policy computes (a new chunk); the episode is counted in commands, as
    the paced loop counts it (`episode_time_limit_s x fps`), however long the stalls make it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    step_ms: float = Field(ge=0, le=10_000)
    chunk_ms: float = Field(ge=0, le=10_000)

    def describe(self) -> str:
        return f"{self.step_ms:g} ms, {self.chunk_ms:g} ms at each new chunk"


# The simulated arm's latency model: milliseconds of simulated time, "measured" (the policy's own time), a chunked
# one (`ChunkLatency`), or None (lock-step: the simulator waits for every action).
Latency = float | Literal["measured"] | ChunkLatency | None


def latency_record(latency: Latency) -> float | str | dict[str, float] | None:
    """The latency model as a scoresheet stores (and hashes) it."""
    return latency.model_dump() if isinstance(latency, ChunkLatency) else latency


def latency_text(latency: Latency) -> str:
    """The latency model in words (reports, refusals)."""
    if latency is None:
        return "lock-step (none)"
    if isinstance(latency, ChunkLatency):
        return latency.describe()
    return "measured" if latency == "measured" else f"{latency:g} ms"


class InferenceThreads(BaseModel):
    """How many cores LeRobot's inference ran on (a record for people, never checked on resume). Sheets made
    before the engine was locked also stored the engine and its settings here: kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)
    cores: int | None = None
    reserved_cores: int | None = None
    torch_threads: int | None = None


class RunSettings(BaseModel):
    """A scoresheet's `settings`: how this machine reaches the robot and feeds the policy. Not locked: a
    resume may run on another port. Written back with only the keys it was read (or made) with, so an older
    sheet's header stays byte for byte what it was."""

    model_config = ConfigDict(extra="allow", frozen=True)
    port: str | None = None                 # a real arm's serial port
    robot_id: str | None = None             # LeRobot's calibration id for the follower
    cameras: dict[str, str] = Field(default_factory=dict)      # name -> source (an index, a path, sim)
    rename_map: dict[str, str] = Field(default_factory=dict)   # robot camera name -> the policy's
    latency_ms: Latency = None      # sheets locked before the latency model was
    inference: InferenceThreads | None = None

    def stored(self) -> dict[str, Any]:
        """The block as the scoresheet's header stores it."""
        return self.model_dump(mode="json", exclude_unset=True)


# The `robot_type` a dataset of the SO-101 records: LeRobot's own, the name of its SO-101 follower class
# (`lerobot.robots.so_follower.SO101Follower.name`), which `lerobot-record` writes; simulated recordings
# have the follower's features and units, so they say the same. tests/unit/policies/test_lerobot_names.py pins it.
SO101_ROBOT_TYPE = "so_follower"
