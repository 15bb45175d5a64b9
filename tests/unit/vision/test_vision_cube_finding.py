"""The cube found where the fixed colour rule loses it (issue 59, third pass).

On the tuning sets (seeds 5901-5903, 5951-5953, 6001-6003) half of the frames in full view that got no
number were refused as `cube_not_found` although the whole cube was in view: a red or orange table
under warm light (the whole table passes the cube's hue rule; balanced against the table, the cube's
clipped red turns grey), and a pink bowl or lip the cube touches (one blob, bowl and cube, too large
for a cube). The cube is the most saturated, brightest red thing on the table: where the fixed rule
finds no cube-sized blob, it is tried again with a stricter saturation and brightness.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from harness.vision.measure import Geometry, Measurement, find_cube, measure_frame, measure_image
from harness.vision.reasons import DetectionError, NotMeasured
from harness.vision.rim import Rim

RIM = Rim(320.0, 240.0, 50.0, 50.0, 0.0)
EDGE_PX = 3.0 * 50.0 / (11.5 / 2)    # a 3 cm cube at the scale of an 11.5 cm rim 100 px across


def _striped_table(colour: tuple[int, int, int], swing: float) -> np.ndarray:
    """A textured table (wavy stripes, +/- `swing` of its brightness), with a light rim ring on it."""
    ys, xs = np.mgrid[0:480, 0:640].astype(np.float32)
    shade = 1.0 + swing * np.sin(xs / 6.0 + 3.0 * np.sin(ys / 14.0))
    frame = np.clip(np.asarray(colour, np.float32)[None, None, :] * shade[:, :, None], 0, 255).astype(np.uint8)
    cv2.circle(frame, (320, 240), 50, (215, 210, 200), 4)
    return frame


def _square(frame: np.ndarray, centre: tuple[float, float], colour: tuple[int, int, int]) -> None:
    half = EDGE_PX / 2
    cv2.rectangle(frame, (round(centre[0] - half), round(centre[1] - half)),
                  (round(centre[0] + half), round(centre[1] + half)), colour, -1)


def test_a_bright_cube_on_a_warm_lit_red_table_is_found() -> None:
    """Tuning frame 5901/38's case: a magenta table under 2700 K light is red to the hue rule over 80 % of
    the frame; the cube, clipped at full red, is grey once the table's tint is divided out. It is still
    the one bright, deeply saturated blob: found there, not refused."""
    frame = _striped_table((110, 46, 38), 0.15)
    _square(frame, (450.0, 330.0), (255, 88, 72))
    centre, _, _ = find_cube(frame, RIM, Geometry())
    assert math.dist(centre, (450.0, 330.0)) < 1.5


def test_a_cube_touching_a_pink_lip_is_told_apart_from_it() -> None:
    """Tuning frames 6001/45 and 6002/60: a pink lip is red enough for the hue rule, and the cube in the bowl
    touching it made one blob, bowl and cube, ten times a cube's size: no cube found. The lip is paler."""
    frame = _striped_table((70, 110, 60), 0.05)
    cv2.circle(frame, (320, 240), 47, (225, 125, 140), 9)     # a pink lip, hue 349 degrees, saturation 0.44
    _square(frame, (320.0 + 47 - EDGE_PX / 2, 240.0), (250, 40, 35))
    centre, _, _ = find_cube(frame, RIM, Geometry())
    assert math.dist(centre, (320.0 + 47 - EDGE_PX / 2, 240.0)) < 1.5


def test_a_red_table_with_no_cube_on_it_is_still_refused() -> None:
    """The stricter tries look for a bright, deeply saturated, solid blob of a cube's size: a red table's
    own texture, without a cube, gives none, and the frame is refused as before."""
    frame = _striped_table((110, 46, 38), 0.15)
    with pytest.raises(DetectionError) as refused:
        find_cube(frame, RIM, Geometry())
    assert refused.value.reason in (NotMeasured.CUBE_NOT_FOUND, NotMeasured.CUBE_COLOURED_BACKGROUND)


def _measured(centre: tuple[float, float]) -> Measurement:
    frame = np.full((480, 640, 3), (95, 100, 105), np.uint8)
    cv2.circle(frame, (320, 240), 48, (215, 210, 200), 5)
    _square(frame, centre, (235, 40, 35))
    return measure_frame(frame, RIM, Geometry())


def test_a_cube_against_the_bowl_is_placed_less_surely_than_one_clear_of_it() -> None:
    """Tuning frames 5902/6 and 6001/36: a cube set down against the bowl stands with the edge of its top face
    under the lip (the wall slopes out to it), its blob whole-looking, its boundary on the bowl's side the
    rim's own edge; both read 0.65-0.74 cm too far, outside their +/-. Such a blob's +/- takes in half the
    lip's overhang at the cube's height (about 0.5 cm for the project's bowl); a cube a little clear of
    the bowl, the same blob, keeps its +/-."""
    against = _measured((320.0 + 50 + EDGE_PX / 2, 240.0))
    clear = _measured((320.0 + 50 + EDGE_PX / 2 + 8, 240.0))
    assert against.uncertainty_cm >= clear.uncertainty_cm + 0.4


@pytest.mark.slow
def test_a_rim_the_cube_shows_to_be_the_floor_is_looked_for_again_at_the_cubes_scale() -> None:
    """Tuning frame 6002/27 (1920x1080, the lens calibrated): the rim fit at the frame's own scale took the
    bowl's floor edge (0.6 of the rim), the cube looked 1.6x too wide for it, and the frame was refused.
    The rim is looked for again at the scale the cube's size says, and kept because the first one is
    where the floor's edge must be for it (concentric, 0.6 of its size): measured, within its +/-."""
    from harness.vision.camera import CameraIntrinsics
    from tests.generators.stress_set import Distribution, stress_frame

    f = stress_frame(6002, 27, Distribution.CAMERAS)
    k = f.camera_matrix
    lens = CameraIntrinsics(*f.look.size, k[0, 0], k[1, 1], k[0, 2], k[1, 2], tuple(f.distortion))
    result = measure_image(f.frame, Geometry(), lens)
    assert result.measurement is not None, result.why_not()
    m = result.measurement
    assert abs(m.distance_cm - f.distance_cm) <= min(1.0, m.uncertainty_cm) and m.inside == f.inside
    assert result.rim is not None and result.rim.mean_radius_px == pytest.approx(f.rim_px[2], rel=0.03)


def test_on_a_small_rim_a_cube_a_pixel_from_the_lip_counts_as_against_it() -> None:
    """Tuning frame 6001/36 (424x240, a 22 px rim): the cube's blob ends a pixel short of the rim's edge (the
    mask's opening, blur), outside 4 % of so small a rim: read 0.74 cm far, +/- 0.54. Within 1.5 px counts."""
    small = Rim(160.0, 120.0, 22.0, 22.0, 0.0)
    edge = 3.0 * 22.0 / (11.5 / 2)

    def measured(gap_px: float) -> Measurement:
        frame = np.full((240, 320, 3), (95, 100, 105), np.uint8)
        cv2.circle(frame, (160, 120), 21, (215, 210, 200), 2)
        x0 = 160 + 22 + gap_px
        cv2.rectangle(frame, (round(x0), round(120 - edge / 2)), (round(x0 + edge), round(120 + edge / 2)),
                      (235, 40, 35), -1)
        return measure_frame(frame, small, Geometry())

    assert measured(1.0).uncertainty_cm >= measured(6.0).uncertainty_cm + 0.4


def test_a_cube_turned_orange_by_warm_light_is_found() -> None:
    """Tuning frames 5952/60 and 5953/04 (800x600, 2700-3500 K light): the cube's red, turned orange (hue 18-26
    degrees), was past the hue rule's edge at 16 degrees: no cube found in full view. As saturated and bright as
    a lit cube, it is found."""
    frame = _striped_table((70, 110, 60), 0.05)
    _square(frame, (450.0, 330.0), (245, 125, 70))       # hue 19 degrees, saturation 0.71, value 245
    centre, _, _ = find_cube(frame, RIM, Geometry())
    assert math.dist(centre, (450.0, 330.0)) < 1.5


def test_an_orange_wood_table_without_a_cube_is_still_refused() -> None:
    """The orange try asks for a lit cube's saturation and brightness on a darker table: an orange wood grain,
    without a cube, gives no blob."""
    frame = _striped_table((150, 80, 35), 0.2)
    with pytest.raises(DetectionError) as refused:
        find_cube(frame, RIM, Geometry())
    assert refused.value.reason in (NotMeasured.CUBE_NOT_FOUND, NotMeasured.CUBE_COLOURED_BACKGROUND)


def test_a_bright_orange_wood_grain_is_not_taken_for_an_orange_cube() -> None:
    """Stress set 20 frame 39: the cube under the gripper, an orange wood table whose bright stripes are as orange,
    saturated and bright as a cube under warm light; a stripe of a cube's size was read 10.7 cm off. The orange
    try is trusted only where the cube is all of that colour in view."""
    frame = _striped_table((120, 64, 28), 0.1)         # a dark orange wood, hue 23 degrees
    bright = (200, 107, 47)                               # its bright grain: as orange, saturated and lit as a cube
    _square(frame, (450.0, 330.0), bright)                # one piece of it a cube's size, five narrow ones
    for k in range(5):
        cv2.rectangle(frame, (80 + 90 * k, 60), (86 + 90 * k, 92), bright, -1)
    with pytest.raises(DetectionError) as refused:
        find_cube(frame, RIM, Geometry())
    assert refused.value.reason in (NotMeasured.CUBE_NOT_FOUND, NotMeasured.CUBE_COLOURED_BACKGROUND)
