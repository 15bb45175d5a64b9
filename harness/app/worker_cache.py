"""What a worker keeps across the runs it is handed: loaded policies and built simulators (issue 42).

A sweep runs cell after cell; each cell is a `harness run`, which loads its policy and builds its simulated
world, then closes both. A worker that keeps them pays for a checkpoint's load (torch weights, LeRobot's
processors) once per checkpoint and for the scene (the MuJoCo model with its mesh sets) once per scene,
not once per cell. The cache hands out the same objects through `Parts`, so a run uses them exactly as it
uses fresh ones; a kept policy's `close` is the cache's to call, and a kept world starts each run from
MuJoCo's reset state, as a fresh one does (tests/system/test_worker_cache.py: the same outcomes either way).
A policy behind LeRobot's policy server is not kept: its server lives only as long as its cell.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from harness.app.parts import Parts, make_policy, make_sim_robot
from harness.models.locked import LockedInference
from harness.models.protocol import Protocol
from harness.models.render_profile import LEGACY_PROFILE, RenderProfile
from harness.models.run_settings import InferenceEngine, Latency, RobotKind, RunSettings
from harness.policies.base import EvalPolicy
from harness.run.safety import GuardedRobot


class KeptPolicy:
    """A cached policy as a run sees it: everything delegated, except `close`, which the cache owns."""

    def __init__(self, policy: EvalPolicy) -> None:
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)

    def close(self) -> None:
        end_episode = getattr(self._policy, "end_episode", None)
        if end_episode is not None:
            end_episode()


class WorkerCache:
    def __init__(self) -> None:
        self._policies: dict[str, EvalPolicy] = {}
        self._worlds: dict[str, Any] = {}
        self.policy_loads = 0
        self.world_builds = 0

    def parts(self, base: Parts | None = None) -> Parts:
        return replace(base or Parts(), policy=self.policy, sim_robot=self.sim_robot)

    def policy(self, ref: str, protocol: Protocol, settings: RunSettings, device: str | None,
               robot: RobotKind = RobotKind.SIM, inference: LockedInference | None = None) -> EvalPolicy:
        engine = (inference.engine if inference is not None else InferenceEngine.SYNC)
        if engine is InferenceEngine.ASYNC:
            return make_policy(ref, protocol, settings, device, robot, inference)
        key = json.dumps([ref, protocol.task, protocol.fps, settings.rename_map, settings.latency_ms, device,
                          RobotKind(robot).value, inference.model_dump(mode="json") if inference else None],
                         sort_keys=True, default=str)
        if key not in self._policies:
            self._policies[key] = make_policy(ref, protocol, settings, device, robot, inference)
            self.policy_loads += 1
        return KeptPolicy(self._policies[key])

    def sim_robot(self, protocol: Protocol, policy: EvalPolicy, realtime: bool,
                  latency_ms: Latency = None,
                  render_profile: RenderProfile = LEGACY_PROFILE) -> GuardedRobot:
        import mujoco

        from harness.sim.world import SimWorld

        geometry = _geometry(protocol)
        key = json.dumps([repr(geometry), protocol.fps, RenderProfile(render_profile).value])
        world = self._worlds.get(key)
        if world is None:
            world = self._worlds[key] = SimWorld(geometry, control_fps=protocol.fps, render_profile=render_profile)
            self.world_builds += 1
        else:   # as a fresh world starts: MuJoCo's reset state, nothing logged
            mujoco.mj_resetData(world.model, world.data)
            mujoco.mj_forward(world.model, world.data)
            world.posed_qpos[:] = world.data.qpos
            world.command_log = None
        return make_sim_robot(protocol, policy, realtime, latency_ms, render_profile, world=world)

    def close(self) -> None:
        for policy in self._policies.values():
            policy.close()
        for world in self._worlds.values():
            world.close()
        self._policies.clear()
        self._worlds.clear()


def _geometry(protocol: Protocol) -> Any:
    from harness.sim.scene import SceneGeometry

    scene = protocol.scene
    return SceneGeometry(bowl_xy=(scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100),
                         bowl_rim_diameter=scene.bowl_diameter_cm / 100, cube_edge=scene.cube_edge_cm / 100)
