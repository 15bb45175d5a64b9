"""Cube-to-bowl-centre distance from one top-camera frame.

Two heights matter. The scale is calibrated on the rim, but the camera sees the cube's top face,
which sits lower (on the bowl floor, or on the table). Seen from a camera at height H, a point at
height z lands where a rim-plane point would be (H - z_rim) / (H - z) times farther from the
camera's nadir; `measure_frame` undoes that when it knows the camera's focal length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

import cv2
import numpy as np

from harness.vision import plane
from harness.vision.camera import CameraIntrinsics
from harness.vision.reasons import Caveat, DetectionError, NotMeasured
from harness.vision.rim import BowlShape, Rim, RimFit, fit_rim, is_floor_of
from harness.vision.segmenter import SHIPPED, CubeSegmenter

__all__ = ["CubeFinder", "CubeSighting", "DetectionError", "FrameResult", "Geometry", "Measurement", "NotMeasured",
           "annotate", "bowl_shape", "find_cube", "locate_cube", "measure_frame", "measure_image"]


@dataclass(frozen=True)
class Geometry:
    bowl_cm: float = 11.5
    bowl_height_cm: float = 4.2      # the rim's outer edge above the table (the middle of a rounded lip)
    bowl_floor_cm: float = 0.4       # floor above the table
    cube_cm: float = 3.0
    rim_width_cm: float = 0.6        # the rim's lip seen from above: outer edge to where the wall's inner face begins
    floor_cm: float = 7.3            # the inside floor's diameter, where the wall meets it
    focal_px: float | None = None    # None: no height correction
    principal_px: tuple[float, float] | None = None   # None: the image centre
    max_uncertainty_cm: float = 2.0  # a wider 95 % interval than this is "not measured"


@dataclass(frozen=True)
class Measurement:
    cube_px: tuple[float, float]
    offset_cm: tuple[float, float]
    distance_cm: float
    inside: bool
    yaw_deg: float
    uncertainty_cm: float = 0.0      # half-width of a 95 % interval on distance_cm
    caveats: tuple[Caveat, ...] = ()


CUBE_PX_SIGMA = 0.5        # centroid of a clean blob; more when the blob is ragged
RIM_PX_FLOOR = 0.25        # edge localisation that resampling the rays cannot see (blur, JPEG)
CAMERA_TILT_PRIOR_DEG = 5.0  # how far from vertical a "top" camera may look without the ellipse showing it
SAMPLES = 200
CUBE_AMBIGUOUS = 0.8       # a second red blob this cube-like: which one is the cube is a guess
MEASURE_SUPPORT = 0.65     # a rim seen on less of its circumference may be another round thing (an arm joint)
RIM_DOUBT = 0.15           # scale and centre doubt (1 sigma, share of the rim) per unit of its circumference unseen
MAX_TILT_DEG = 30.0        # a top camera looks down; an ellipse saying otherwise is not the rim
NO_FLOOR_TILT_DEG = 6.0    # without the floor, the rim plane's tilt is a guess to this (1 sigma)
MODEL_FRACTION = 0.01      # modelling error left, as a share of the distance (1 sigma)
BACKGROUND_RED = 0.15      # cube-coloured share of the frame above which a red blob may be a piece of table
MAX_BALANCE_GAIN = 3.0     # white balance from the table: no channel scaled by more than this
HIDDEN_NEAR_BOWL = 0.7     # beside the bowl, a blob under this share of a top face is too little of the cube
NEAR_BOWL = (0.85, 1.6)    # "beside the bowl": the blob's centre this many rim radii from the rim's centre
# a blob this square (its least rectangle's short side over its long) and filling that rectangle this much is a whole
# top face seen small (the mask's edge, blur), not one cut by the lip or the arm (a cut leaves an oblong or a notch)
WHOLE_FACE = (0.85, 0.75)
CUBE_TOO_LARGE = 1.4       # a whole cube's blob, sides and all, is at most this many top-face edges across
UNKNOWN_LENS_K1 = -0.3    # the barrel of a cheap wide lens (OpenCV's k1): the most an uncalibrated frame allows for
RIM_SIZE_TOLERANCE = 0.06  # the rim found within 6 % of the calibration's size (the same bowl, the same camera)
# where the fixed cube-colour rule finds no cube-sized blob: (least saturation, least value), tried in turn
STRICTER_RED = ((150, 120), (170, 170), (170, 220))
WARM_RED = (120, 170)      # ... then, as saturated and bright as a lit cube, ...
WARM_RED_HUE = 13          # ... a hue up to 26 degrees (OpenCV's 13): the cube's red turned orange by warm light,
WARM_RED_ALONE = 2.0       # ... trusted where all of it in view is at most this many top faces (the cube alone)
TABLE_VALUE_MARGIN = 30    # ... each used only on a table this much darker (HSV value) than its least value
LIP_CONTACT = 0.04         # a blob's outline within 4 % of the rim's radius outside its edge touches the lip...
LIP_CONTACT_PX = 1.5       # ... or within 1.5 px, whichever is more
LIP_CONTACT_SHARE = 0.1    # ... where this share of its outline does (one side of a cube's outline, in part)
CUBE_SIDES_SHOWN = 1.1     # a whole cube's blob is about this many top-face edges across (its sides in view)
DEEPER_RED = 30            # a patch this much more saturated (0-255) than the cube's blob, as bright, ...
DEEPER_RED_SHARE = 0.05    # ... and this share of a top face, apart from the blob, is where the cube is
DEEPER_RED_APART = 0.3     # ... apart: beyond this many top-face edges of the blob (its own sides left out)
OVERLAP_SLACK = 0.02       # silhouette placements covering the blob this nearly as well as the best fit it too
# the colour rule's refusals the learned segmenter may answer instead (issue 59: shaded faces lost at 320x240)
LEARNED_RESCUES = frozenset({NotMeasured.CUBE_NOT_FOUND, NotMeasured.CUBE_PARTLY_HIDDEN, NotMeasured.CUBE_AMBIGUOUS})
LEARNED_WHOLE = 0.8        # ... where its outline covers at least this share of a top face (a whole cube's, or near)
LEARNED_ALONE = 0.5        # ... and nothing else it outlines is this share of a top face up to a cube's most (a second)
LEARNED_SOLID = 0.8        # ... counting only outlines this solid (area over convex hull's): a cube's outline is convex


class RimTooSmall(DetectionError):
    """The cube's blob is too large for the rim found (`cube_size_inconsistent`): that rim is an inner edge of
    the bowl. `rim_radius_px` is the rim's radius the cube's own size puts there, where to look again."""

    def __init__(self, detail: str, rim_radius_px: float) -> None:
        super().__init__(NotMeasured.CUBE_SIZE_INCONSISTENT, detail)
        self.rim_radius_px = rim_radius_px


class CubeFinder(StrEnum):
    """What outlined the cube a measurement rests on."""

    COLOUR = "colour"       # the colour rule (`_colour_blob`)
    LEARNED = "learned"     # the learned segmenter, where the colour rule refused (`segmenter.py`)


@dataclass(frozen=True)
class CubeSighting:
    centre: tuple[float, float]   # the outline's centroid (px)
    yaw_deg: float                # its least rectangle's angle, 0-90
    outline: np.ndarray           # OpenCV contour: the cube's visible part, sides included
    finder: CubeFinder


def find_cube(frame: np.ndarray, rim: Rim, geometry: Geometry, segmenter: CubeSegmenter | None = SHIPPED
              ) -> tuple[tuple[float, float], float, np.ndarray]:
    """Centre (px), yaw (deg) and outline of the red cube (`locate_cube`)."""
    sighting = locate_cube(frame, rim, geometry, segmenter)
    return sighting.centre, sighting.yaw_deg, sighting.outline


def locate_cube(frame: np.ndarray, rim: Rim, geometry: Geometry, segmenter: CubeSegmenter | None = SHIPPED
                ) -> CubeSighting:
    """The red cube, found by its colour (saturation and hue, not brightness, so a dimmer room or the yellow arm
    in view do not fool it) and checked against the learned segmenter (`segmenter`; None: the colour rule alone).

    Where the colour rule refuses for want of a whole cube (LEARNED_RESCUES: none found, too little of one, two
    alike) and the net outlines at least LEARNED_WHOLE of a top face, the net's outline is taken, through the same
    checks: at 320x240 the rule's mask loses most of a shaded face of a cube in full view. Where both answer,
    they must be the same thing (`_check_same_cube`), else the cube is ambiguous: a red thing the rule took for
    the cube. A blob much smaller than a whole cube's top face is a cube partly hidden (under the gripper, out
    of the frame): no number then."""
    px_per_cm = rim.mean_radius_px / (geometry.bowl_cm / 2)
    expected = (geometry.cube_cm * px_per_cm) ** 2
    try:
        sighting = _checked(frame, rim, geometry, expected, _colour_blob(frame, expected), CubeFinder.COLOUR)
    except DetectionError as refused:
        if segmenter is None or type(refused) is not DetectionError or refused.reason not in LEARNED_RESCUES:
            raise
        learned = _whole_and_alone(segmenter.outlines(frame), expected)
        if learned is None:
            raise
        try:
            return _checked(frame, rim, geometry, expected, learned, CubeFinder.LEARNED)
        except DetectionError:
            raise refused from None
    if segmenter is not None:
        _check_same_cube(sighting, segmenter.outlines(frame), expected)
    return sighting


def _whole_and_alone(outlines: list[np.ndarray], expected: float) -> np.ndarray | None:
    """The one cube-sized thing the net outlines (`_cube_sized`), where it is a whole cube's (LEARNED_WHOLE of a top
    face at least) and nothing else it outlines is of a cube's size, convex or not; None otherwise. A cube cut by
    the gripper's jaw is not convex, yet it is the cube: fresh frame 9806/20 (a warm-lit pink table, the cube in
    the bowl under the jaw, 0.73 of a face and 0.73 solid) had a patch of shaded table taken for the cube, 17.5 cm
    off, while its only rival was that cut cube."""
    cubes = _cube_sized(outlines, expected)
    if len(cubes) != 1 or cv2.contourArea(cubes[0]) < LEARNED_WHOLE * expected:
        return None
    if any(o is not cubes[0] and LEARNED_ALONE <= cv2.contourArea(o) / expected <= CUBE_TOO_LARGE ** 2
           for o in outlines):
        return None
    return cubes[0]


def _cube_sized(outlines: list[np.ndarray], expected: float) -> list[np.ndarray]:
    """The net's outlines that may be a cube: half a top face (LEARNED_ALONE) to the largest a cube can look
    (CUBE_TOO_LARGE), and convex (LEARNED_SOLID). A larger one is not a cube (a red or pink bowl's floor, which the
    net marks in part: tuning frames 9601/24, 9604/13, 9605/46, 9606/57), nor a ragged one (a piece of a red wavy
    table, 9306/17, solidity 0.75, read 1.9 cm off; a crescent of a bowl's inner wall, 7001/06, 0.56): the
    cubes the net outlined on the tuning sets are 0.87-1.0 solid."""
    return [o for o in outlines if LEARNED_ALONE <= cv2.contourArea(o) / expected <= CUBE_TOO_LARGE ** 2
            and cv2.contourArea(o) >= LEARNED_SOLID * cv2.contourArea(cv2.convexHull(o))]


def _check_same_cube(colour: CubeSighting, outlines: list[np.ndarray], expected: float) -> None:
    """Refuse (`cube_ambiguous`) where the net sees two cubes (two cube-sized things: a red object on the desk that
    looks like the cube to both, the colour rule's pick between them a guess), or one whole cube somewhere else
    than the colour rule's blob: neither's centroid inside the other's outline (a partly seen cube's centroid still
    lies inside the whole one's). A net that sees no whole cube has no say: a shaded or hidden one is the rule's
    to judge."""
    cubes = _cube_sized(outlines, expected)
    if len(cubes) > 1:
        (x1, y1), (x2, y2) = (_centroid(o) for o in cubes[:2])
        raise DetectionError(NotMeasured.CUBE_AMBIGUOUS, f"the learned segmenter sees two cubes (at x={x1:.0f}, "
                             f"y={y1:.0f} and x={x2:.0f}, y={y2:.0f} px): a red object in view looks like the cube")
    learned = _whole_and_alone(outlines, expected)
    if learned is None:
        return
    centre = _centroid(learned)
    if (cv2.pointPolygonTest(learned, colour.centre, True) >= -1.0
            or cv2.pointPolygonTest(colour.outline, centre, True) >= -1.0):
        return
    raise DetectionError(NotMeasured.CUBE_AMBIGUOUS,
                         f"the colour rule's cube at x={colour.centre[0]:.0f}, y={colour.centre[1]:.0f} px and the "
                         f"learned segmenter's at x={centre[0]:.0f}, y={centre[1]:.0f} px are different things")


def _centroid(outline: np.ndarray) -> tuple[float, float]:
    m = cv2.moments(outline)
    if m["m00"] <= 0:
        x, y = outline.reshape(-1, 2).mean(axis=0)
        return float(x), float(y)
    return m["m10"] / m["m00"], m["m01"] / m["m00"]


def _colour_blob(frame: np.ndarray, expected: float) -> np.ndarray:
    """The colour rule's cube: the most cube-like red blob, with the deeper-red checks (`expected`: a top face's
    area, px^2)."""
    candidates = _cube_candidates(frame, expected)
    scored = sorted(((_cube_likeness(c, expected), i) for i, c in enumerate(candidates)), reverse=True)
    best = candidates[scored[0][1]]
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    if len(scored) > 1 and scored[1][0] >= CUBE_AMBIGUOUS * scored[0][0]:
        second = candidates[scored[1][1]]
        # the cube is the deepest red in view: of two blobs about as cube-like, one markedly deeper and at
        # least as bright is the cube (tuning frame 6001/00: the cube in the bowl against a reddish wood
        # grain's dark blob, saturation 202 against 167, brightness 239 against 70)
        if _deeper(_colour(hsv, second), _colour(hsv, best)):
            best = second
        elif not _deeper(_colour(hsv, best), _colour(hsv, second)):
            alone = _alone_on_balanced_table(frame, expected)
            if alone is None:
                (x1, y1), _ = cv2.minEnclosingCircle(best)
                (x2, y2), _ = cv2.minEnclosingCircle(second)
                raise DetectionError(NotMeasured.CUBE_AMBIGUOUS, f"two red blobs look about as much like the cube "
                                     f"(at x={x1:.0f}, y={y1:.0f} and x={x2:.0f}, y={y2:.0f} px)")
            best = alone
    _check_no_deeper_red_elsewhere(frame, hsv, best, expected)
    return _deeper_cube_within(frame, hsv, best, expected)


def _checked(frame: np.ndarray, rim: Rim, geometry: Geometry, expected: float, best: np.ndarray,
             finder: CubeFinder) -> CubeSighting:
    """The cube's outline, refused where it cannot be a whole cube's (`expected`: a top face's area, px^2): off the
    frame's edge, too little of a top face (less again beside the bowl), too large for the rim's scale."""
    area = cv2.contourArea(best)
    x, y, w, h = cv2.boundingRect(best)
    if x <= 1 or y <= 1 or x + w >= frame.shape[1] - 1 or y + h >= frame.shape[0] - 1:
        raise DetectionError(NotMeasured.CUBE_PARTLY_HIDDEN, "the cube runs off the edge of the frame")
    if area < 0.5 * expected:
        raise DetectionError(NotMeasured.CUBE_PARTLY_HIDDEN, f"only {100 * area / expected:.0f}% of a cube's top "
                             "face is in view (under the arm?)")
    centre = _centroid(best)
    against = NEAR_BOWL[0] <= math.hypot(centre[0] - rim.cx, centre[1] - rim.cy) / rim.mean_radius_px <= NEAR_BOWL[1]
    if against and area < HIDDEN_NEAR_BOWL * expected and not _a_whole_face(best):
        # beside the bowl a cube may be hidden under its lip or behind the arm by more than its visible part
        # shows (issue 59's tuning sets: the errors over 1 cm left were such cubes), so a number needs more of it.
        # A square blob filling its rectangle is the whole face seen small: at 320x240 the mask's edge and the blur
        # leave 55-62 % of a 13-15 px face of a cube in full view (tuning frames 9301/21, 9303/42), whose
        # silhouette, placed over the blob (`visible_part_shifts`), then carries that doubt in its +/-
        raise DetectionError(NotMeasured.CUBE_PARTLY_HIDDEN, f"only {100 * area / expected:.0f}% of a cube's top "
                             "face is in view, right beside the bowl (under its lip, behind the arm?)")
    if area > CUBE_TOO_LARGE ** 2 * expected:
        # a cube seen with its sides is a little larger than its top face, never this much: the rim
        # that set the scale is too small (the bowl's inner disc or floor taken for its rim)
        raise RimTooSmall(f"the cube looks {math.sqrt(area / expected):.1f}x as wide as a {geometry.cube_cm:g} cm "
                          f"cube at the scale of the {2 * rim.mean_radius_px:.0f} px rim: the rim found is not "
                          "the bowl's outer edge",
                          math.sqrt(area) / CUBE_SIDES_SHOWN / geometry.cube_cm * geometry.bowl_cm / 2)
    (_, _), (_, _), angle = cv2.minAreaRect(best)
    return CubeSighting(centre, angle % 90, best, finder)


def _a_whole_face(outline: np.ndarray) -> bool:
    """The blob looks like a whole top face, however small: square (WHOLE_FACE's first share) and filling its least
    rectangle (its second). A cube cut by the lip or the arm shows an oblong (9101/21, 9203/36: 0.5) or a notch."""
    _, (w, h), _ = cv2.minAreaRect(outline)
    if min(w, h) <= 0:
        return False
    return min(w, h) / max(w, h) >= WHOLE_FACE[0] and cv2.contourArea(outline) / (w * h) >= WHOLE_FACE[1]


def _alone_on_balanced_table(frame: np.ndarray, expected: float) -> np.ndarray | None:
    """The cube where, on the frame balanced against the table's own colour, one blob of the cube's colour is
    markedly the most cube-like (None otherwise). A brown or mauve table whose colour sits at the cube rule's
    edge (saturation 80 of 255) breaks into ragged red patches under the fixed rule, cube-sized and about as
    cube-like as each other, with the cube merged into one of them; balanced, the table is grey and the cube
    alone stays red (tuning frame 6002/03, 640x480: refused as two red blobs, neither of them the cube)."""
    contours, _ = cv2.findContours(_red_mask(_table_balanced(frame)), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    candidates = [c for c in contours if 0.2 * expected <= cv2.contourArea(c) <= 3.0 * expected]
    scored = sorted((_cube_likeness(c, expected) for c in candidates), reverse=True)
    if not scored or (len(scored) > 1 and scored[1] >= CUBE_AMBIGUOUS * scored[0]):
        return None
    return max(candidates, key=lambda c: _cube_likeness(c, expected))


def _colour(hsv: np.ndarray, blob: np.ndarray) -> tuple[float, float]:
    """A blob's saturation and brightness (HSV, 0-255): the upper quartile of each over its pixels, its lit part."""
    inside = np.zeros(hsv.shape[:2], np.uint8)
    cv2.drawContours(inside, [blob], -1, 1, -1)
    return _colour_of(hsv, inside > 0)


def _colour_of(hsv: np.ndarray, pixels: np.ndarray) -> tuple[float, float]:
    """`_colour` of the pixels a boolean mask picks."""
    return float(np.percentile(hsv[:, :, 1][pixels], 75)), float(np.percentile(hsv[:, :, 2][pixels], 75))


def _deeper_cube_within(frame: np.ndarray, hsv: np.ndarray, blob: np.ndarray, expected: float) -> np.ndarray:
    """The cube inside a blob too large to be it alone, where the rest of that blob is a paler red: the cube
    touching something of its hue but paler (a mauve bowl's wall, a dark brown-red bowl's inside) makes one
    blob with it under the fixed colour rule. At a stricter rule (STRICTER_RED, in turn) the cube is left alone,
    of a cube's size, and markedly deeper (DEEPER_RED) and as bright as the rest (tuning frames 5951/45 and
    7002/20: cubes in the bowl read as 1.5-1.6 cubes wide and refused for a rim too small, the rim right).
    Anything else is returned as it is: a blob all of one red (a cube seen large at a rim too small, the bowl's
    floor taken for it) stays too large and says so."""
    if cv2.contourArea(blob) <= CUBE_TOO_LARGE ** 2 * expected:
        return blob
    inside = np.zeros(frame.shape[:2], np.uint8)
    cv2.drawContours(inside, [blob], -1, 1, -1)
    for saturation, value in STRICTER_RED:
        strict = _red_mask(frame, saturation, value) & (inside * 255)
        contours, _ = cv2.findContours(strict, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        if not contours:
            return blob
        cube = max(contours, key=cv2.contourArea)
        if cv2.contourArea(cube) > CUBE_TOO_LARGE ** 2 * expected:
            continue
        alone = np.zeros_like(inside)
        cv2.drawContours(alone, [cube], -1, 1, -1)
        rest = (inside > 0) & (alone == 0)
        if np.count_nonzero(rest) and _deeper(_colour_of(hsv, alone > 0), _colour_of(hsv, rest)):
            return cube
        return blob
    return blob


def _deeper(one: tuple[float, float], other: tuple[float, float]) -> bool:
    """`one` (saturation, brightness) is a markedly deeper red than `other` and at least as bright."""
    return one[0] >= other[0] + DEEPER_RED and one[1] >= other[1]


def _check_no_deeper_red_elsewhere(frame: np.ndarray, hsv: np.ndarray, blob: np.ndarray, expected: float) -> None:
    """Refuse (`cube_ambiguous`) where a patch of deeper red than the blob taken for the cube, and at least
    as bright, lies apart from it: the cube is the most saturated red in view, so that blob is something
    paler of the cube's hue and the cube itself is elsewhere, mostly hidden (tuning frame 7001/42, 320x240:
    under warm light the bowl's pale floor, cut to a cube's size by the gripper's jaw, was measured 8.7 cm
    from the cube, which showed 14 % of itself beside the arm as a small patch of full red)."""
    inside = np.zeros(frame.shape[:2], np.uint8)
    cv2.drawContours(inside, [blob], -1, 1, -1)
    saturation, value = _colour(hsv, blob)
    if saturation + DEEPER_RED > 255:
        return
    # the blob's own shaded sides and edges (a cube's sides are its own red) are left out: only a patch apart counts
    apart = round(DEEPER_RED_APART * math.sqrt(expected))
    near = cv2.dilate(inside, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * apart + 1, 2 * apart + 1)))
    deeper = _red_mask(frame, round(saturation) + DEEPER_RED, round(value))
    deeper[near > 0] = 0
    count, _, stats, centres = cv2.connectedComponentsWithStats(deeper)
    if count <= 1:
        return
    biggest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[biggest, cv2.CC_STAT_AREA] >= DEEPER_RED_SHARE * expected:
        moments = cv2.moments(blob)
        x, y = centres[biggest]
        raise DetectionError(NotMeasured.CUBE_AMBIGUOUS,
                             f"a patch of deeper red at x={x:.0f}, y={y:.0f} px than the cube-sized blob at "
                             f"x={moments['m10'] / moments['m00']:.0f}, y={moments['m01'] / moments['m00']:.0f} px: "
                             "that blob is something paler of the cube's colour, the cube hidden (under the arm?)")


def _cube_candidates(frame: np.ndarray, expected: float) -> list[np.ndarray]:
    """Red blobs of about a cube's size (`expected`: its top face, px^2), from the first cube-colour rule that
    finds any: the fixed one; on a table that is itself "red" to it, the same rule on the frame balanced
    against the table; then STRICTER_RED, ever more saturated and bright. A red table under warm light, or
    a pink lip the cube touches (one blob, too large), passes the fixed rule; the cube, a deeply saturated
    red lit full on, stays clear of both at a stricter one (balanced against a red table, its red clipped
    at 255 turns grey instead)."""
    first = _red_mask(frame)
    masks = [first]
    if np.count_nonzero(first) > BACKGROUND_RED * first.size:
        # warm light (or a warm table) turns the whole table "red": balanced against the table's own colour
        # (the frame's median: the table fills most of a top view), only the cube stays red
        masks.append(_red_mask(_table_balanced(frame)))
    # a stricter rule only where the table (the frame's median brightness) stays well below its least value:
    # a table of the cube's own colour and brightness leaves no blob that is surely the cube
    table_value = float(np.median(cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)[::7, ::7, 2]))
    masks += [_red_mask(frame, saturation, value) for saturation, value in STRICTER_RED
              if table_value <= value - TABLE_VALUE_MARGIN]
    # last, warm light's cube: under 2700-3500 K the cube's red turns orange, past the hue rule's edge (tuning
    # frames 5952/60, 5953/04: hue 18-26 degrees), so an orange-red as saturated and bright as a lit cube, but
    # only where it is the one such thing in view: an orange wood grain's bright stripes pass it too (stress set
    # 20 frame 39, the cube under the gripper: a stripe was read 10.7 cm off), the cube alone is one blob
    saturation, value = WARM_RED
    if table_value <= value - TABLE_VALUE_MARGIN:
        warm = _red_mask(frame, saturation, value, WARM_RED_HUE)
        if np.count_nonzero(warm) <= WARM_RED_ALONE * expected:
            masks.append(warm)
    seen: list[np.ndarray] = []
    for mask in masks:
        if np.count_nonzero(mask) > BACKGROUND_RED * mask.size:
            continue
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        candidates = [c for c in contours if 0.2 * expected <= cv2.contourArea(c) <= 3.0 * expected]
        if candidates:
            return candidates
        seen = seen or list(contours)
    if not seen and all(np.count_nonzero(m) > BACKGROUND_RED * m.size for m in masks[:2]):
        raise DetectionError(NotMeasured.CUBE_COLOURED_BACKGROUND,
                             f"{100 * np.count_nonzero(masks[-1]) / first.size:.0f}% of the frame has the cube's "
                             "colour (a red table?): a red blob may be a piece of it, and the cube may merge with it")
    sizes = sorted((round(cv2.contourArea(c)) for c in seen), reverse=True)[:3]
    raise DetectionError(NotMeasured.CUBE_NOT_FOUND, f"no cube-coloured blob of about {expected:.0f} px^2 "
                         f"(largest red blobs: {sizes or 'none'})")


def _red_mask(frame: np.ndarray, saturation: int = 80, value: int = 40, hue: int = 8) -> np.ndarray:
    """The cube's colour by hue and saturation, not brightness (a dimmer room, the yellow arm); `saturation`
    and `value` are the least of each (0-255) a cube pixel has, `hue` the most towards orange (OpenCV's 0-180)."""
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    red = ((hsv[:, :, 0] <= hue) | (hsv[:, :, 0] >= 172)) & (hsv[:, :, 1] >= saturation) & (hsv[:, :, 2] >= value)
    return cv2.morphologyEx(red.astype(np.uint8) * 255, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))


def _table_balanced(frame: np.ndarray) -> np.ndarray:
    """The frame white-balanced so the table (its median colour) is grey: the light's and the table's tint
    divided out, a red cube still red against it."""
    median = np.median(frame.reshape(-1, 3)[::7], axis=0).astype(np.float64) + 1.0
    gains = np.clip(median.mean() / median, 1 / MAX_BALANCE_GAIN, MAX_BALANCE_GAIN)
    return np.clip(frame * gains, 0, 255).astype(np.uint8)


def _cube_likeness(contour: np.ndarray, expected_area: float) -> float:
    """How much a red blob looks like the cube: solid (a reddish wood grain or cloth is ragged) and
    of a cube's size (a blob half or twice as large scores half)."""
    area = cv2.contourArea(contour)
    solidity = area / max(cv2.contourArea(cv2.convexHull(contour)), 1.0)
    return solidity * min(area / expected_area, expected_area / area)


def measure_frame(frame: np.ndarray, rim: Rim, geometry: Geometry, fit: RimFit | None = None,
                  segmenter: CubeSegmenter | None = SHIPPED) -> Measurement:
    """The cube's distance from the bowl centre, with a 95 % interval.

    With a focal length, the camera's pose over the table comes from the rim's ellipse (`plane.py`)
    and the cube's modelled silhouette is placed on the table exactly; without one, the rim's
    ellipse maps pixels to the rim plane to first order and the cube's height stays uncorrected.
    `segmenter`: `locate_cube`'s learned check (None: the colour rule alone)."""
    sighting = locate_cube(frame, rim, geometry, segmenter)
    centre, yaw, outline = sighting.centre, sighting.yaw_deg, sighting.outline
    learned = (Caveat.CUBE_OUTLINED_BY_SEGMENTER,) if sighting.finder is CubeFinder.LEARNED else ()
    if geometry.focal_px:
        result = _measure_posed(frame.shape, rim, geometry, fit, centre, yaw, outline)
        return replace(result, caveats=(*result.caveats, *learned))
    offset, inside = _offset(frame.shape, rim, geometry, centre, yaw, _nadir(frame.shape, geometry))
    uncertainty = _uncertainty(frame.shape, rim, geometry, centre, yaw, outline, fit, inside)
    uncertainty += _under_lip_doubt(outline, rim, geometry)
    _check_uncertainty(uncertainty, geometry)
    return Measurement(centre, (float(offset[0]), float(offset[1])), float(np.hypot(*offset)), inside, yaw,
                       round(uncertainty, 3), (Caveat.NO_HEIGHT_CORRECTION, *learned))


def _under_lip_doubt(outline: np.ndarray, rim: Rim, g: Geometry) -> float:
    """How much less surely a cube pushed against the bowl's outside is placed (cm; 0 for any other).

    The bowl's wall slopes out to its lip, so a cube set down against it stands with the edge of its top
    face under the lip, hidden from above by up to the lip's overhang at the cube's height; and the blob,
    whole-looking, gives no sign of it (its boundary on the bowl's side is the rim's own edge). Its
    centroid then sits up to half the overhang farther out than the cube's: two of the tuning sets'
    frames (5902/6, 6001/36) read 0.65 and 0.74 cm far, outside their +/-. That half is added to the
    +/- (a bias of one sign, not a random error) wherever the blob runs along the rim's outer edge."""
    corners = outline.reshape(-1, 2).astype(float)
    # the outline's corners (runs compressed), walked at every pixel so that each stretch counts by its length
    steps = [np.linspace(a, b, max(1, math.ceil(np.abs(b - a).max())), endpoint=False)
             for a, b in zip(corners, np.roll(corners, -1, axis=0), strict=True)]
    points = np.vstack(steps)
    rho = np.linalg.norm(rim.to_cm(points, g.bowl_cm), axis=1) / (g.bowl_cm / 2)
    moments = cv2.moments(outline)
    if moments["m00"] <= 0:
        return 0.0
    centre = np.array([[moments["m10"] / moments["m00"], moments["m01"] / moments["m00"]]])
    outside = float(np.linalg.norm(rim.to_cm(centre, g.bowl_cm))) > g.bowl_cm / 2
    # the blob's edge is placed to a pixel or so (the mask's opening, blur): at least that near counts on a small rim
    contact = max(LIP_CONTACT, LIP_CONTACT_PX / rim.mean_radius_px)
    if not outside or np.mean(rho <= 1.0 + contact) < LIP_CONTACT_SHARE:
        return 0.0
    floor_r, lip_r = g.floor_cm / 2, g.bowl_cm / 2 - g.rim_width_cm
    wall = floor_r + (lip_r - floor_r) * (g.cube_cm - g.bowl_floor_cm) / (g.bowl_height_cm - g.bowl_floor_cm)
    return max(0.0, g.bowl_cm / 2 - wall) / 2   # the wall's inner face at the cube top's height: the most hidden


def _check_uncertainty(uncertainty: float, geometry: Geometry) -> None:
    if uncertainty > geometry.max_uncertainty_cm:
        raise DetectionError(NotMeasured.TOO_UNCERTAIN, f"distance known only to +/- {uncertainty:.2f} cm "
                             f"(limit {geometry.max_uncertainty_cm:.2f} cm)")


def _camera_matrix(shape: tuple[int, ...], g: Geometry) -> np.ndarray:
    cx, cy = _nadir(shape, g)
    assert g.focal_px is not None
    return np.array([[g.focal_px, 0, cx], [0, g.focal_px, cy], [0, 0, 1.0]])


def _pose(rim: Rim, k: np.ndarray, g: Geometry, floor_centre: tuple[float, float] | None,
          lean: np.ndarray | None = None) -> plane.PlanePose:
    """The rim plane's pose: its tilt from the floor's parallax where the floor was found, else
    the camera taken as looking straight down (tilted by `lean`, when drawing what it may be)."""
    if floor_centre is not None:
        return plane.pose_from_floor(rim, floor_centre, k, g.bowl_cm / 2, g.bowl_height_cm - g.bowl_floor_cm,
                                     g.floor_cm / 2)
    normal = np.array([0.0, 0.0, 1.0]) + (lean if lean is not None else 0.0)
    return plane.pose_with_normal(rim, normal, k, g.bowl_cm / 2)


def _place_cube(pose: plane.PlanePose, g: Geometry, centre: tuple[float, float], yaw: float,
                start: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """The cube's offset from the bowl centre (cm) and whether it is inside: placed standing on the
    table, and again on the bowl floor when that puts it inside the rim."""
    offset = plane.cube_offset(pose, centre, yaw, g.cube_cm, g.bowl_height_cm, start)
    if _inside(offset, yaw, g) or np.hypot(*offset) < g.bowl_cm / 2:
        on_floor = plane.cube_offset(pose, centre, yaw, g.cube_cm, g.bowl_height_cm - g.bowl_floor_cm, offset)
        if _inside(on_floor, yaw, g):
            return on_floor, True
    return offset, False


def _measure_posed(shape: tuple[int, ...], rim: Rim, g: Geometry, fit: RimFit | None, centre: tuple[float, float],
                   yaw: float, outline: np.ndarray) -> Measurement:
    k = _camera_matrix(shape, g)
    floor = fit.floor if fit else None
    pose = _pose(rim, k, g, (floor.cx, floor.cy) if floor else None)
    camera_to_rim_m = pose.distance_cm / 100
    if not 0.3 <= camera_to_rim_m <= 1.6:
        raise DetectionError(NotMeasured.ELLIPSE_INCONSISTENT_WITH_CAMERA,
                             f"a {rim.mean_radius_px:.0f} px rim puts the camera {camera_to_rim_m:.2f} m "
                             "above it with this focal length: not the bowl, or the wrong lens")
    if pose.tilt_deg > MAX_TILT_DEG:
        raise DetectionError(NotMeasured.ELLIPSE_INCONSISTENT_WITH_CAMERA,
                             f"the rim's ellipse puts the camera {pose.tilt_deg:.0f} degrees off vertical "
                             f"(a top camera looks down within {MAX_TILT_DEG:.0f})")
    if fit is not None and fit.support < MEASURE_SUPPORT:
        raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                             f"the rim's edges show on only {100 * fit.support:.0f}% of it (needs "
                             f"{100 * MEASURE_SUPPORT:.0f}% to tell it from another round thing, an arm joint)")
    offset, inside = _place_cube(pose, g, centre, yaw)
    # placed again where its silhouette fits the part of the cube that is seen, not the blob's centroid
    fitting = visible_part_shifts(_silhouette(pose, g, offset, yaw, inside), outline)
    middle = fitting.mean(axis=0)
    centre = (centre[0] + float(middle[0]), centre[1] + float(middle[1]))
    offset, inside = _place_cube(pose, g, centre, yaw, offset)
    uncertainty = _posed_uncertainty(rim, g, fit, k, centre, yaw, outline, offset, inside,
                                     fitting - fitting.mean(axis=0))
    uncertainty += _under_lip_doubt(outline, rim, g)
    _check_uncertainty(uncertainty, g)
    return Measurement(centre, (float(offset[0]), float(offset[1])), float(np.hypot(*offset)), inside, yaw,
                       round(uncertainty, 3), ())


def _silhouette(pose: plane.PlanePose, g: Geometry, offset: np.ndarray, yaw: float, inside: bool) -> np.ndarray:
    """The cube's modelled silhouette (its convex hull, px) standing at `offset`, on the floor when inside."""
    base = g.bowl_height_cm - (g.bowl_floor_cm if inside else 0.0)
    corners = pose.project(plane.cube_corners(offset, yaw, g.cube_cm, base))
    return cv2.convexHull(corners.astype(np.float32)).reshape(-1, 2)


def _ragged_sigma(outline: np.ndarray) -> float:
    """The blob centroid's uncertainty (px) from its own shape: more for a ragged blob."""
    hull = cv2.convexHull(outline)
    return CUBE_PX_SIGMA + 10.0 * (1.0 - cv2.contourArea(outline) / max(cv2.contourArea(hull), 1.0))


def visible_part_shifts(silhouette: np.ndarray, outline: np.ndarray) -> np.ndarray:
    """Where the cube's modelled silhouette may be, given only the part of it the blob shows.

    The blob is the cube's visible part: a silhouette moved by any shift that still covers it (to
    OVERLAP_SLACK of the best cover) fits the frame as well. A cube seen whole allows a pixel or so;
    one partly hidden (under the gripper, behind the arm) may slide under whatever hides it, by as
    much as is hidden. Returns those shifts (N, 2, px): the doubt on where the cube's centroid is,
    which the blob's own centroid cannot see. Their middle is where the cube is placed: the blob's
    centroid is pulled towards the part that is seen, by about half of what is hidden."""
    reach = 0.6 * float(np.ptp(silhouette, axis=0).max())
    x0, y0 = np.floor(np.minimum(silhouette.min(axis=0), outline.reshape(-1, 2).min(axis=0)) - reach - 2)
    size = np.ceil(np.maximum(silhouette.max(axis=0), outline.reshape(-1, 2).max(axis=0)) - (x0, y0) + reach + 2)
    blob = np.zeros((int(size[1]), int(size[0])), np.uint8)
    cv2.drawContours(blob, [outline - np.array([x0, y0], np.int32)], -1, 1, -1)
    local = silhouette - np.array([x0, y0])

    def covers(shifts: np.ndarray) -> np.ndarray:
        """Share of the blob inside the silhouette moved by each shift."""
        canvas = np.zeros_like(blob)
        out = np.empty(len(shifts))
        for i, shift in enumerate(shifts):
            canvas[:] = 0
            cv2.fillConvexPoly(canvas, np.round((local + shift) * 16).astype(np.int32), 1, cv2.LINE_8, 4)
            out[i] = np.count_nonzero(canvas & blob)
        return out / max(np.count_nonzero(blob), 1)

    # a coarse grid over the reach, then a grid four times finer over what fitted on it
    step = reach / 10
    coarse = _grid(-reach, reach, -reach, reach, step)
    cover = covers(coarse)
    near = coarse[cover >= cover.max() - OVERLAP_SLACK - 0.05]
    (lx, ly), (hx, hy) = near.min(axis=0) - step, near.max(axis=0) + step
    fine = _grid(lx, hx, ly, hy, step / 4)
    cover = covers(fine)
    return fine[cover >= cover.max() - OVERLAP_SLACK]


def _grid(x0: float, x1: float, y0: float, y1: float, step: float) -> np.ndarray:
    xs, ys = np.arange(x0, x1 + step / 2, step), np.arange(y0, y1 + step / 2, step)
    return np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)


def _posed_uncertainty(rim: Rim, g: Geometry, fit: RimFit | None, k: np.ndarray, centre: tuple[float, float],
                       yaw: float, outline: np.ndarray, offset: np.ndarray, inside: bool,
                       hidden: np.ndarray) -> float:
    """Half-width of a 95 % interval on the distance, drawing every input from what is known of it.

    The rim's centre and axes vary by the fit's resampled standard errors (plus a floor, and 0.6 of
    the distance to a rival reading); the floor's centre by its own, which moves the tilt found from
    its parallax; without a floor, the tilt by NO_FLOOR_TILT_DEG; the cube's centroid by half a
    pixel, more for a ragged blob, and over every place where the modelled silhouette still covers
    the blob (`visible_part_shifts`: a partly hidden cube may lie anywhere under what hides it). The
    modelling error left (a rounded lip's edge, the cube's shaded sides) adds MODEL_FRACTION of the
    distance."""
    rng = np.random.default_rng(0)
    sx, sy, sa, sb = fit.sigma if fit else (0.0, 0.0, 0.0, 0.0)
    rival = 0.6 * fit.rival_px if fit else 0.0
    floor = fit.floor if fit else None
    fsx, fsy = fit.floor_sigma if fit else (0.0, 0.0)
    # a floor edge seen on part of its circumference (shaded, under the cube or the arm) places its centre less surely
    floor_doubt = RIM_DOUBT * (1.0 - fit.floor_share) * floor.mean_radius_px if fit and floor else 0.0
    cube_sigma = _ragged_sigma(outline)
    # a rim seen on part of its circumference only may be fitted off its true size and place
    doubt = RIM_DOUBT * (1.0 - fit.support) if fit else 0.0
    distances = np.empty(SAMPLES)
    for i in range(SAMPLES):
        common = rng.normal(0, rival) + rng.normal(0, doubt * rim.mean_radius_px)
        shift = rng.normal(0, doubt * rim.mean_radius_px, 2)
        sample = Rim(rim.cx + shift[0] + rng.normal(0, math.hypot(sx, RIM_PX_FLOOR)),
                     rim.cy + shift[1] + rng.normal(0, math.hypot(sy, RIM_PX_FLOOR)),
                     rim.a + common + rng.normal(0, math.hypot(sa, RIM_PX_FLOOR)),
                     rim.b + common + rng.normal(0, math.hypot(sb, RIM_PX_FLOOR)), rim.angle_deg)
        if floor is not None:
            pose = _pose(sample, k, g, (floor.cx + rng.normal(0, math.hypot(fsx, RIM_PX_FLOOR, floor_doubt)),
                                        floor.cy + rng.normal(0, math.hypot(fsy, RIM_PX_FLOOR, floor_doubt))))
        else:   # the tilt is not known: anywhere within NO_FLOOR_TILT_DEG (1 sigma) of straight down
            lean = np.append(rng.normal(0, math.tan(math.radians(NO_FLOOR_TILT_DEG)), 2), 0.0)
            pose = _pose(sample, k, g, None, lean)
        slide = hidden[rng.integers(0, len(hidden))]
        cube = (centre[0] + slide[0] + rng.normal(0, cube_sigma), centre[1] + slide[1] + rng.normal(0, cube_sigma))
        placed, _ = _place_cube(pose, g, cube, yaw, offset)
        distances[i] = np.hypot(*placed)
    distance = float(np.hypot(*offset))
    spread = 1.96 * float(np.std(distances))
    bias = abs(float(np.median(distances)) - distance)
    return math.hypot(spread + bias, 1.96 * MODEL_FRACTION * distance)


def _nadir(shape: tuple[int, ...], g: Geometry) -> tuple[float, float]:
    return g.principal_px or (shape[1] / 2, shape[0] / 2)


def _offset(shape: tuple[int, ...], rim: Rim, g: Geometry, centre: tuple[float, float], yaw: float,
            nadir: tuple[float, float], camera_height_cm: float | None = None) -> tuple[np.ndarray, bool]:
    offset = rim.to_cm(np.array([centre]), g.bowl_cm)[0]
    inside = _inside(offset, yaw, g)
    if camera_height_cm is None and g.focal_px:   # the camera's height from the rim's size in the image
        camera_height_cm = g.focal_px * (g.bowl_cm / 2) / rim.mean_radius_px + g.bowl_height_cm
    if camera_height_cm:
        offset = _height_corrected(rim, g, centre, inside, nadir, camera_height_cm)
        inside = _inside(offset, yaw, g)
    return offset, inside


def _inside(offset: np.ndarray, yaw_deg: float, g: Geometry) -> bool:
    """All four corners of the cube's footprint within the rim circle (the judge's rule, seen from above)."""
    half = g.cube_cm / 2
    t = math.radians(yaw_deg)
    rotation = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    corners = [offset + rotation @ np.array([sx * half, sy * half]) for sx in (-1, 1) for sy in (-1, 1)]
    return all(np.hypot(*c) < g.bowl_cm / 2 for c in corners)


def _height_corrected(rim: Rim, g: Geometry, centre: tuple[float, float], inside: bool,
                      nadir_px: tuple[float, float], camera_height_cm: float) -> np.ndarray:
    """The cube's offset with its top face's height over the table corrected for (the camera sees the top face,
    which sits above the rim's plane or below it)."""
    top = (g.bowl_floor_cm if inside else 0.0) + g.cube_cm
    nadir = rim.to_cm(np.array([nadir_px]), g.bowl_cm)[0]
    seen = rim.to_cm(np.array([centre]), g.bowl_cm)[0]
    return nadir + (seen - nadir) * (camera_height_cm - top) / (camera_height_cm - g.bowl_height_cm)


def _uncertainty(shape: tuple[int, ...], rim: Rim, g: Geometry, centre: tuple[float, float], yaw: float,
                 outline: np.ndarray, fit: RimFit | None, inside: bool) -> float:
    """Half-width of a 95 % interval on the distance, by drawing every input from what is known of it.

    The rim's centre and axes vary by the fit's resampled standard errors (plus a floor, and 0.6
    of the distance to a weaker edge just outside, which may be the real rim); the cube's centroid
    by half a pixel, more for a ragged or partly hidden blob; the camera's nadir by the tilt it may
    have (the ellipse's own, at least 5 degrees); without a focal
    length, the camera height over 0.45-1.5 m, since the cube's height cannot be corrected for.
    """
    rng = np.random.default_rng(0)
    sx, sy, sa, sb = fit.sigma if fit else (0.0, 0.0, 0.0, 0.0)
    rival = 0.6 * fit.rival_px if fit else 0.0
    hull = cv2.convexHull(outline)
    ragged = 1.0 - cv2.contourArea(outline) / max(cv2.contourArea(hull), 1.0)
    px_per_cm = rim.mean_radius_px / (g.bowl_cm / 2)
    missing = max(0.0, 1.0 - cv2.contourArea(outline) / (g.cube_cm * px_per_cm) ** 2 / 0.85)
    # a ragged blob, or one smaller than a whole top face (partly hidden), has a less certain centre
    cube_sigma = CUBE_PX_SIGMA + 10.0 * ragged + missing * g.cube_cm * px_per_cm / 2
    tilt = max(math.degrees(math.acos(min(1.0, min(rim.a, rim.b) / max(rim.a, rim.b)))), CAMERA_TILT_PRIOR_DEG)
    focal = g.focal_px or (shape[0] / 2) / math.tan(math.radians(30))
    nadir_sigma = focal * math.tan(math.radians(tilt))
    nadir = np.array(_nadir(shape, g))
    distances = np.empty(SAMPLES)
    for k in range(SAMPLES):
        common = rng.normal(0, rival)
        sample = Rim(rim.cx + rng.normal(0, math.hypot(sx, RIM_PX_FLOOR)),
                     rim.cy + rng.normal(0, math.hypot(sy, RIM_PX_FLOOR)),
                     rim.a + common + rng.normal(0, math.hypot(sa, RIM_PX_FLOOR)),
                     rim.b + common + rng.normal(0, math.hypot(sb, RIM_PX_FLOOR)), rim.angle_deg)
        cube = (centre[0] + rng.normal(0, cube_sigma), centre[1] + rng.normal(0, cube_sigma))
        where = nadir + rng.normal(0, nadir_sigma, 2)
        height = None if g.focal_px else rng.uniform(45, 150)
        offset, _ = _offset(shape, sample, g, cube, yaw, (float(where[0]), float(where[1])), height)
        distances[k] = np.hypot(*offset)
    spread = 1.96 * float(np.std(distances))
    if not g.focal_px:  # the reported number is uncorrected: its bias is part of the interval
        uncorrected = float(np.hypot(*rim.to_cm(np.array([centre]), g.bowl_cm)[0]))
        spread = math.hypot(spread, abs(float(np.median(distances)) - uncorrected))
    return spread


@dataclass(frozen=True)
class FrameResult:
    """One frame's outcome: a measurement, or the reason there is none; what the user should know."""

    measurement: Measurement | None
    reason: NotMeasured | None
    detail: str
    caveats: tuple[Caveat, ...]
    rim: Rim | None
    frame: np.ndarray        # the frame measured (undistorted when the lens is known)

    def record(self, caveats: tuple[Caveat, ...] = ()) -> dict[str, object]:
        """The JSON record `harness measure --json` prints for this frame, with the caller's own `caveats` (what
        only it knows, such as a camera moved since calibration) after the frame's."""
        m = self.measurement
        return {
            "measured": m is not None,
            "distance_cm": round(m.distance_cm, 3) if m else None,
            "uncertainty_cm": round(m.uncertainty_cm, 3) if m else None,
            "inside": m.inside if m else None,
            "offset_cm": [round(v, 3) for v in m.offset_cm] if m else None,
            "reasons": [self.reason.value] if self.reason else [],
            "detail": self.detail,
            "caveats": [c.value for c in (*self.caveats, *caveats)],
            "rim_px": {"cx": round(self.rim.cx, 2), "cy": round(self.rim.cy, 2), "a": round(self.rim.a, 2),
                       "b": round(self.rim.b, 2), "angle_deg": round(self.rim.angle_deg, 2)} if self.rim else None,
        }

    def why_not(self) -> str:
        """Why there is no measurement, in words: the reason, then its detail."""
        return f"{self.reason.value.replace('_', ' ')}: {self.detail}" if self.reason else self.detail


def bowl_shape(geometry: Geometry) -> BowlShape:
    """The rim's width and the floor's size as fractions of the rim's radius, for the automatic rim."""
    radius = geometry.bowl_cm / 2
    return BowlShape(rim_width_frac=geometry.rim_width_cm / radius, floor_frac=geometry.floor_cm / 2 / radius)


def measure_image(frame: np.ndarray, geometry: Geometry, camera: CameraIntrinsics | None = None,
                  rim: Rim | None = None, fit: RimFit | None = None, expected_rim: Rim | None = None,
                  segmenter: CubeSegmenter | None = SHIPPED) -> FrameResult:
    """Undistort (when the lens is known), find the rim unless one is given, then measure.

    With the lens's intrinsics the focal length and principal point come from them, not from
    `geometry`; without them the frame is measured as it is and says so. `expected_rim` is the
    calibration's rim (in this frame's pixels): the rim found must be of its size, else the frame
    is refused (the same bowl under the same camera cannot change size). `segmenter`: `locate_cube`'s learned
    check (None: the colour rule alone).
    """
    caveats: list[Caveat] = []
    if camera is not None:
        cam = camera.at_size(frame.shape[1], frame.shape[0])
        frame = cam.undistort(frame)
        geometry = replace(geometry, focal_px=cam.fy, principal_px=(cam.cx, cam.cy))
    else:
        caveats.append(Caveat.LENS_DISTORTION_UNCORRECTED)
    try:
        if rim is None:
            fit = fit_rim(frame, shape=bowl_shape(geometry),
                          expected_radius_px=expected_rim.mean_radius_px if expected_rim else None)
            rim = fit.rim
            if expected_rim is not None:
                check_rim_size(rim, expected_rim)
        try:
            result = measure_frame(frame, rim, geometry, fit, segmenter)
        except RimTooSmall as small:
            if fit is None or expected_rim is not None:
                raise
            fit = _outer_rim_at_cube_scale(frame, geometry, fit, small)
            rim = fit.rim
            result = measure_frame(frame, rim, geometry, fit, segmenter)
        if fit is not None and fit.larger_rim_px and expected_rim is None:
            _refuse_a_larger_bowls_floor(fit)
        if camera is None and geometry.focal_px:
            result = _with_unknown_lens(result, frame.shape, rim, geometry)
    except DetectionError as err:
        return FrameResult(None, err.reason, err.detail, tuple(caveats), rim, frame)
    caveats += result.caveats
    return FrameResult(replace(result, caveats=tuple(caveats)), None, "", tuple(caveats), rim, frame)


def _outer_rim_at_cube_scale(frame: np.ndarray, geometry: Geometry, first: RimFit, small: RimTooSmall) -> RimFit:
    """The rim looked for again at the scale the cube's size says, kept only where it shows what went wrong:
    the rim found first is the bowl's floor edge (`is_floor_of` the new one: at the floor's size for it, off its
    centre by no more than a tilted camera's parallax; tuning frames 5903/25 and 6002/27, where the fit at the
    frame's own scale took the floor's edge and the fit at the rim's found the rim; 8003/00, a camera tilted
    10.5 degrees, whose floor was seen 11 % of the rim's radius off its centre and refused at the 10 % the
    floor was held to here before). Anything else is refused as before (`small`)."""
    shape = bowl_shape(geometry)
    try:
        again = fit_rim(frame, shape=shape, expected_radius_px=small.rim_radius_px)
    except DetectionError:
        raise small from None
    if not is_floor_of(first.rim, again.rim, shape.floor_ratio):
        raise small
    return again


def _refuse_a_larger_bowls_floor(fit: RimFit) -> None:
    """Refuses a rim that may be the floor of a larger bowl (`RimFit.larger_rim_px`: a ring with one edge of its band
    and no floor, inside an edge where that bowl's rim would show), once the cube's size has had its say: a cube that
    looks too large for the rim already has the rim looked for again at its scale (`_outer_rim_at_cube_scale`;
    tuning frame 6002/27, whose floor was fitted first, is measured that way, 0.14 cm off). Inside the bowl the cube
    stands on the floor, farther from the camera, and looks no larger than it should for the floor's edge taken as
    the rim: tuning frame 9301/50 (424x240) was read 1.26 cm off with +/- 0.88."""
    raise DetectionError(NotMeasured.RIM_AMBIGUOUS,
                         f"the rim found ({2 * fit.rim.mean_radius_px:.0f} px across) shows one edge and no floor, "
                         f"inside an edge where a bowl {2 * fit.larger_rim_px:.0f} px across would show its rim: "
                         "it may be that bowl's floor (its inner disc)")


def _with_unknown_lens(result: Measurement, shape: tuple[int, ...], rim: Rim, g: Geometry) -> Measurement:
    """Without a lens calibration the frame's distortion is unknown, anywhere from none to a cheap wide
    lens's barrel (k1 = UNKNOWN_LENS_K1). The distance is read as through the middle of that range (half
    the barrel) and the +/- takes in how far either end would move it, from where the cube and the rim are
    in the frame (far from its centre a lens bends most), added to the +/- (a bias, not a random error):
    the middle halves the worst error a guess at either end makes (read as through no lens at all, a far
    cube through a strong barrel was off by more than 1 cm, its +/- only just covering it)."""
    assert g.focal_px is not None
    seen = float(np.hypot(*result.offset_cm))
    ratios = [_barrel_ratio(result.cube_px, shape, rim, g, k1) for k1 in (UNKNOWN_LENS_K1 / 2, UNKNOWN_LENS_K1)]
    middle = ratios[0]
    shift = max(abs(1.0 - middle), abs(ratios[1] - middle)) * seen
    offset = np.asarray(result.offset_cm) * middle
    # the lens is one unknown for the whole frame, a bias of either sign up to `shift`, not a random error:
    # it adds to the interval rather than in quadrature
    uncertainty = result.uncertainty_cm + shift
    _check_uncertainty(uncertainty, g)
    return replace(result, offset_cm=(float(offset[0]), float(offset[1])), distance_cm=seen * middle,
                   inside=_inside(offset, result.yaw_deg, g), uncertainty_cm=round(uncertainty, 3))


def _barrel_ratio(cube_px: tuple[float, float], shape: tuple[int, ...], rim: Rim, g: Geometry, k1: float) -> float:
    """How much a barrel of `k1` (OpenCV's) changes the cube's distance read in the rim's own scale: the
    rim's axes and the cube straightened as through such a lens, the distance taken again, over as seen."""
    assert g.focal_px is not None
    cx, cy = _nadir(shape, g)
    matrix = np.array([[g.focal_px, 0, cx], [0, g.focal_px, cy], [0, 0, 1.0]])
    t = math.radians(rim.angle_deg)
    axis_a, axis_b = np.array([math.cos(t), math.sin(t)]), np.array([-math.sin(t), math.cos(t)])
    centre = np.array([rim.cx, rim.cy])
    points = np.array([centre + rim.a * axis_a, centre - rim.a * axis_a, centre + rim.b * axis_b,
                       centre - rim.b * axis_b, cube_px])
    moved = cv2.undistortPoints(points.reshape(-1, 1, 2).astype(np.float64), matrix,
                                np.array([k1, 0, 0, 0, 0.0]), P=matrix).reshape(-1, 2)
    middle = (moved[0] + moved[1]) / 2
    straight = Rim(float(middle[0]), float(middle[1]), float(np.linalg.norm(moved[0] - moved[1]) / 2),
                   float(np.linalg.norm(moved[2] - moved[3]) / 2), rim.angle_deg)
    seen = float(np.hypot(*rim.to_cm(np.array([cube_px]), g.bowl_cm)[0]))
    bent = float(np.hypot(*straight.to_cm(moved[4:], g.bowl_cm)[0]))
    return bent / max(seen, 1e-6)


def check_rim_size(rim: Rim, expected: Rim) -> None:
    """The self-check against the calibration: the rim found is the calibrated rim's size, within RIM_SIZE_TOLERANCE."""
    found, predicted = rim.mean_radius_px, expected.mean_radius_px
    if abs(found / predicted - 1) > RIM_SIZE_TOLERANCE:
        raise DetectionError(NotMeasured.RIM_SIZE_INCONSISTENT,
                             f"the rim found is {2 * found:.1f} px across; the calibration's is {2 * predicted:.1f} px "
                             "(another edge of the bowl taken for its rim, or the camera moved: re-calibrate)")


def annotate(frame: np.ndarray, rim: Rim, geometry: Geometry, result: Measurement | None, note: str) -> np.ndarray:
    """The frame with the rim, its centre, the cube and the distance drawn on it, saying where the learned segmenter
    outlined the cube."""
    out = frame.copy()
    cv2.ellipse(out, ((rim.cx, rim.cy), (2 * rim.a, 2 * rim.b), rim.angle_deg), (0, 255, 255), 1)
    cv2.drawMarker(out, (round(rim.cx), round(rim.cy)), (0, 255, 255), cv2.MARKER_CROSS, 12, 1)
    if result is not None:
        cube = (round(result.cube_px[0]), round(result.cube_px[1]))
        cv2.drawMarker(out, cube, (255, 255, 255), cv2.MARKER_TILTED_CROSS, 10, 2)
        cv2.line(out, (round(rim.cx), round(rim.cy)), cube, (255, 255, 255), 1)
    if result is not None and Caveat.CUBE_OUTLINED_BY_SEGMENTER in result.caveats:
        note += " [learned]"   # the caveat cube_outlined_by_segmenter
    # the note fits the frame's width: at 320x240 the 0.5 scale cut it off after "bowl centre"
    width, _ = cv2.getTextSize(note, cv2.FONT_HERSHEY_SIMPLEX, 0.5, 1)[0]
    scale = max(0.3, min(0.5, 0.5 * (out.shape[1] - 12) / max(width, 1)))
    cv2.rectangle(out, (0, 0), (out.shape[1], 22), (0, 0, 0), -1)
    cv2.putText(out, note, (6, 16), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return out
