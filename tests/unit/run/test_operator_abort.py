"""An abort pressed while the cube is being placed (the TUI's `x` during guided placement) voids the trial before
the policy moves the arm at all, and pauses the run resumably."""

from __future__ import annotations

import pytest

from harness.errors import RunPaused
from harness.models.protocol import load_protocol
from harness.models.taxonomy import VoidKind
from harness.policies.scripted import ExpertPolicy
from harness.run.clock import MonotonicClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.safety import GuardedRobot
from harness.run.stages import SimStage
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from tests.helpers import locked_sheet
from tests.system.test_safety import KeyAt

pytestmark = pytest.mark.slow  # runs the simulated arm through a trial


class CountingExpert(ExpertPolicy):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def select_action(self, observation):
        self.calls += 1
        return super().select_action(observation)


class AbortWhilePlacing(KeyAt):
    """Presses `x` while the second trial's cube is being placed, noting how often the policy had acted."""

    def __init__(self, policy: CountingExpert) -> None:
        super().__init__(0, 0, lambda obs: None)
        self.policy = policy
        self.calls_at_abort: int | None = None

    def phase(self, name: str) -> None:
        if name == "placing cube" and self.trial == 2:
            self.aborted, self.calls_at_abort = True, self.policy.calls


def test_an_abort_while_placing_voids_the_trial_before_the_policy_acts(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml")
    robot = SimSO101(SimSO101Config(render_cameras=[]))
    robot.connect()
    policy = CountingExpert()
    observer = AbortWhilePlacing(policy)
    engine = RunEngine(protocol, sheet, GuardedRobot(robot, release=robot.disable_torque, simulated=robot), policy,
                       SimStage(robot.world, protocol), observer, MonotonicClock(),
                       RunOptions(runs_dir=tmp_path / "runs", video=False))
    with pytest.raises(RunPaused) as paused:
        engine.run()
    assert paused.value.void.kind is VoidKind.OPERATOR_ABORT
    assert [(a.trial_index, a.void_reason) for a in sheet.attempts] == [(1, None), (2, VoidKind.OPERATOR_ABORT.value)]
    assert observer.calls_at_abort is not None and policy.calls == observer.calls_at_abort, "no action after the abort"
    assert sheet.pending_trials() == [2, 3] and robot.torque_enabled is False
