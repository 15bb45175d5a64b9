"""The simulated SO-101 pick-and-place as a LeRobot environment: `lerobot-eval --env.type=harness_so101`.

Why: a LeRobot user evaluates with `lerobot-eval`, and LeRobot has no SO-101 task with a success criterion. This
module registers one (the `lerobot_env_harness_sim` plugin imports it; LeRobot 0.6.1 imports every installed
`lerobot_env_*` distribution before it parses its flags): an `EnvConfig` and a gymnasium environment over the
harness's own simulator, judge and anatomy, not a copy of them.

An episode is a `harness run` trial on the simulated arm, step for step: the arm moves to the protocol's start
pose from wherever the last episode left it (`SIM_START_POSE_S`, as the engine does), the stage places the cube
(`SimStage`, same jitter seed), every step is logged by the engine's own `EvidenceRecorder` (whose video ticks
advance the cameras' sensor noise exactly as in a run, so the policy is given the same frames), and the episode
ends where the engine's loop would: the time limit, or `after_verdict_s` after the judge's verdict became final.
Observations and actions are the SO-101 follower's: `agent_pos` and the action are the six joint positions in its
units (degrees, gripper 0..100, in `JOINT_NAMES` order), `pixels/<camera>` the cameras the config names at the
size it names. `info["is_success"]` is the judge's; at an episode's end `info` also carries the trial, the label
(`Label`), the judge's detail, the placement error and the trial's `TrialAnatomy`.

Which trial an episode is: with a protocol file, episode seed `first_seed + k` is its (k mod n)-th trial, so
`lerobot-eval`'s seeds (1000, 1001, ... by default) walk the protocol in order, as `harness run` does; without
one, a start drawn from the seed (`generate_randomized_trials`, one trial).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.envs.utils import freeze_after_episode_end
from lerobot.utils.constants import ACTION, OBS_IMAGES, OBS_STATE

from harness import scratch
from harness.models.anatomy import TrialAnatomy
from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS, DEFAULT_TASK
from harness.models.protocol import JOINT_NAMES, Protocol, Trial, generate_randomized_trials, load_protocol
from harness.models.render_profile import DEFAULT_PROFILE, RenderProfile
from harness.models.taxonomy import Label
from harness.models.verdict import JudgeVerdict

log = logging.getLogger(__name__)

ENV_TYPE = "harness_so101"
GYM_ID = "harness/SO101PickPlace-v0"
VIEW_SIZE = (320, 240)   # env.render(): the frames of lerobot-eval's videos (a viewer's, no sensor noise)


def _joint_space() -> gym.spaces.Box:
    from harness.sim.units import JOINT_LIMITS

    low = np.array([JOINT_LIMITS[n][0] for n in JOINT_NAMES], dtype=np.float32)
    high = np.array([JOINT_LIMITS[n][1] for n in JOINT_NAMES], dtype=np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def default_protocol(episode_time_limit_s: float, fps: int) -> Protocol:
    """The harness's default scene and start pose, for seeded random starts when no protocol file is named."""
    return Protocol(name="lerobot-env-random", task=DEFAULT_TASK, success_definition=DEFAULT_SUCCESS,
                    start_pose=dict(DEFAULT_START_POSE), fps=fps, episode_time_limit_s=episode_time_limit_s,
                    trials=[Trial(index=1, dx_cm=0.0, dy_cm=0.0)])


class HarnessSimEnv(gym.Env[dict[str, Any], np.ndarray]):
    """One simulated table, episode after episode (module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, protocol: str | None = None, first_seed: int = 1000, radius_cm: float = 6.0,
                 max_yaw_deg: float = 20.0, cameras: tuple[str, ...] = ("top", "wrist"), camera_width: int = 640,
                 camera_height: int = 480, episode_time_limit_s: float = 20.0, fps: int = 30,
                 latency_ms: float | None = None, render_profile: str = DEFAULT_PROFILE.value,
                 outcomes: str | None = None, render_mode: str = "rgb_array") -> None:
        import harness.sim  # noqa: F401  (headless GL before mujoco)
        from harness.app.parts import sim_world
        from harness.run.anatomy import GraspPoints
        from harness.run.arm_motion import ArmMotion
        from harness.run.clock import MonotonicClock
        from harness.run.safety import GuardedRobot
        from harness.run.stages import SimStage
        from harness.sim.config_sim_so101 import SimSO101Config
        from harness.sim.sim_so101 import SimSO101

        super().__init__()
        self.protocol = load_protocol(protocol) if protocol else default_protocol(episode_time_limit_s, fps)
        self.random_starts = protocol is None
        self.first_seed = first_seed
        self.radius_cm, self.max_yaw_deg = radius_cm, max_yaw_deg
        self.cameras = tuple(cameras)
        self.size = (camera_width, camera_height)
        self.outcomes = Path(outcomes) if outcomes else None
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": self.protocol.fps}
        self.task = self.task_description = self.protocol.task
        self.world = sim_world(self.protocol, RenderProfile(render_profile))
        config = SimSO101Config(id="harness_env", render_cameras=list(self.cameras), camera_width=camera_width,
                                camera_height=camera_height, fps=self.protocol.fps, latency_ms=latency_ms)
        arm = SimSO101(config, world=self.world)
        arm.connect()
        self.robot = GuardedRobot(arm, release=arm.disable_torque, simulated=arm)
        self.motion = ArmMotion(self.robot, self.protocol.fps, MonotonicClock(), paced=False)
        self.stage = SimStage(self.world, self.protocol)
        self.grasp_points = GraspPoints()
        self._max_episode_steps = round(self.protocol.episode_time_limit_s * self.protocol.fps)
        self.observation_space = gym.spaces.Dict({
            "agent_pos": gym.spaces.Box(-np.inf, np.inf, (len(JOINT_NAMES),), dtype=np.float32),
            "pixels": gym.spaces.Dict({cam: gym.spaces.Box(0, 255, (camera_height, camera_width, 3), dtype=np.uint8)
                                       for cam in self.cameras}),
        })
        self.action_space = _joint_space()
        self._folder = scratch.make("lerobot-env")
        self._next_index = 0   # an unseeded reset's trial: the one after the last
        self._episode = 0
        self._trial: Trial | None = None
        self._recorder: Any = None
        self._observation: dict[str, Any] = {}
        self._sim_t = 0.0
        self._t_begin = 0.0
        self._step = 0
        self._finish_at: int | None = None

    # --- which trial ---------------------------------------------------------
    def trial_for(self, seed: int | None) -> Trial:
        """The protocol's trial for an episode seed (module docstring); a random start drawn from it without one."""
        if seed is not None:
            self._next_index = seed - self.first_seed
        index, self._next_index = self._next_index, self._next_index + 1
        if self.random_starts:
            drawn = generate_randomized_trials(self.protocol.scene, 1, self.radius_cm, 0.0,
                                               max(0, self.first_seed + index), self.max_yaw_deg)[0]
            return drawn.model_copy(update={"index": abs(index) + 1})
        return self.protocol.trials[index % len(self.protocol.trials)]

    # --- gymnasium -------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any],
                                                                                                 dict[str, Any]]:
        from harness.run.arm_motion import SIM_START_POSE_S
        from harness.run.engine import RunOptions
        from harness.run.evidence import EvidenceRecorder, VideoMode

        super().reset(seed=seed)
        self._abandon()
        trial = self._trial = self.trial_for(seed)
        self._episode += 1
        self.motion.reach_start_pose(self.protocol.start_pose, SIM_START_POSE_S)
        self.stage.place_cube(trial, 1)
        defaults = RunOptions()
        # the engine's recorder with no videos: its rows are the trace the anatomy reads, and its video ticks
        # request frames as a run's do (the sensor noise then advances as in `harness run`)
        self._recorder = EvidenceRecorder(self._folder / f"episode-{self._episode}", list(defaults.evidence_cameras),
                                          self.stage.frame, self.protocol.fps, defaults.video_fps,
                                          defaults.video_size, VideoMode.NONE, world=self.world)
        self._t_begin = self.world.time
        self._step = 0
        self._finish_at = None
        return self._observe(), {"trial_index": trial.index, "is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        from harness.run.engine import RunOptions

        if self._trial is None or self._recorder is None:
            raise RuntimeError("step() before reset()")
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        sent = self.robot.send_action({f"{name}.pos": float(v) for name, v in zip(JOINT_NAMES, values, strict=True)})
        self._recorder.record_step(self._step, self._sim_t, self._observation, sent,
                                   {"policy_ms": 0.0, "io_ms": 0.0, "missed": 0.0})
        if self._finish_at is None and self.stage.finished():
            self._finish_at = self._step + round(RunOptions().after_verdict_s * self.protocol.fps)
        terminated = self._finish_at is not None and self._step >= self._finish_at
        self._step += 1
        over_time = (self.world.time - self._t_begin >= self.protocol.episode_time_limit_s
                     and not self.robot.episode_in_commands)
        truncated = not terminated and (self._step >= self._max_episode_steps or over_time)
        observation = self._observe()
        if not (terminated or truncated):
            return observation, 0.0, False, False, {"is_success": False}
        info = self._outcome()
        return observation, float(info["is_success"]), terminated, truncated, info

    def render(self) -> np.ndarray:
        frame: np.ndarray = self.world.view("top", *VIEW_SIZE)
        return frame

    def close(self) -> None:
        self._abandon()
        self.world.close()
        scratch.remove(self._folder)

    # --- inside ----------------------------------------------------------------
    def _observe(self) -> dict[str, Any]:
        self._sim_t = self.world.time - self._t_begin
        self._observation = self.robot.get_observation()
        return {
            "agent_pos": np.array([self._observation[f"{n}.pos"] for n in JOINT_NAMES], dtype=np.float32),
            "pixels": {cam: self._observation[cam] for cam in self.cameras},
        }

    def _outcome(self) -> dict[str, Any]:
        """The judge's verdict and the trace's anatomy, as `harness run` records them for this trial."""
        from harness.run.anatomy import anatomy_from_rows

        trial, recorder = self._trial, self._recorder
        assert trial is not None and recorder is not None
        verdict: JudgeVerdict | None = self.stage.verdict()
        assert verdict is not None   # the simulator always judges
        scene = self.protocol.scene
        anatomy: TrialAnatomy | None = anatomy_from_rows(
            recorder.rows, self.grasp_points, scene.trained_cube_xy_cm, (trial.dx_cm, trial.dy_cm),
            scene.bowl_xy_cm, self.protocol.stall_limit_s)
        self._abandon()
        success = verdict.label is Label.SUCCESS
        info: dict[str, Any] = {
            "is_success": success, "trial_index": trial.index, "label": verdict.label.value,
            "detail": verdict.detail, "true_placement_error_cm": verdict.true_placement_error_cm,
            "anatomy": anatomy,
        }
        log.info("%s trial %d: %s (%s)%s", self.protocol.name, trial.index, verdict.label.value, verdict.detail,
                 f"; {anatomy.summary}" if anatomy is not None else "")
        if self.outcomes is not None:
            self._append_outcome(trial, verdict, anatomy)
        return info

    def _append_outcome(self, trial: Trial, verdict: JudgeVerdict, anatomy: TrialAnatomy | None) -> None:
        """One JSON line per finished episode (the labels and anatomy lerobot-eval's own metrics do not keep).
        One `write` of one line on a file opened for appending: the envs of an asynchronous batch each add
        whole lines."""
        record = {"protocol": self.protocol.name, "trial_index": trial.index, "dx_cm": trial.dx_cm,
                  "dy_cm": trial.dy_cm, "yaw_deg": trial.yaw_deg, "label": verdict.label.value,
                  "detail": verdict.detail, "true_placement_error_cm": verdict.true_placement_error_cm,
                  "anatomy": anatomy.model_dump(mode="json") if anatomy is not None else None}
        assert self.outcomes is not None
        self.outcomes.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(self.outcomes, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def _abandon(self) -> None:
        if self._recorder is not None:
            self._recorder.abandon()
            self._recorder = None


@EnvConfig.register_subclass(ENV_TYPE)
@dataclass
class HarnessSimEnvConfig(EnvConfig):
    """`--env.type=harness_so101`: the flags are these fields (`--env.protocol=protocols/randomized.yaml`,
    `--env.cameras='[top]' --env.camera_width=128 --env.camera_height=96` for a policy trained on 128x96 top
    frames)."""

    task: str | None = None            # the protocol's task (read from the protocol; this field is LeRobot's)
    fps: int = 30                      # the protocol's rate (a protocol file's own fps wins)
    protocol: str | None = None        # a harness protocol file: its start positions, scene, time limit
    first_seed: int = 1000             # the episode seed of the protocol's first trial (lerobot-eval's --seed)
    radius_cm: float = 6.0             # without a protocol: random starts within this radius of the trained spot
    max_yaw_deg: float = 20.0          # ... and this yaw
    episode_time_limit_s: float = 20.0  # without a protocol: each episode's time limit
    cameras: list[str] = field(default_factory=lambda: ["top", "wrist"])
    camera_width: int = 640
    camera_height: int = 480
    latency_ms: float | None = None    # None: lock-step, as `harness run` without --latency-ms
    render_profile: str = DEFAULT_PROFILE.value
    outcomes: str | None = None        # a JSON-lines file: each finished episode's label and anatomy
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.protocol:
            protocol = load_protocol(self.protocol)
            self.fps, self.task = protocol.fps, protocol.task
        self.task = self.task or DEFAULT_TASK
        RenderProfile(self.render_profile)   # a wrong one refused while parsing
        self.features = {
            ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(len(JOINT_NAMES),)),
            "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(len(JOINT_NAMES),)),
            **{f"pixels/{cam}": PolicyFeature(type=FeatureType.VISUAL,
                                              shape=(self.camera_height, self.camera_width, 3))
               for cam in self.cameras},
        }
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE,
                             **{f"pixels/{cam}": f"{OBS_IMAGES}.{cam}" for cam in self.cameras}}

    @property
    def gym_kwargs(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "first_seed": self.first_seed, "radius_cm": self.radius_cm,
                "max_yaw_deg": self.max_yaw_deg, "cameras": tuple(self.cameras), "camera_width": self.camera_width,
                "camera_height": self.camera_height, "episode_time_limit_s": self.episode_time_limit_s,
                "fps": self.fps, "latency_ms": self.latency_ms, "render_profile": self.render_profile,
                "outcomes": self.outcomes}

    def create_envs(self, n_envs: int, use_async_envs: bool = False) -> dict[str, dict[int, gym.vector.VectorEnv]]:
        """LeRobot's vector env over `HarnessSimEnv`, each behind LeRobot's `FreezeAfterEpisodeEnd`: a finished
        episode's autoreset is absorbed, so the next episode starts where the last one ended, as the next trial
        of `harness run` does (and no discarded episode is simulated)."""
        from functools import partial

        from gymnasium.vector import AutoresetMode

        make = freeze_after_episode_end(partial(HarnessSimEnv, **self.gym_kwargs))
        if use_async_envs and n_envs > 1:
            vec: gym.vector.VectorEnv = gym.vector.AsyncVectorEnv(
                [make] * n_envs, autoreset_mode=AutoresetMode.SAME_STEP, context="forkserver")
        else:
            vec = gym.vector.SyncVectorEnv([make] * n_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        return {self.type: {0: vec}}


def register_gym_id() -> None:
    """`gym.make("harness/SO101PickPlace-v0", protocol=...)` outside lerobot-eval."""
    if GYM_ID not in gym.registry:
        gym.register(GYM_ID, entry_point=f"{__name__}:HarnessSimEnv")


register_gym_id()
__all__ = ["ENV_TYPE", "GYM_ID", "HarnessSimEnv", "HarnessSimEnvConfig"]
