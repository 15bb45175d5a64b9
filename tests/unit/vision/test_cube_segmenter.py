"""The learned cube segmenter (issue 59, tenth pass): a second opinion where the colour rule refuses a cube in view.

The frames come from the stress generator's CAMERAS set of seed 31001, which the net was not trained on (30001-30033)
and no measurement pass tuned or judged on (tests/data/heldout_seeds.yaml); the truth is the simulator's
segmentation render of the cube (`stress_frames(cube_mask=True)`).
"""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest

import harness.sim  # noqa: F401  (EGL before mujoco)
from harness.vision.camera import CameraIntrinsics
from harness.vision.measure import CubeFinder, Geometry, locate_cube, measure_image
from harness.vision.reasons import Caveat, DetectionError, NotMeasured
from harness.vision.rim import Rim
from harness.vision.segmenter import SHIPPED, WEIGHTS, CubeSegmenter

SEED = 31001
RESCUED = {14: (320, 240), 54: (1280, 720)}   # the colour rule refuses these cubes in full view: ambiguous, hidden
NO_CUBE = 37                                  # the cube out of view (640x360)
SAMPLE = range(14)                            # two frames of each of the seven camera sizes


@pytest.fixture(scope="module")
def frames() -> dict[int, object]:
    from tests.generators.stress_set import Distribution, stress_frames

    wanted = {*SAMPLE, *RESCUED, NO_CUBE}
    return {k: f for k, f in zip(sorted(wanted), stress_frames(70, SEED, distribution=Distribution.CAMERAS,
                                                               only=wanted, cube_mask=True), strict=True)}


def _lens(frame) -> CameraIntrinsics:   # type: ignore[no-untyped-def]
    m = frame.camera_matrix
    return CameraIntrinsics(*frame.look.size, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(frame.distortion))


def _centroid(points: np.ndarray) -> np.ndarray:
    ys, xs = np.nonzero(points)
    return np.array([xs.mean(), ys.mean()])


def test_the_shipped_weights_are_the_ones_their_recipe_describes() -> None:
    recipe = json.loads(WEIGHTS.with_suffix(".json").read_text())
    assert hashlib.sha256(WEIGHTS.read_bytes()).hexdigest() == recipe["sha256"] == SHIPPED.sha256()
    assert recipe["target"] == "silhouette" and SEED not in recipe["training_seeds"]


def test_the_net_outlines_the_whole_cube_in_view_on_frames_it_never_saw(frames) -> None:
    """At every camera size, the net's largest region is the cube the segmentation render shows: its centroid
    within a tenth of the cube's width of the truth's, covering most of it and little else."""
    judged = 0
    for k in SAMPLE:
        f = frames[k]
        if f.cube_visible < 0.95:
            continue
        outlines = SHIPPED.outlines(f.frame)
        assert outlines, (k, f.look.size)
        learned = np.zeros(f.frame.shape[:2], np.uint8)
        cv2.drawContours(learned, outlines[:1], -1, 1, -1)
        truth = f.cube_mask
        width = np.sqrt(truth.sum())
        miss = np.hypot(*(_centroid(learned) - _centroid(truth)))
        overlap = np.logical_and(learned > 0, truth).sum() / np.logical_or(learned > 0, truth).sum()
        assert miss <= 0.1 * width and overlap >= 0.7, (k, f.look.size, miss / width, overlap)
        judged += 1
    assert judged >= 10


def test_a_cube_the_colour_rule_refuses_is_measured_through_the_net_and_says_so(frames) -> None:
    """Two cubes in full view the colour rule refuses (two red blobs alike at 320x240; too little of a shaded
    cube at 1280x720): measured from the net's outline, within their +/-, with the caveat naming it."""
    for k, size in RESCUED.items():
        f = frames[k]
        assert f.look.size == size and f.cube_visible >= 0.95
        colour_only = measure_image(f.frame, Geometry(), _lens(f), segmenter=None)
        assert colour_only.reason in (NotMeasured.CUBE_AMBIGUOUS, NotMeasured.CUBE_PARTLY_HIDDEN), colour_only
        got = measure_image(f.frame, Geometry(), _lens(f)).measurement
        assert got is not None and Caveat.CUBE_OUTLINED_BY_SEGMENTER in got.caveats
        assert abs(got.distance_cm - f.distance_cm) <= got.uncertainty_cm and got.inside == f.inside, (k, got)


def test_a_frame_without_the_cube_stays_refused(frames) -> None:
    f = frames[NO_CUBE]
    assert f.cube_visible == 0.0
    result = measure_image(f.frame, Geometry(), _lens(f))
    assert result.measurement is None and result.reason is NotMeasured.CUBE_NOT_FOUND


class _Outlines(CubeSegmenter):
    """A segmenter that outlines given squares (centre, side px), largest first: what the net would say."""

    def __init__(self, *squares: tuple[tuple[float, float], float]) -> None:
        super().__init__()
        self.squares = squares

    def outlines(self, frame: np.ndarray) -> list[np.ndarray]:
        return [np.array([[[x - s / 2, y - s / 2]], [[x + s / 2, y - s / 2]], [[x + s / 2, y + s / 2]],
                          [[x - s / 2, y + s / 2]]], np.int32) for (x, y), s in self.squares]


RIM = Rim(320.0, 240.0, 50.0, 50.0, 0.0)
EDGE_PX = 3.0 * 50.0 / (11.5 / 2)


def _cube_at(centre: tuple[int, int]) -> np.ndarray:
    frame = np.full((480, 640, 3), (120, 125, 130), np.uint8)
    cv2.circle(frame, (320, 240), 50, (215, 210, 200), 4)
    half = round(EDGE_PX / 2)
    cv2.rectangle(frame, (centre[0] - half, centre[1] - half), (centre[0] + half, centre[1] + half), (200, 20, 20), -1)
    return frame


def test_the_colour_rules_cube_is_refused_where_the_net_sees_a_whole_cube_elsewhere() -> None:
    frame = _cube_at((460, 240))
    assert locate_cube(frame, RIM, Geometry(), _Outlines(((460, 240), EDGE_PX))).finder is CubeFinder.COLOUR
    with pytest.raises(DetectionError) as refused:
        locate_cube(frame, RIM, Geometry(), _Outlines(((180, 300), EDGE_PX)))
    assert refused.value.reason is NotMeasured.CUBE_AMBIGUOUS and "learned segmenter" in refused.value.detail
    # a net that outlines less than a whole cube has no say: the colour rule's cube stands
    assert locate_cube(frame, RIM, Geometry(), _Outlines(((180, 300), EDGE_PX / 2))).finder is CubeFinder.COLOUR


def test_the_net_is_not_taken_where_it_sees_two_cubes_or_part_of_one() -> None:
    """The colour rule refuses a frame with no red at all; a net outlining two whole cubes, or half of one, does
    not stand in for it."""
    blank = _cube_at((460, 240))
    blank[:] = (120, 125, 130)
    for net in (_Outlines(((460, 240), EDGE_PX), ((180, 300), EDGE_PX)), _Outlines(((460, 240), EDGE_PX * 0.6))):
        with pytest.raises(DetectionError) as refused:
            locate_cube(blank, RIM, Geometry(), net)
        assert refused.value.reason is NotMeasured.CUBE_NOT_FOUND
    sighting = locate_cube(blank, RIM, Geometry(), _Outlines(((460, 240), EDGE_PX)))
    assert sighting.finder is CubeFinder.LEARNED and np.hypot(sighting.centre[0] - 460, sighting.centre[1] - 240) < 1


class _Ragged(CubeSegmenter):
    """A segmenter that outlines one U-shaped region of a cube's area (a piece of a red wavy table, tuning frame
    9306/17), and optionally a whole square beside it."""

    def __init__(self, with_square: bool) -> None:
        super().__init__()
        self.with_square = with_square

    def outlines(self, frame: np.ndarray) -> list[np.ndarray]:
        s = EDGE_PX
        u = np.array([[0, 0], [1.6 * s, 0], [1.6 * s, 1.6 * s], [1.1 * s, 1.6 * s], [1.1 * s, 0.5 * s],
                      [0.5 * s, 0.5 * s], [0.5 * s, 1.6 * s], [0, 1.6 * s]])
        u += np.array([420.0, 200.0])
        shapes = [u.round().astype(np.int32).reshape(-1, 1, 2)]
        return shapes + (_Outlines(((180, 300), EDGE_PX)).outlines(frame) if self.with_square else [])


def test_a_ragged_region_is_no_cube_to_the_check() -> None:
    """A cube's outline is convex: a ragged region of a cube's size neither stands in for a refused cube nor makes
    a second cube beside the one the colour rule found..."""
    blank = np.full((480, 640, 3), (120, 125, 130), np.uint8)
    with pytest.raises(DetectionError):
        locate_cube(blank, RIM, Geometry(), _Ragged(with_square=False))
    # ... yet a rival to a whole square the net would stand in with: a cube cut by the jaw is not convex either
    # (fresh frame 9806/20: a patch of pink table rescued, 17.5 cm off, while the cut cube was its only rival)
    with pytest.raises(DetectionError):
        locate_cube(blank, RIM, Geometry(), _Ragged(with_square=True))
    frame = _cube_at((180, 300))
    assert locate_cube(frame, RIM, Geometry(), _Ragged(with_square=True)).finder is CubeFinder.COLOUR


@pytest.mark.parametrize("size", [(160, 120), (333, 251), (1920, 1080)])
def test_the_net_answers_at_the_frames_own_size(size: tuple[int, int]) -> None:
    frame = np.full((size[1], size[0], 3), 128, np.uint8)
    assert SHIPPED.logits(frame).shape == (size[1], size[0])


def test_harness_measure_says_when_the_net_outlined_the_cube(frames, tmp_path, monkeypatch, capsys) -> None:
    """A user's `harness measure --auto --json` on the 320x240 frame the colour rule refuses: measured, the caveat in
    the record and the human line telling them to look at the annotated image."""
    from PIL import Image

    from harness.cli import main

    f = frames[14]
    monkeypatch.chdir(tmp_path)
    Image.fromarray(f.frame).save("f.png")
    (tmp_path / "calibration").mkdir()
    _lens(f).save(tmp_path / "calibration" / "camera_top.yaml")
    assert main(["measure", "f.png", "--bowl-cm", "11.5", "--auto", "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["measured"] and record["caveats"] == ["cube_outlined_by_segmenter"]
    assert abs(record["distance_cm"] - f.distance_cm) <= record["uncertainty_cm"]
    assert "the learned segmenter outlined it: look at the image" in captured.err


@pytest.mark.parametrize(("k", "paint"), [
    (5, lambda img: cv2.rectangle(img, (345, 567), (397, 619), (169, 3, 22), -1)),    # 1280x720: a red square
    (9, lambda img: cv2.circle(img, (166, 218), 25, (219, 6, 9), -1)),                # 640x360: a red disc
])
def test_a_red_object_the_colour_rule_takes_for_the_cube_is_refused(frames, k, paint) -> None:
    """A cube-sized red object on the desk (a sticker, a lid): the colour rule alone takes it for the cube, over a
    centimetre further off than its +/- says. The net sees two cubes, so the rule's pick is a guess: refused."""
    f = frames[k]
    img = f.frame.copy()
    paint(img)
    colour_only = measure_image(img, Geometry(), _lens(f), segmenter=None).measurement
    assert colour_only is not None and abs(colour_only.distance_cm - f.distance_cm) > 1 + colour_only.uncertainty_cm
    checked = measure_image(img, Geometry(), _lens(f))
    assert checked.reason is NotMeasured.CUBE_AMBIGUOUS and "sees two cubes" in checked.detail
