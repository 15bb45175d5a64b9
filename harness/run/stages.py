"""How the table gets ready for a trial and who knows the truth: the simulator or a person."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial


class TrialStage(Protocol):
    world: Any | None

    def place_cube(self, trial: Trial, attempt: int) -> None: ...

    def on_step(self, trial: Trial, step: int) -> None: ...

    def observed(self, observation: dict[str, Any]) -> None:
        """The robot's latest observation (a real arm's evidence frames come from it)."""

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None: ...

    def finished(self) -> bool: ...

    def verdict(self) -> dict[str, Any] | None: ...


class SimStage:
    """The simulator places the cube exactly and scores from the true state."""

    def __init__(self, world: Any, protocol: EvalProtocol, dropout_at: tuple[int, int] | None = None) -> None:
        self.world = world
        self.protocol = protocol
        self.dropout_at = dropout_at

    def place_cube(self, trial: Trial, attempt: int) -> None:
        x, y = self.protocol.scene.trained_cube_xy_cm
        self.world.place_cube(((x + trial.dx_cm) / 100, (y + trial.dy_cm) / 100), math.radians(trial.yaw_deg),
                              seed=trial.index * 1000 + attempt)

    def on_step(self, trial: Trial, step: int) -> None:
        if self.dropout_at and self.dropout_at == (trial.index, step):
            self.world.frozen_cameras.add("top")

    def observed(self, observation: dict[str, Any]) -> None:
        return None  # evidence frames are rendered from the simulator directly

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None:
        return self.world.render(camera, width, height)

    def finished(self) -> bool:
        return self.world.judge.finished

    def verdict(self) -> dict[str, Any] | None:
        return self.world.judge.verdict(self.world.data)


class OperatorStage:
    """A person places the cube and judges; frames come from the robot's own cameras."""

    world = None

    def __init__(self, confirm_placed: Any) -> None:
        self.confirm_placed = confirm_placed
        self.last_observation: dict[str, Any] = {}

    def place_cube(self, trial: Trial, attempt: int) -> None:
        self.confirm_placed(trial)

    def on_step(self, trial: Trial, step: int) -> None:
        return None

    def observed(self, observation: dict[str, Any]) -> None:
        self.last_observation = observation

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None:
        frame = self.last_observation.get(camera)
        return frame if isinstance(frame, np.ndarray) else None

    def finished(self) -> bool:
        return False

    def verdict(self) -> dict[str, Any] | None:
        return None
