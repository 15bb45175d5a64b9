"""A far cube through a lens nobody calibrated (issue 59, third pass).

Without `harness calibrate-camera` the frame's distortion is unknown: anywhere from none to a cheap wide
lens's barrel. Read as through no lens at all, a far cube near the edge of a wide view through a strong
barrel was over 1 cm off (four such frames on the tuning sets, 1.04-1.42 cm), its +/- only just covering
it. It is now read as through the middle of that range, the +/- taking in either end as a bias (added,
not in quadrature): the error halves, and it stays inside the +/- whatever the lens.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import harness.sim  # noqa: F401  (EGL before mujoco)
from harness.models.defaults import DEFAULT_START_POSE
from harness.sim.scene import SceneGeometry
from harness.sim.world import SimWorld
from harness.vision.measure import UNKNOWN_LENS_K1, Geometry, measure_image
from tests.generators.stress_set import camera_matrix, distort

# a wide view from low down: 58 degrees high (74 across) at 640x480, 55 cm up
SCENE = replace(SceneGeometry(), top_camera_fovy=58.0, top_camera_height=0.55)
SPOT = (SCENE.bowl_xy[0] + 0.17, SCENE.bowl_xy[1] + 0.12)    # 21 cm from the bowl, towards the frame's corner


@pytest.fixture(scope="module")
def far_cube() -> tuple[np.ndarray, float, np.ndarray]:
    """The ideal (pinhole) top frame with the cube on the far spot, its true distance (cm) and camera matrix."""
    world = SimWorld(SCENE)
    try:
        world.set_arm(DEFAULT_START_POSE)
        world.place_cube(SPOT, 0.3)
        pos, _ = world.cube_pose()
        distance = 100 * math.hypot(pos[0] - SCENE.bowl_xy[0], pos[1] - SCENE.bowl_xy[1])
        return world.render("top", 640, 480), distance, camera_matrix(SCENE.top_camera_fovy, 640, 480)
    finally:
        world.close()


@pytest.mark.parametrize("k1", [0.0, UNKNOWN_LENS_K1 / 2, UNKNOWN_LENS_K1])
def test_a_far_cube_through_any_lens_in_the_range_is_within_its_interval_and_a_centimetre(far_cube, k1) -> None:
    ideal, truth, matrix = far_cube
    frame = distort(ideal, matrix, np.array([k1, 0.0, 0.0, 0.0, 0.0]))
    result = measure_image(frame, Geometry(focal_px=float(matrix[1, 1])))
    assert result.measurement is not None, result.why_not()
    m = result.measurement
    error = abs(m.distance_cm - truth)
    assert error <= min(1.0, m.uncertainty_cm), (k1, error, m.uncertainty_cm)
    assert not m.inside

