"""How the table gets ready for a trial and who knows the truth: the simulator or a person."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from harness.models.protocol import JOINT_NAMES, Trial
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.taxonomy import Label
from harness.models.verdict import JudgeVerdict
from harness.run.operator_trial import PlacementGuide, PlacementOutcome, Proposer
from harness.run.proposal import GripperTrace, Proposal
from harness.sim.units import GRIPPER_LOAD_KEY


class TrialStage(Protocol):
    world: Any | None

    def place_cube(self, trial: Trial, attempt: int) -> None: ...

    def on_step(self, trial: Trial, step: int) -> None: ...

    def observed(self, observation: dict[str, Any]) -> None:
        """The robot's latest observation (a real arm's evidence frames come from it)."""

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None: ...

    def finished(self) -> bool: ...

    def verdict(self) -> JudgeVerdict | None: ...

    def may_freeze_camera(self, trial: Trial) -> bool:
        """Whether a camera may freeze in this trial (then the dropout watch looks even where nothing else does)."""
        ...

    def attempt_fields(self, label: Label | None = None) -> dict[str, Any]:
        """Extra attempt fields this stage measured (a real arm's measured start, its proposal), given the
        label the attempt is recorded with (a success's measured placement error is the attempt's own)."""
        ...


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

    def may_freeze_camera(self, trial: Trial) -> bool:
        """A simulated camera freezes only where a dropout is injected (`--inject-dropout`): elsewhere the
        dropout watch has nothing to find, and its frames are not drawn."""
        return self.dropout_at is not None and self.dropout_at[0] == trial.index

    def on_step(self, trial: Trial, step: int) -> None:
        if self.dropout_at and self.dropout_at == (trial.index, step):
            self.world.frozen_cameras.add("top")

    def observed(self, observation: dict[str, Any]) -> None:
        return None  # evidence frames are rendered from the simulator directly

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None:
        return self.world.render(camera, width, height)

    def finished(self) -> bool:
        return self.world.judge.finished

    def verdict(self) -> JudgeVerdict | None:
        return self.world.judge.verdict(self.world.data)

    def attempt_fields(self, label: Label | None = None) -> dict[str, Any]:
        return {}   # the simulator places exactly and its judge's verdict is recorded by the engine


class OperatorStage:
    """A person places the cube and judges; frames come from the robot's own cameras.

    With a `PlacementGuide` the trial starts only once the top camera sees the cube within tolerance of
    its target (or the operator overrides with a reason) and nothing unexpected in view (or the operator
    accepts it with a note); with a `Proposer` the finished trial gets a proposed label from the
    gripper's positions and the final top frame. Both are recorded in the attempt.
    """

    world = None

    def may_freeze_camera(self, trial: Trial) -> bool:
        return True   # a real camera can stop sending frames in any trial

    def __init__(self, confirm_placed: Any, guide: PlacementGuide | None = None,
                 proposer: Proposer | None = None, show_proposal: Any | None = None) -> None:
        self.confirm_placed = confirm_placed
        self.guide = guide
        self.proposer = proposer
        self.show_proposal = show_proposal   # the observer's `proposal_ready`: the scoring prompt shows it
        self.last_observation: dict[str, Any] = {}
        self.trace: GripperTrace | None = None
        self.placed: PlacementOutcome | None = None
        self.proposal: Proposal | None = None

    def place_cube(self, trial: Trial, attempt: int) -> None:
        self.proposal = None
        self.trace = self.proposer.trace() if self.proposer is not None else None
        if self.guide is None:
            self.placed = None
            self.confirm_placed(trial)
            return
        self.placed = self.guide.place(trial)

    def on_step(self, trial: Trial, step: int) -> None:
        return None

    def observed(self, observation: dict[str, Any]) -> None:
        self.last_observation = observation
        if self.trace is not None:
            load = observation.get(GRIPPER_LOAD_KEY)   # a real SO-101 reports it: holding read as a squeeze
            self.trace.see({name: float(observation[f"{name}.pos"]) for name in JOINT_NAMES},
                           float(load) if load is not None else None)

    def frame(self, camera: str, width: int, height: int) -> np.ndarray | None:
        frame = self.last_observation.get(camera)
        return frame if isinstance(frame, np.ndarray) else None

    def finished(self) -> bool:
        return False

    def verdict(self) -> JudgeVerdict | None:
        """None: on a real arm the operator scores. The proposal is made here, from the last top frame."""
        if self.proposer is not None and self.trace is not None:
            self.proposal = self.proposer.propose(self.trace, self.frame(self.proposer.camera, 0, 0))
            if self.show_proposal is not None:
                self.show_proposal(self.proposal)
        return None

    def attempt_fields(self, label: Label | None = None) -> dict[str, Any]:
        """What this stage adds to the attempt: the measured start, the proposal, and for a success the
        placement error measured on the final frame (so the report's placement figures include real trials,
        as the simulator's true error does for simulated ones)."""
        fields: dict[str, Any] = {}
        if self.placed is not None:
            fields["measured_start"] = self.placed.record()
        if self.proposal is not None:
            fields["proposal"] = self.proposal.record()
            if label is Label.SUCCESS and self.proposal.placement_error_cm is not None:
                fields["placement_error_cm"] = round(self.proposal.placement_error_cm, 3)
        return fields
