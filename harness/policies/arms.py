"""A blind comparison's policies behind one `EvalPolicy`: each trial is handed to its scheduled arm.

The engine, the observers and the evidence see one policy named only by the arms' codes; which
checkpoint runs a trial is decided here, from the schedule, when the trial is reset. Every arm is
loaded before the run starts and warmed together, so neither the start-up nor the first trial's
latency says which arm is which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.errors import HarnessInputError
from harness.policies.base import EvalPolicy, InferenceStats, TrialContext


class ArmSwitch:
    """`arm_of(trial index)` names the arm (its code) that runs that trial."""

    def __init__(self, arms: Mapping[str, EvalPolicy], arm_of: Callable[[int], str]) -> None:
        self.arms = dict(arms)
        self.arm_of = arm_of
        self.name = "blind comparison: arms " + ", ".join(self.arms)
        first = next(iter(self.arms.values()))
        for code, policy in self.arms.items():
            if sorted(policy.camera_keys) != sorted(first.camera_keys) or policy.image_size != first.image_size:
                raise HarnessInputError(None, "--policy", f"arm {code} reads cameras {sorted(policy.camera_keys)} at "
                                        f"{policy.image_size or 'the robot default'}, arm {next(iter(self.arms))} "
                                        f"{sorted(first.camera_keys)} at {first.image_size or 'the robot default'}: "
                                        "a comparison's policies must read the same cameras at the same size")
        self.camera_keys = tuple(first.camera_keys)
        self.image_size = first.image_size
        self.current: EvalPolicy = first

    def warm_up(self, observation: dict[str, Any], runs: int = 3) -> float | None:
        """Warm every arm that can be warmed; the slowest's latency in ms (None when none can)."""
        times = [policy.warm_up(observation, runs) for policy in self.arms.values() if hasattr(policy, "warm_up")]
        return max(times) if times else None

    def reset(self, context: TrialContext) -> None:
        self.current = self.arms[self.arm_of(context.trial.index)]
        self.current.reset(context)

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        return self.current.select_action(observation)

    def end_episode(self) -> None:
        self.current.end_episode()

    def inference_stats(self) -> InferenceStats:
        return self.current.inference_stats()

    def close(self) -> None:
        for policy in self.arms.values():
            policy.close()
