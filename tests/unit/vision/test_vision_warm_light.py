"""The cube under warm light on a reddish table, and a cube beside the bowl showing too little of itself (issue 59).

Warm light (2700 K) on a wood or pink table turned most of the frame "cube-coloured", and the detector refused
(`cube_coloured_background`) on 27 of the tuning sets' frames in full view. It now balances the frame against
the table's own colour (its median: the table fills most of a top view) before it gives up. And a cube right
beside the bowl with under 70 % of its top face in view (under the lip, behind the arm) is refused: the
errors over 1 cm left on the tuning sets were such cubes; unless the blob is a whole face seen small (square, filling
its rectangle: eighth pass).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

import harness.sim  # noqa: F401  (EGL before mujoco)
from harness.vision.camera import CameraIntrinsics
from harness.vision.measure import Geometry, find_cube, measure_image
from harness.vision.reasons import DetectionError, NotMeasured
from harness.vision.rim import Rim

RIM = Rim(320.0, 240.0, 50.0, 50.0, 0.0)
EDGE_PX = 3.0 * 50.0 / (11.5 / 2)    # a 3 cm cube at the scale of an 11.5 cm rim 100 px across


def _table(colour: tuple[int, int, int]) -> np.ndarray:
    frame = np.empty((480, 640, 3), np.uint8)
    frame[:] = colour
    cv2.circle(frame, (320, 240), 50, (200, 200, 205), 4)
    return frame


def _cube(frame: np.ndarray, centre: tuple[float, float], colour: tuple[int, int, int], share: float = 1.0) -> None:
    half = EDGE_PX / 2
    x0, y0 = centre[0] - half, centre[1] - half
    cv2.rectangle(frame, (round(x0), round(y0)), (round(x0 + EDGE_PX), round(y0 + share * EDGE_PX)), colour, -1)


def test_a_red_cube_on_a_warm_lit_reddish_table_is_found() -> None:
    frame = _table((150, 62, 45))          # a wood table under 2700 K light: "red" to a fixed hue/saturation rule
    _cube(frame, (450.0, 300.0), (225, 35, 30))
    centre, _, _ = find_cube(frame, RIM, Geometry())
    assert math.dist(centre, (450.0, 300.0)) < 2.0


def test_a_table_the_cube_colour_itself_is_still_refused() -> None:
    frame = _table((210, 40, 35))
    _cube(frame, (450.0, 300.0), (225, 35, 30))
    with pytest.raises(DetectionError) as refused:
        find_cube(frame, RIM, Geometry())
    assert refused.value.reason in (NotMeasured.CUBE_COLOURED_BACKGROUND, NotMeasured.CUBE_NOT_FOUND)


def test_a_cube_beside_the_bowl_showing_too_little_of_itself_is_refused() -> None:
    beside, away = (320.0 + 1.25 * 50, 240.0), (320.0 + 3.5 * 50, 240.0)
    for where, refused in ((beside, True), (away, False)):
        frame = _table((90, 90, 95))
        _cube(frame, where, (225, 35, 30), share=0.6)   # 60 % of its top face: the rest under the lip or the arm
        if refused:
            with pytest.raises(DetectionError) as caught:
                find_cube(frame, RIM, Geometry())
            assert caught.value.reason is NotMeasured.CUBE_PARTLY_HIDDEN and "beside the bowl" in caught.value.detail
        else:
            find_cube(frame, RIM, Geometry())   # away from the bowl only the arm can hide it: measured as before


def test_a_whole_face_seen_small_beside_the_bowl_is_found() -> None:
    """At 320x240 the mask's edge and the blur take 40-45 % of a 13-15 px top face off a cube in full view beside the
    bowl (eighth pass, tuning frames 9301/21 and 9303/42: refused as hidden under the lip, where measured they were
    0.24-0.42 cm off with +/- 0.8). A blob square and filling its rectangle is that whole face, found at its centre;
    one cut to an oblong (the test above) stays refused."""
    where = (320.0 + 1.25 * 50, 240.0)
    frame = _table((90, 90, 95))
    side = 0.75 * EDGE_PX                                   # 56 % of a top face, square, where a whole one stands
    cv2.rectangle(frame, (round(where[0] - side / 2), round(where[1] - side / 2)),
                  (round(where[0] + side / 2), round(where[1] + side / 2)), (225, 35, 30), -1)
    centre, _, _ = find_cube(frame, RIM, Geometry())
    assert math.dist(centre, where) < 1.5


@pytest.mark.slow
def test_warm_lit_frames_refused_before_are_measured_within_their_interval() -> None:
    """Tuning seed 5902's frames 37, 40, 41 and 44 (640x360, 1280x720, 1920x1080): refused as
    `cube_coloured_background` before, now measured, the truth inside the +/-, in or out right."""
    from tests.generators.stress_set import Distribution, stress_frames

    wanted = (37, 40, 41, 44)
    frames = dict(zip(wanted, stress_frames(45, seed=5902, distribution=Distribution.CAMERAS, only=wanted),
                      strict=True))
    for index in wanted:
        f = frames[index]
        m = f.camera_matrix
        lens = CameraIntrinsics(*f.look.size, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(f.distortion))
        result = measure_image(f.frame, Geometry(), lens)
        assert result.measurement is not None, (index, result.reason, result.detail)
        assert abs(result.measurement.distance_cm - f.distance_cm) <= min(1.0, result.measurement.uncertainty_cm)
        assert result.measurement.inside == f.inside
