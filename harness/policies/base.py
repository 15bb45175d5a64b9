"""The small contract between the run engine and anything that picks actions."""

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


class EvalPolicy(Protocol):
    name: str
    camera_keys: tuple[str, ...]

    def reset(self, context: TrialContext) -> None:
        """Forget the previous trial (action queues, hidden state)."""

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        """One action in so101_follower units (`shoulder_pan.pos`, ..., `gripper.pos`)."""
        ...

    def close(self) -> None:
        """Release devices and threads."""
