"""A LeRobot `Robot` over the simulated SO-101, with the real so101_follower's features and units."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from lerobot.robots.robot import Robot
from lerobot.robots.utils import ensure_safe_goal_position
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from harness.models.protocol import JOINT_NAMES
from harness.models.run_settings import ChunkLatency
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.units import GRIPPER_LOAD_KEY, clamp_to_limits, from_sim, to_sim
from harness.sim.world import SimWorld


@dataclass(frozen=True)
class LatencyModel:
    """How long after its observation an action lands, in simulated time."""

    fixed_s: float | None      # None: measured, each action's own policy time
    chunk_s: float | None = None   # an action the policy computed a new chunk for (None: as every other)

    @classmethod
    def from_setting(cls, latency_ms: float | str | dict[str, float] | ChunkLatency | None,
                     fps: int) -> LatencyModel | None:
        if latency_ms is None:
            return None
        if latency_ms == "measured":
            return cls(None)
        if isinstance(latency_ms, dict | ChunkLatency):
            try:
                chunked = ChunkLatency.model_validate(latency_ms)
            except ValueError:
                raise ValueError(f"latency_ms must be 0..10000, 'measured' or {{step_ms, chunk_ms}} within "
                                 f"0..10000, not {latency_ms!r}") from None
            return cls(chunked.step_ms / 1000, chunked.chunk_ms / 1000)
        value = float(latency_ms)
        if not math.isfinite(value) or value < 0 or value > 10_000:
            raise ValueError(f"latency_ms must be 0..10000 or 'measured', not {latency_ms!r}")
        return cls(value / 1000)

    @property
    def chunked(self) -> bool:
        """A paced real arm's model under a chunking policy: its episode is counted in commands, as the paced
        loop counts it, however long the chunks' stalls make it in time."""
        return self.chunk_s is not None

    def seconds(self, measured_s: float | None, computed: bool = True) -> float:
        """`computed`: the policy computed this action (a new chunk) rather than popping one it held."""
        if self.chunk_s is not None and computed:
            return self.chunk_s
        if self.fixed_s is not None:
            return self.fixed_s
        return max(0.0, measured_s or 0.0)

    def describe(self) -> str:
        if self.chunk_s is not None and self.fixed_s is not None:
            return f"{1000 * self.fixed_s:g} ms, {1000 * self.chunk_s:g} ms at each new chunk"
        return "measured" if self.fixed_s is None else f"{1000 * self.fixed_s:g} ms"


class SimSO101(Robot):
    """Behaves as `so101_follower` does: same keys, same units, same clamping. Its observation also carries
    the gripper servo's load (`GRIPPER_LOAD_KEY`), as `robots.so101` reads it from the real servo.

    `world` exposes the simulator to the harness (trial setup, judge, evidence
    rendering); LeRobot's own tools only ever use the `Robot` API.
    """

    config_class = SimSO101Config
    name = "harness_so101_sim"

    def __init__(self, config: SimSO101Config, world: SimWorld | None = None, clock: Any | None = None) -> None:
        """`clock` (harness.run.clock) times the policy for `latency_ms="measured"`."""
        super().__init__(config)
        self.config = config
        self._world = world
        self._connected = False
        self._torque = False
        self._next_tick: float | None = None
        self.latency = LatencyModel.from_setting(config.latency_ms, config.fps)
        self._now = clock.now if clock is not None else time.perf_counter
        self._observed_at: float | None = None   # the clock when the last observation was handed out
        self.landed_latencies_s: list[float] = []  # per action: simulated observation-to-action delay
        self._hold_frames = False
        self._last_frames: dict[str, Any] = {}
        self._computes = False   # the loop says the policy computes the coming action (a chunked model asks)

    # --- features ----------------------------------------------------------
    @property
    def _motors_ft(self) -> dict[str, type]:
        return {f"{name}.pos": float for name in JOINT_NAMES}

    @cached_property
    def observation_features(self) -> dict[str, type | tuple]:
        cams = {cam: (self.config.camera_height, self.config.camera_width, 3) for cam in self.config.render_cameras}
        return {**self._motors_ft, **cams}

    @cached_property
    def action_features(self) -> dict[str, type]:
        return self._motors_ft

    # --- lifecycle ---------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def is_calibrated(self) -> bool:
        return True

    @property
    def torque_enabled(self) -> bool:
        return self._torque

    @property
    def world(self) -> SimWorld:
        if self._world is None:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self._world

    def connect(self, calibrate: bool = True) -> None:
        if self._connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if self._world is None:
            self._world = SimWorld(control_fps=self.config.fps)
        self._connected = True
        self.configure()

    def calibrate(self) -> None:
        """The simulator's joints need no calibration."""

    def configure(self) -> None:
        self._torque = True

    def disable_torque(self) -> None:
        """Let the arm go limp, as releasing torque on the real servos does."""
        self._torque = False

    def disconnect(self) -> None:
        if not self._connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        self._torque = False
        self._connected = False
        if self._world is not None:
            self._world.close()

    # --- I/O ---------------------------------------------------------------
    def present_position(self) -> dict[str, float]:
        q = self.world.joint_positions_rad()
        return {f"{name}.pos": from_sim(name, float(v)) for name, v in zip(JOINT_NAMES, q, strict=True)}

    def get_observation(self) -> dict[str, Any]:
        if not self._connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        obs: dict[str, Any] = self.present_position()
        obs[GRIPPER_LOAD_KEY] = float(self.world.servo_loads()[-1]) if self._torque else 0.0
        width, height = self.config.camera_width, self.config.camera_height
        hold = self._hold_frames and all(cam in self._last_frames for cam in self.config.render_cameras)
        self._hold_frames = False
        for cam in self.config.render_cameras:
            if hold:   # the sensor noise advances as if drawn: the next drawn frame is the one it would have been
                self.world.frame_request(cam, width, height)
                obs[cam] = self._last_frames[cam]
            else:
                obs[cam] = self._last_frames[cam] = self.world.render(cam, width, height)
        if self.latency is not None:
            self._observed_at = self._now()
        return obs

    def policy_computes_next(self, computes: bool) -> None:
        """Whether the policy will compute the coming action (a new chunk) or pop one it holds: under a chunked
        latency model, what decides how late it lands."""
        self._computes = computes

    @property
    def episode_in_commands(self) -> bool:
        """Episodes counted in commands (`episode_time_limit_s x fps`), as a paced real arm's loop counts them,
        rather than in simulated time: under a chunked latency model, which mirrors such an arm."""
        return self.latency is not None and self.latency.chunked

    def hold_frames_once(self) -> None:
        """The next observation repeats the last frames rather than drawing them: its policy will not look
        (it pops an action from its queue), and drawing is most of a learned policy's simulated step."""
        self._hold_frames = True

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        """Clamp to joint limits and `max_relative_target`, then advance one control period."""
        if not self._connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        goal = {key.removesuffix(".pos"): float(val) for key, val in action.items() if key.endswith(".pos")}
        present = self.present_position()
        goal = {name: goal.get(name, present[f"{name}.pos"]) for name in JOINT_NAMES}
        if self.config.max_relative_target is not None:
            pairs = {name: (goal[name], present[f"{name}.pos"]) for name in JOINT_NAMES}
            goal = ensure_safe_goal_position(pairs, self.config.max_relative_target)
        goal = {name: clamp_to_limits(name, value) for name, value in goal.items()}
        if self._torque:
            targets = np.array([to_sim(name, goal[name]) for name in JOINT_NAMES])
        else:
            targets = self.world.joint_positions_rad()  # limp: hold nothing, command where it is
        if self.latency is None:
            self.world.step_control(targets)
        else:
            self._land_late(targets, self.latency)
        if self.config.realtime:
            self._pace()
        return {f"{name}.pos": value for name, value in goal.items()}

    def _land_late(self, targets: np.ndarray, latency: LatencyModel) -> None:
        """The observation was taken at the present simulated time; the action lands `latency` later,
        the arm executing its last command meanwhile; the next observation comes one control period
        after this one, or when the action lands if the policy was slower than that."""
        thought_s = None if self._observed_at is None else self._now() - self._observed_at
        self._observed_at = None
        delay = self.world.physics_steps_for(latency.seconds(thought_s, self._computes))
        self._computes = False   # an action nobody said was computed (the arm's move to its start) is not
        self.world.hold(delay)
        self.world.step_control(targets, max(0, self.world.substeps - delay))
        self.landed_latencies_s.append(delay * self.world.model.opt.timestep)

    def _pace(self) -> None:
        period = 1.0 / self.config.fps
        now = time.perf_counter()
        self._next_tick = now + period if self._next_tick is None else self._next_tick + period
        delay = self._next_tick - now
        if delay > 0:
            time.sleep(delay)
        else:
            self._next_tick = now
