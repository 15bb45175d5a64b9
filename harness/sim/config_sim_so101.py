"""LeRobot config for the simulated SO-101 (robot type `harness_so101_sim`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.robots.config import RobotConfig


@RobotConfig.register_subclass("harness_so101_sim")
@dataclass(kw_only=True)
class SimSO101Config(RobotConfig):
    # Cameras rendered into every observation (`top`, `wrist`), as on the real arm.
    # (Not `cameras`: LeRobot reserves that name for real camera configs.)
    # Leave empty when the policy needs none: rendering is the main cost on a CPU.
    render_cameras: list[str] = field(default_factory=lambda: ["top", "wrist"])
    camera_width: int = 640
    camera_height: int = 480
    # Same meaning as on so101_follower: the largest step (LeRobot units) from the present position.
    max_relative_target: float | dict[str, float] | None = None
    fps: int = 30
    # Lock-step (False) advances simulated time one control period per send_action, whatever the
    # wall clock says; real-time (True) also sleeps so a demo moves at the real arm's pace.
    realtime: bool = False
    # Latency model (lock-step only): None keeps lock-step, where the arm waits for every action.
    # A number of milliseconds, or "measured" (each action's own policy time, from the robot's clock),
    # lets simulated time run while the policy thinks: the arm keeps executing its last command and
    # the new action lands that long after the observation it came from. A chunked one,
    # {"step_ms": N, "chunk_ms": C}, mirrors a paced real arm under a chunking policy: C when the
    # policy computes a new chunk, N otherwise, and episodes counted in commands (`ChunkLatency`).
    latency_ms: float | str | dict[str, float] | None = None
