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
from harness.models.comparison import build_schedule, unseal
from harness.models.locked import LockedBlock, LockedPolicy
from harness.models.protocol import Protocol
from harness.models.run_settings import RunSettings
from harness.models.scoresheet import run_inference
from harness.policies.base import EvalPolicy, InferenceStats, TrialContext
from harness.policies.hub import pinned_ref


class ArmSwitch:
    """`arm_of(trial index)` names the arm (its code) that runs that trial."""

    def __init__(self, arms: Mapping[str, EvalPolicy], arm_of: Callable[[int], str]) -> None:
        self.arms = dict(arms)
        self.arm_of = arm_of
        self.name = "blind comparison: arms " + ", ".join(self.arms)
        first = next(iter(self.arms.values()))
        # the robot renders every camera any arm reads, at one size: arms that read cameras must agree on it
        readers = {code: policy for code, policy in self.arms.items() if policy.camera_keys}
        sizes = {code: policy.image_size for code, policy in readers.items()}
        if len(set(sizes.values())) > 1:
            named = ", ".join(f"arm {code} at {size[0]}x{size[1]}" if size else f"arm {code} at the robot's default"
                              for code, size in sizes.items())
            raise HarnessInputError(None, "--policy", f"the policies read their cameras at different sizes ({named}): "
                                                      "a comparison's arms share the robot's cameras at one size")
        self.camera_keys = tuple(dict.fromkeys(key for policy in readers.values() for key in policy.camera_keys))
        self.image_size = next(iter(sizes.values()), None)
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

    def reads_frames_next(self) -> bool:
        return self.current.reads_frames_next()

    def computes_next(self) -> bool:
        return self.current.computes_next()

    def end_episode(self) -> None:
        self.current.end_episode()

    def inference_stats(self) -> InferenceStats:
        return self.current.inference_stats()

    def close(self) -> None:
        for policy in self.arms.values():
            policy.close()


def load_arms(locked: LockedBlock, protocol: Protocol, settings: RunSettings, device: str | None,
              make_policy: Callable[..., EvalPolicy]) -> ArmSwitch:
    """Every arm's policy of a locked comparison, loaded before the first trial (`make_policy`: `Parts.policy`),
    behind one `ArmSwitch` that hands each scheduled slot to its arm: the serial run's, and each parallel
    worker's (which reads the sealed mapping itself and shows it to no one)."""
    comparison = locked.comparison
    assert comparison is not None, "a comparison's locked block"
    mapping = unseal(comparison.sealed)
    schedule = {slot.number: slot.arm for slot in build_schedule(*comparison.schedule_args())}
    policies: dict[str, EvalPolicy] = {}
    try:
        for code in comparison.arms:
            # a Hub id at the commit it was locked at; anything else as it was named
            arm = LockedPolicy(ref=mapping[code].ref, fingerprint=mapping[code].fingerprint)
            policies[code] = make_policy(pinned_ref(arm), protocol, settings, device, locked.robot,
                                         run_inference(locked))
        return ArmSwitch(policies, schedule.__getitem__)
    except BaseException:
        for policy in policies.values():
            policy.close()
        raise
