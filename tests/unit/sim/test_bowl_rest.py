"""A cube that lands in the simulated bowl comes to rest there, as a real one does, and stays still.

The judge's success needs the cube at rest in the bowl for `stable_s`; a real cube dropped into a bowl rests in
well under a second. A cube that the simulator keeps rocking in the bowl (the floor touched along an edge at one
point that jumps from end to end, issue 59 item 5) turns a placement into "inside the bowl but the sequence was
incomplete" and makes every rate read from simulation rest on an artefact.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES, Scene
from harness.models.taxonomy import Label
from harness.models.verdict import EventKind
from harness.sim.judge import JudgeThresholds
from harness.sim.units import to_sim
from harness.sim.world import SimWorld
from tests.anatomy_traces import FOLDER, attempts

REST = JudgeThresholds()


def _drop(world: SimWorld, offset: tuple[float, float], height: float, euler: tuple[float, float, float],
          push: tuple[float, float] = (0.0, 0.0), seconds: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """The cube let go `height` (m, its bottom) over the bowl floor at `offset` from the bowl's centre, turned by
    `euler` (rad) and moving sideways at `push` (m/s), the arm parked far away: its linear and angular speed each
    physics step for `seconds`, as the judge reads them."""
    world.reset((0.22, -0.05), 0.0, DEFAULT_START_POSE)
    model, data = world.model, world.data
    bx, by = world.geometry.bowl_xy
    half = world.geometry.cube_edge / 2
    adr = world.cube_qpos
    data.qpos[adr:adr + 3] = [bx + offset[0], by + offset[1], world.geometry.table_z + 0.004 + half * math.sqrt(3)
                              + height]
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.array(euler, dtype=float), "xyz")
    data.qpos[adr + 3:adr + 7] = quat
    dof = model.joint("cube_joint").dofadr[0]
    data.qvel[dof:dof + 6] = [push[0], push[1], 0, 0, 0, 0]
    mujoco.mj_forward(model, data)
    steps = world.physics_steps_for(seconds)
    speed, spin = np.zeros(steps), np.zeros(steps)
    velocity = np.zeros(6)
    for i in range(steps):
        world.hold(1)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, world.cube_body, velocity, 0)
        spin[i], speed[i] = np.linalg.norm(velocity[:3]), np.linalg.norm(velocity[3:])
    assert world.judge.cube_inside_bowl(data), "the drop is meant to land in the bowl"
    return speed, spin


def _still_from(world: SimWorld, speed: np.ndarray, spin: np.ndarray, seconds: float) -> bool:
    """At rest by the judge's thresholds at every physics step from `seconds` after the release on."""
    start = world.physics_steps_for(seconds)
    return bool(np.all(speed[start:] < REST.rest_max_speed) and np.all(spin[start:] < REST.rest_max_ang_speed))


# Drops that rocked for seconds on the cylinder floor (a cube landing tilted against the wall, one edge on the
# floor), beside plain ones: (offset from the bowl's centre m, height m, euler rad).
LEANING = [
    ((-0.011, 0.004), 0.05, (0.06, 0.59, 2.49)),
    ((0.01, -0.015), 0.06, (0.29, -0.49, 1.7)),
    ((-0.013, -0.015), 0.06, (-0.42, -0.07, 0.75)),
    ((0.012, 0.015), 0.03, (0.51, 0.06, 0.57)),
]
PLAIN = [((0.0, 0.0), 0.05, (0.0, 0.0, 0.3)), ((0.012, -0.01), 0.03, (0.1, 0.0, 0.0))]


@pytest.mark.parametrize(("offset", "height", "euler"), LEANING + PLAIN)
def test_a_cube_dropped_into_the_bowl_rests_within_a_second_and_stays_still(world, offset, height, euler) -> None:
    speed, spin = _drop(world, offset, height, euler)
    assert _still_from(world, speed, spin, 1.0), (
        f"still moving after 1 s: up to {speed[300:].max():.3f} m/s, {spin[300:].max():.2f} rad/s")


def test_cubes_dropped_anywhere_over_the_bowl_rest_within_a_second(world) -> None:
    """Seeded drops over the whole floor, from 1-9 cm, turned and tossed sideways: every one that lands in the bowl
    is still from 1 s on (on the cylinder floor about one in five rocked on)."""
    rng = np.random.default_rng(59)
    moving = []
    for _ in range(30):
        radius, angle = rng.uniform(0, 0.03), rng.uniform(0, 2 * math.pi)
        offset = (radius * math.cos(angle), radius * math.sin(angle))
        euler = (rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), rng.uniform(0, math.pi))
        speed, spin = _drop(world, offset, rng.uniform(0.01, 0.09), euler, tuple(rng.normal(0, 0.1, 2)))
        if not _still_from(world, speed, spin, 1.0):
            moving.append((offset, euler))
    assert not moving, f"{len(moving)} of 30 still moving after 1 s: {moving}"


# Learned-policy attempts the judge recorded as "inside the bowl but the sequence was incomplete" (grasped, lifted,
# let go 4-7 cm over the floor, the arm withdrawn 10-27 cm) whose replay from their recorded joints on the cylinder
# floor left the cube rocking against the wall to the episode's end (docs/benchmarks.md, "A cube at rest in the
# simulated bowl"): (fixture folder, policy, trial).
ROCKED = [("proposal_act128_s4000", "act128s4000-500-jitter", 2),
          ("proposal_act256_s7000", "act256s7000-600-jitter", 1),
          ("proposal_act128_s5000", "act128s5000-200-jitter", 6)]
TRAINED_SPOT_CM = Scene.model_fields["trained_cube_xy_cm"].default


@pytest.mark.parametrize(("folder", "policy", "trial"), ROCKED)
def test_a_learned_policys_placement_replayed_settles_in_the_bowl(world, folder, policy, trial) -> None:
    """The recorded motion replayed lock-step (each step commands the next step's reached joints, the gripper its
    recorded command; `benchmarks/proposal_replay.py`): the cube rests in the bowl within a second of the release,
    and the judge gives the success the motion earned."""
    attempt = next(a for a in attempts(policy, folder=FOLDER.parent / folder) if a.trial == trial)
    assert attempt.gripper_commands is not None
    dx, dy = attempt.cube_start_cm
    world.reset(((TRAINED_SPOT_CM[0] + dx) / 100, (TRAINED_SPOT_CM[1] + dy) / 100), 0.0, attempt.joints[0])
    for i, command in enumerate(attempt.gripper_commands):
        reached = attempt.joints[min(i + 1, len(attempt.joints) - 1)]
        targets = np.array([to_sim(name, reached[name]) for name in JOINT_NAMES])
        targets[-1] = to_sim("gripper", command)
        world.step_control(targets)
    verdict = world.judge.verdict(world.data)
    times = {event.event: event.t for event in verdict.events}
    assert verdict.label == Label.SUCCESS, verdict.detail
    assert times[EventKind.STABLE_IN_BOWL] - times[EventKind.RELEASE] < 1.0 + REST.stable_s
