"""Top frames with the cube at known places, for checking pixel measurements against the truth."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from harness.models.defaults import DEFAULT_START_POSE
from harness.sim.scene import SceneGeometry
from harness.sim.world import SimWorld

FOVY_DEG = SceneGeometry().top_camera_fovy


@dataclass(frozen=True)
class TruthFrame:
    frame: np.ndarray
    distance_cm: float       # cube centre to bowl centre, horizontal, after the cube came to rest
    inside: bool             # the judge's inside-the-bowl verdict
    where: str               # inside, rim or outside (where it was dropped)


def truth_frames(geometry: SceneGeometry, count: int, seed: int = 0) -> tuple[np.ndarray, Iterator[TruthFrame]]:
    """An empty-bowl calibration frame, and `count` frames with the cube dropped inside the bowl, on
    its rim, or beside it; the arm stays at its start pose, in view."""
    world = SimWorld(geometry)
    world.set_arm(DEFAULT_START_POSE)
    world.place_cube((0.32, -0.14), 0.0)
    calibration = world.render("top", 640, 480)
    rng = np.random.default_rng(seed)
    rim = geometry.bowl_rim_radius

    def frames() -> Iterator[TruthFrame]:
        try:
            for k in range(count):
                where = ("inside", "rim", "outside")[k % 3]
                radius = {"inside": rng.uniform(0, rim - 0.025), "rim": rng.uniform(rim - 0.01, rim + 0.01),
                          "outside": rng.uniform(rim + 0.025, rim + 0.06)}[where]
                angle = rng.uniform(0, 2 * math.pi)
                x, y = geometry.bowl_xy[0] + radius * math.cos(angle), geometry.bowl_xy[1] + radius * math.sin(angle)
                world.place_cube((x, y), rng.uniform(0, math.pi / 2))
                adr = world.cube_qpos
                if where != "outside":
                    world.data.qpos[adr + 2] = 0.075  # drop it in from above the rim
                for _ in range(45):
                    world.step_control(world.joint_positions_rad())
                pos, _ = world.cube_pose()
                distance = 100 * math.hypot(pos[0] - geometry.bowl_xy[0], pos[1] - geometry.bowl_xy[1])
                yield TruthFrame(world.render("top", 640, 480), distance, world.judge.cube_inside_bowl(world.data),
                                 where)
        finally:
            world.close()

    return calibration, frames()
