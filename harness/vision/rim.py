"""The bowl rim in the top view: from two clicks, or found automatically by an ellipse fit.

A camera that is not straight above sees the circular rim as an ellipse; mapping image points
through that ellipse (rotate, then scale each axis to the rim's known diameter) gives
centimetres in the rim plane, to first order in the tilt.

The automatic fit has to hold on real frames: a white bowl on a white table, wood grain, a hard
shadow across the rim, the arm over part of it, blur, noise and JPEG blocks. Edge pixels vote
for circle centres along their gradient (texture votes scatter, a bowl's concentric edges pile
up). Rays from each voted centre find every edge along them; edges that line up as a concentric
ellipse over much of the circumference form a layer (the floor, the inner and the outer edge of
the rim). The rim is a band of known width (`BowlShape`): near the outermost well-supported
layer, each layer is read as the band's outer edge and as its inner edge, each reading refitted
on both edges at once, and the floor's edge, where the bowl's shape puts it, tells the two
readings of a lone edge apart. A white or glossy lip that hides its outer edge, a dark lip that
hides its inner one, a shadow ringing the bowl: the band's outer edge is still the rim. Refitting
on resampled rays gives the fit's own uncertainty, which measurements carry on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np

from harness.vision.lab import rgb_to_lab
from harness.vision.reasons import DetectionError, NotMeasured


@dataclass(frozen=True)
class Rim:
    cx: float
    cy: float
    a: float              # semi-axis along `angle_deg` (px)
    b: float              # the other semi-axis (px)
    angle_deg: float

    def to_cm(self, points: np.ndarray, bowl_cm: float) -> np.ndarray:
        """Image points (N, 2) to rim-plane centimetres relative to the bowl centre."""
        theta = math.radians(self.angle_deg)
        c, s = math.cos(theta), math.sin(theta)
        d = np.atleast_2d(points).astype(float) - [self.cx, self.cy]
        u = d[:, 0] * c + d[:, 1] * s
        v = -d[:, 0] * s + d[:, 1] * c
        radius_cm = bowl_cm / 2
        return np.column_stack([u * radius_cm / self.a, v * radius_cm / self.b])

    def to_image_axes_cm(self, points: np.ndarray, bowl_cm: float) -> np.ndarray:
        """Like `to_cm`, but along the image's own axes (x right, y down): directions keep their meaning."""
        theta = math.radians(self.angle_deg)
        c, s = math.cos(theta), math.sin(theta)
        uv = self.to_cm(points, bowl_cm)
        return np.column_stack([uv[:, 0] * c - uv[:, 1] * s, uv[:, 0] * s + uv[:, 1] * c])

    @property
    def mean_radius_px(self) -> float:
        return (self.a + self.b) / 2


def rim_from_clicks(p1: tuple[float, float], p2: tuple[float, float]) -> Rim:
    """Two clicks on opposite points of the rim: a circle through them (no perspective)."""
    (x1, y1), (x2, y2) = p1, p2
    radius = math.hypot(x2 - x1, y2 - y1) / 2
    if radius < 5:
        raise ValueError("the two rim points are less than 10 px apart")
    return Rim((x1 + x2) / 2, (y1 + y2) / 2, radius, radius, 0.0)


@dataclass(frozen=True)
class RimFit:
    """An automatic rim with what the fit itself says about its quality."""

    rim: Rim
    support: float                                  # share of rays showing the rim's outer or inner edge
    residual_px: float                              # RMS distance of those edges from the fit (outer-edge terms)
    sigma: tuple[float, float, float, float]        # standard error of cx, cy, a, b (px), from resampling
    layers: int                                     # concentric layers seen (floor, inner and outer rim edge)
    rival_px: float = 0.0                           # how far a nearly as well supported reading lies from it
    outer_share: float = 0.0                        # share of rays showing the rim's outer edge
    inner_share: float = 0.0                        # share showing its inner edge (where the wall begins)
    floor_share: float = 0.0                        # support of the floor's edge where the bowl's shape puts it
    floor: Rim | None = None                        # the floor's edge (its ellipse), where it was found
    floor_sigma: tuple[float, float] = (0.0, 0.0)   # standard error of the floor's centre (px)
    inner_weight: float = 0.0                       # share of the fit's points on the band's inner edge
    larger_rim_px: float = 0.0                      # a larger bowl's rim whose floor this may be (0.0: none seen)

    @property
    def score(self) -> float:
        """How bowl-like the ring is: its band's two edges and the floor's edge where the bowl's shape puts it."""
        return self.outer_share + self.inner_share + FLOOR_WEIGHT * self.floor_share


@dataclass(frozen=True)
class _Layer:
    rim: Rim                 # circle fit
    ellipse: Rim | None      # ellipse fit, where the edges go round far enough to fix one
    points: np.ndarray       # (N, 2) edge points on the ellipse, one per supporting ray
    support: float
    residual_px: float


RAYS = 144
MIN_SUPPORT = 0.45       # an edge layer at all
RIM_SUPPORT = 0.5        # rays showing the rim's outer or inner edge
HYPOTHESIS_SUPPORT = 0.3  # a layer worth trying as one edge of the rim's band
AMBIGUOUS_SCORE = 0.95   # a ring elsewhere this bowl-like: no rim is trusted
OUTER_ALONE = 0.8        # an outer edge on this share of the rays is fitted alone
RIVAL_SCORE = 0.85       # another band this well supported widens the uncertainty
WHOLE_RING = 0.9         # a ring whose edges show on this share of its rays, elsewhere, scoring RIVAL_SCORE of the
WHOLE_RING_GAP = 0.2     # best, is the bowl where the best shows this much less of its own: that one is partial
RIM_WIDTH_SIGMA_FRAC = 0.05 / 5.75   # the rim's width known to about half a millimetre
FLOOR_WEIGHT = 0.5      # the floor breaks ties between the band's two readings; the band itself comes first
FLOOR_TOLERANCE = 0.05   # the floor's edge within 5 % of where the bowl's shape puts it
NOMINAL_PARALLAX = (75 - 4.5) / (75 - 0.4)   # a floor 4 cm below the rim, seen from 0.75 m: 5 % smaller
# the floor's edge, 3.8 cm below the rim, is seen off the rim's centre towards the point below the camera by
# 3.8 cm x tan(tilt): up to this share of the rim's 5.75 cm radius for a top camera tilted up to 20 degrees
FLOOR_CENTRE_SLACK = 0.25
LARGER_BOWL_SUPPORT = 0.2   # an edge at a larger bowl's rim, around a one-edged ring with no floor, on this share


@dataclass(frozen=True)
class BowlShape:
    """What the automatic rim knows of the bowl besides its diameter, as fractions of the rim's
    outer radius: the rim's width seen from above (outer edge to where the wall's inner face
    begins) and the inside floor's edge (where the wall meets the floor). The defaults are the
    project's bowl: an 11.5 cm rim with a 0.6 cm lip, a 7.3 cm floor 4.1 cm below the rim."""

    rim_width_frac: float = 0.6 / 5.75
    floor_frac: float = 3.65 / 5.75

    @property
    def inner_ratio(self) -> float:
        return 1.0 - self.rim_width_frac

    @property
    def floor_ratio(self) -> float:
        """The floor's edge over the rim's, as seen: lower, so a little smaller (about 5 %, less from higher up)."""
        return self.floor_frac * NOMINAL_PARALLAX


def find_rim(frame: np.ndarray, min_radius_frac: float = 0.035, max_radius_frac: float = 0.3) -> Rim | None:
    """The rim's outer edge, or None where the automatic fit is not sure of it."""
    try:
        return fit_rim(frame, min_radius_frac, max_radius_frac).rim
    except DetectionError:
        return None


def fit_rim(frame: np.ndarray, min_radius_frac: float = 0.035, max_radius_frac: float = 0.3,
            shape: BowlShape = BowlShape(), expected_radius_px: float | None = None) -> RimFit:
    """The bowl rim's outer edge with its uncertainty; DetectionError with the reason when unsure.

    The rim is a band of known width (`shape`): its outer edge and its inner edge are fitted
    together, and where only one of them shows, the floor's edge inside the bowl says which one it is.

    The edge rules work at the scene's scale, not the camera's: the frame is resampled so that the
    rim spans about WORKING_RIM_PX, the radius they were made at, whatever the resolution, field of
    view or camera height. Where the rim's size is known (`expected_radius_px`: the calibration's
    rim) that sets the scale; else the frame's height does (a 480-line frame). A rim found outside
    the sizes the rules were made on (TUNED_RANGE) is fitted again at its own scale, and the two fits
    must agree: a rim that is one thing at one scale and another at the next (the bowl's inner disc
    at one, its outer edge at the other) is refused, not guessed between.
    """
    height = frame.shape[0]
    first_scale = WORKING_RIM_PX / expected_radius_px if expected_radius_px else WORKING_HEIGHT / height
    first = _fit_scaled(frame, first_scale, min_radius_frac, max_radius_frac, shape)
    second_scale = WORKING_RIM_PX / first.rim.mean_radius_px
    if TUNED_RANGE[0] <= _clip_scale(frame, first_scale) / second_scale <= TUNED_RANGE[1]:
        return _with_lip_edge_doubt(first)
    try:
        second = _fit_scaled(frame, second_scale, min_radius_frac, max_radius_frac, shape)
    except DetectionError as err:
        raise DetectionError(NotMeasured.RIM_FITS_DISAGREE,
                             f"a {first.rim.mean_radius_px:.1f} px rim found at one scale is not found at the "
                             f"rim's own ({err.detail})") from None
    try:
        _check_agreement(first, second)
    except DetectionError:
        clearer = _clearly_the_bowl(first, second)
        if clearer is None:
            raise
        return _with_lip_edge_doubt(clearer)
    # agreeing, a small rim's first fit is the better placed one: upscaled, its edges are no sharper. A large rim
    # reduced only part way was fitted at a size the rules were not made for, the second at the one they were:
    # that one is kept (tuning frames 8003/34 and 9101/69 at 1920x1080, a sharp 230 px rim: reduced part way, a
    # band of the lip's shading 26-36 px off rivalled it, +/- 4.2 cm, and the rim was read 3 % small)
    if second_scale < _clip_scale(frame, first_scale):
        return _with_lip_edge_doubt(second)
    return _with_lip_edge_doubt(first)


WORKING_RIM_PX = 47.0     # the rim's radius (px) the edge rules were made at: the project's 640x480 top camera
WORKING_HEIGHT = 480      # with no rim size known, a frame is first looked at this many lines high
TUNED_RANGE = (0.6, 1.9)  # rims of 0.6-1.9 WORKING_RIM_PX (the stress set's, 28-90 px) are fitted as they are
AGREE_FRACTION = 0.04     # two fits of the rim agree within 4 % of its radius (size and centre)
# of two fits that disagree, one scoring 70 % of the most a ring can (both edges of the band and the floor all
# round: 2.5) may be kept. On the tuning sets, fits that would have been kept by score but were another edge or
# ring scored 1.35 at most; the bowl's own, 1.42 up, but under 1.75 one read a far cube's rim 4 % small (9201/53)
CLEAR_SCORE = 0.7 * (2 + FLOOR_WEIGHT)
LIP_EDGE_PX = 0.5        # the lip's inner edge placed to about a pixel of the frame (95 %)


def _with_lip_edge_doubt(fit: RimFit) -> RimFit:
    """The fit with the doubt of where the lip's inner edge is seen: the edge between a lip and the wall below it is
    placed to about a pixel of the frame at 95 % (LIP_EDGE_PX its standard error: the rounded lip's shading, blur),
    more than the lip's width tolerance on a rim of a few dozen pixels. It weighs by the share of the fit resting on
    that edge (tuning frame 9101/11 at 800x600: the outer edge hidden, the rim read 1 px inside, 0.47 cm off with
    +/- 0.45)."""
    doubt = fit.inner_weight * LIP_EDGE_PX
    sx, sy, sa, sb = fit.sigma
    return replace(fit, sigma=(sx, sy, math.hypot(sa, doubt), math.hypot(sb, doubt)))


def _clip_scale(frame: np.ndarray, scale: float) -> float:
    """The resampling actually used: the working frame between 160 and 1600 lines high."""
    height = frame.shape[0]
    return min(max(scale, 160 / height), 1600 / height)


def _check_agreement(first: RimFit, second: RimFit) -> None:
    a, b = first.rim, second.rim
    radius = b.mean_radius_px
    slack = AGREE_FRACTION * radius + 3 * math.hypot(*first.sigma[2:], *second.sigma[2:])
    size_gap = abs(a.mean_radius_px - radius)
    centre_gap = math.hypot(a.cx - b.cx, a.cy - b.cy)
    if size_gap > slack or centre_gap > slack:
        raise DetectionError(NotMeasured.RIM_FITS_DISAGREE,
                             f"two fits of the rim disagree: {2 * a.mean_radius_px:.1f} px across at "
                             f"({a.cx:.0f}, {a.cy:.0f}) and {2 * radius:.1f} px at ({b.cx:.0f}, {b.cy:.0f}) "
                             "(another edge of the bowl taken for its rim at one scale?)")


def _clearly_the_bowl(first: RimFit, second: RimFit) -> RimFit | None:
    """Of two fits that disagree, the one that shows the bowl clearly better, or None where neither does.

    Clearly better: it scores at least CLEAR_SCORE (`RimFit.score`: the band's two edges and the floor's edge
    where the bowl's shape puts it), and the other scores no more than a rival reading may (RIVAL_SCORE of it).
    The other scale saw a shadow's edge or the lip's inner edge where this one saw the bowl's band and floor
    (tuning frames 7001/18, 5952/59, 9202/12 at 640x480-1920x1080), or a round arm joint beside it (9202/66).
    A choice by score is still a choice: the other reading is taken to lie at the edge of this one's 95 %
    interval (its `sigma` widened to reach it, in centre and in size), so that a far cube, where a pixel of the
    rim's scale is a centimetre, carries that doubt or is refused as too uncertain."""
    better, worse = (first, second) if first.score >= second.score else (second, first)
    if better.score < CLEAR_SCORE or worse.score > RIVAL_SCORE * better.score:
        return None
    radius = better.rim.mean_radius_px
    centre_gap = math.hypot(better.rim.cx - worse.rim.cx, better.rim.cy - worse.rim.cy)
    if centre_gap > 0.5 * radius:   # another round thing elsewhere, not another reading of this rim
        return better
    size_gap = abs(radius - worse.rim.mean_radius_px)
    if size_gap + centre_gap > 0.25 * radius:   # readings this far apart: a doubt no +/- keeps under its limit
        return None
    # the other reading taken as lying at the edge of this one's 95 % interval, in centre and in size
    sx, sy, sa, sb = better.sigma
    dx, dy = abs(better.rim.cx - worse.rim.cx) / 1.96, abs(better.rim.cy - worse.rim.cy) / 1.96
    ds = size_gap / 1.96
    return replace(better, sigma=(math.hypot(sx, dx), math.hypot(sy, dy), math.hypot(sa, ds), math.hypot(sb, ds)))


def _fit_scaled(frame: np.ndarray, scale: float, min_radius_frac: float, max_radius_frac: float,
                shape: BowlShape) -> RimFit:
    """`_fit_rim` on the frame resampled by `scale`, its answer in the frame's own pixels."""
    scale = _clip_scale(frame, scale)
    h, w = frame.shape[:2]
    if abs(scale - 1) < 0.02:
        return _fit_rim(frame, min_radius_frac, max_radius_frac, shape)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    sx, sy = size[0] / w, size[1] / h
    working = cv2.resize(frame, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    # the minimum and maximum radius stay fractions of the frame's short side, as in the frame itself
    fit = _fit_rim(working, min_radius_frac, max_radius_frac, shape)
    mean = (sx + sy) / 2

    def back(rim: Rim) -> Rim:
        return Rim((rim.cx + 0.5) / sx - 0.5, (rim.cy + 0.5) / sy - 0.5, rim.a / mean, rim.b / mean, rim.angle_deg)

    sigma = tuple(v / mean for v in fit.sigma)
    return replace(fit, rim=back(fit.rim), residual_px=fit.residual_px / mean,
                   sigma=(sigma[0], sigma[1], sigma[2], sigma[3]), rival_px=fit.rival_px / mean,
                   larger_rim_px=fit.larger_rim_px / mean,
                   floor=back(fit.floor) if fit.floor is not None else None,
                   floor_sigma=(fit.floor_sigma[0] / mean, fit.floor_sigma[1] / mean))


def _fit_rim(frame: np.ndarray, min_radius_frac: float, max_radius_frac: float, shape: BowlShape) -> RimFit:
    """`fit_rim` at the frame's own scale: the edge rules, in pixels made for a WORKING_RIM_PX rim."""
    h, w = frame.shape[:2]
    r_min, r_max = min_radius_frac * min(h, w), max_radius_frac * min(h, w)
    lab = _smoothed_lab(frame)
    half = cv2.resize(lab, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    gx, gy, magnitude = _colour_gradient(half)
    centres = [(2 * x + 0.5, 2 * y + 0.5) for x, y in _voted_centres(gx, gy, magnitude, r_min / 2, r_max / 2)]
    if not centres:
        raise DetectionError(NotMeasured.RIM_NOT_FOUND, "no circular edges in the frame")
    best: tuple[float, _Ring, list[_Ring], list[_Layer]] | None = None
    per_centre: list[tuple[_Ring, list[_Ring], list[_Layer]]] = []
    weakest_miss = 0.0
    # the floor's edge lies well inside the rim: for the smallest rim looked for, under r_min. Layers are taken
    # down to that floor's size, so that a small bowl can show its floor (a round arm joint beside it, larger,
    # showed an inner edge where a floor would be, and outscored it: 9101/10, 6 cm off); only those of a rim's
    # size can be the rim
    floor_min = (1 - FLOOR_TOLERANCE) * shape.floor_ratio * r_min
    for centre in centres:
        rays = _edges_along_rays(lab, centre, r_min, r_max)
        all_sizes = _layers_on(rays, floor_min, r_max)
        layers = [layer for layer in all_sizes if layer.rim.mean_radius_px >= r_min]
        weakest_miss = max([weakest_miss, *(layer.support for layer in layers)])
        good = [layer for layer in layers if layer.support >= MIN_SUPPORT]
        if not good:
            continue
        supports = sorted((layer.support for layer in good), reverse=True)
        # the outermost edge nearly as well supported as the best is near the rim: beyond it there is
        # only table, whose texture, shadows and halos make partial rings at most
        rim_edge = max((layer for layer in good if layer.support >= 0.6 * supports[0]),
                       key=lambda layer: layer.rim.a)
        rings = _ring_hypotheses(rays, rim_edge, layers, shape, all_sizes)
        if not rings:
            continue
        # the bowl is the centre whose rim band and floor show best (a round arm joint has no floor)
        ring = max(rings, key=lambda r: r.score)
        per_centre.append((ring, rings, layers))
        if best is None or ring.score > best[0]:
            best = (ring.score, ring, rings, layers)
    if best is None:
        if weakest_miss > 0:
            raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                                 f"edges found on only {100 * weakest_miss:.0f}% of the rim "
                                 f"(needs {100 * MIN_SUPPORT:.0f}%)")
        raise DetectionError(NotMeasured.RIM_NOT_FOUND, "no ring of edges around any candidate centre")
    _, ring, rings, all_layers = best
    ratio = shape.inner_ratio

    def apart(one: _Ring, other: _Ring) -> bool:
        return math.hypot(other.rim.cx - one.rim.cx, other.rim.cy - one.rim.cy) > 0.5 * one.rim.mean_radius_px

    def partial_beside(one: _Ring, other: _Ring) -> bool:
        """`other` seen on much less of its circumference than `one`, a ring seen all round, scoring at most a
        little more."""
        return (one.either_share >= WHOLE_RING and other.either_share <= one.either_share - WHOLE_RING_GAP
                and other.score * RIVAL_SCORE <= one.score)

    # a ring seen all round beats rings seen on part of their circumference that score a little higher: round
    # parts of the arm, an inner edge taken for the bowl's floor, outscored a dark bowl that shows no floor
    # (tuning frames 7002/31 on the undistorted frame, 4.2 cm off; 7003/18, refused for a cube too small at
    # such a ring's scale). Those partial rings are then no rivals to it; any other ring as good still is.
    whole = [(other, other_rings, layers) for other, other_rings, layers in per_centre
             if partial_beside(other, ring) and apart(ring, other)]
    if whole:
        ring, rings, all_layers = max(whole, key=lambda chosen: chosen[0].score)
    elsewhere = [other for other, _, _ in per_centre if other.score >= AMBIGUOUS_SCORE * ring.score
                 and apart(ring, other) and not partial_beside(ring, other)]
    if elsewhere:
        other = elsewhere[0].rim
        raise DetectionError(NotMeasured.RIM_AMBIGUOUS,
                             f"a ring at ({other.cx:.0f}, {other.cy:.0f}) px looks as much like the rim as the one at "
                             f"({ring.rim.cx:.0f}, {ring.rim.cy:.0f}) px (round arm joints, the rim half hidden?)")
    rim = ring.rim
    if ring.either_share < RIM_SUPPORT:
        raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                             f"the rim's edges are found on only {100 * ring.either_share:.0f}% of it "
                             f"(needs {100 * RIM_SUPPORT:.0f}%)")
    washed = _clipped_share(frame, rim)
    # clipping hides a white lip's outer edge; where either edge of the band shows on half the rim,
    # the band (its known width) still fixes the outer one
    if washed > 0.4 and max(ring.outer_share, ring.inner_share) < RIM_SUPPORT:
        raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                             f"{100 * washed:.0f}% of the pixels around the rim are clipped white or black "
                             "(exposure): its outer edge cannot be told from the table")
    if ring.ellipse and min(rim.a, rim.b) / max(rim.a, rim.b) < 0.9:
        raise DetectionError(NotMeasured.ELLIPSE_INCONSISTENT_WITH_CAMERA,
                             f"the rim's edges make a {rim.a:.0f} x {rim.b:.0f} px ellipse: a camera "
                             "looking down within 25 degrees of vertical sees the rim nearly round")
    # another band nearly as well supported (a shadow's edge with an edge inside it) could be the rim
    # as well: the distance to it is part of what the fit does not know
    rivals = [abs(other.rim.mean_radius_px - rim.mean_radius_px) for other in rings
              if other.score >= RIVAL_SCORE * ring.score
              and math.hypot(other.rim.cx - rim.cx, other.rim.cy - rim.cy) < 0.1 * rim.mean_radius_px]
    sigma = _resampled_sigma(ring.points(ratio), ring.ellipse)
    # the inner edge's share of the fit carries the rim width's own tolerance into the scale
    width_sigma = ring.inner_weight * rim.mean_radius_px * RIM_WIDTH_SIGMA_FRAC / ratio
    sigma = (sigma[0], sigma[1], math.hypot(sigma[2], width_sigma), math.hypot(sigma[3], width_sigma))
    # the floor's centre, seen shifted towards the point below the camera, tells the camera's tilt
    # (`plane.py`): its ellipse where its edge goes round far enough, else its circle
    floor = ring.floor if ring.floor is not None and ring.floor.support >= MIN_SUPPORT else None
    floor_rim = (floor.ellipse or floor.rim) if floor is not None else None
    floor_sigma = _resampled_sigma(floor.points, floor.ellipse is not None)[:2] if floor is not None else (0.0, 0.0)
    return RimFit(rim, ring.either_share, ring.residual_px, sigma,
                  sum(1 for other in all_layers if other.support >= MIN_SUPPORT), max(rivals, default=0.0),
                  ring.outer_share, ring.inner_share, ring.floor_share, floor_rim, floor_sigma, ring.inner_weight,
                  _larger_bowl_rim(ring, all_layers, shape))


def _larger_bowl_rim(ring: _Ring, layers: list[_Layer], shape: BowlShape) -> float:
    """The rim's radius (px) of a bowl whose floor the ring may be, or 0.0: the ring shows one edge of its band and
    no floor, and a concentric edge (`layers`) is where that larger bowl's rim would show. A bowl's inner light disc,
    sharp against a dark lip whose edges are faint on a textured table, makes such a ring, and the rim's own edges
    show too faintly to be tried as the rim (tuning frame 9301/50 at 424x240: the disc taken for the rim at both
    scales, the cube inside the bowl read 1.26 cm off with +/- 0.88; the lip's edges at 1.5x the disc's radius on a
    quarter of the rays). A ring showing both edges of its band is a band, not a floor's edge: on the tuning sets such
    rings with a faint concentric edge at that size were the rim (6003/19, 9301/10)."""
    if ring.floor_share >= MIN_SUPPORT or min(ring.outer_share, ring.inner_share) >= HYPOTHESIS_SUPPORT:
        return 0.0
    # the edge the ring rests on is the candidate floor's edge; the larger rim shows its outer or inner edge
    edge = ring.rim.mean_radius_px * (shape.inner_ratio if ring.inner_share > ring.outer_share else 1.0)
    larger = edge / shape.floor_ratio
    for layer in layers:
        if layer.support < LARGER_BOWL_SUPPORT:
            continue
        if math.hypot(layer.rim.cx - ring.rim.cx, layer.rim.cy - ring.rim.cy) > FLOOR_CENTRE_SLACK * larger:
            continue
        if any(abs(layer.rim.mean_radius_px / (larger * ratio) - 1) <= FLOOR_TOLERANCE
               for ratio in (1.0, shape.inner_ratio)):
            return larger
    return 0.0


def _ring_hypotheses(rays: _Rays, near_rim: _Layer, layers: list[_Layer], shape: BowlShape,
                     floors: list[_Layer]) -> list[_Ring]:
    """Bands of the rim's width near the best-supported outer layer: each layer close to it taken
    as the band's outer edge, and as its inner edge (the outer one then lies a rim's width beyond).

    Where a band shows one edge only (a dark lip on a dark wall, a grey lip on a grey table), the
    edge alone cannot say whether it is the band's outer or inner edge: the floor's edge, a strong
    concentric layer well inside (among `floors`: layers down to the smallest rim's floor), sits where the bowl's
    shape puts it for the right one only."""
    ratio = shape.inner_ratio
    reference = near_rim.rim
    rings: list[_Ring] = []
    for layer in layers:
        if not 0.75 <= layer.rim.a / reference.a <= 1.3 or layer.support < HYPOTHESIS_SUPPORT:
            continue
        if math.hypot(layer.rim.cx - reference.cx, layer.rim.cy - reference.cy) > 0.15 * reference.a:
            continue
        seed = layer.ellipse or layer.rim
        for guess in (seed, _scaled(seed, 1 / ratio)):
            ring = _refine_ring(rays, guess, ratio)
            if ring is not None and not any(abs(ring.rim.a - other.rim.a) < 0.5 and abs(ring.rim.b - other.rim.b) < 0.5
                                            for other in rings):
                floor = _floor_layer(ring.rim, floors, shape.floor_ratio)
                rings.append(replace(ring, floor_share=floor.support if floor else 0.0, floor=floor))
    return rings


def _floor_layer(rim: Rim, layers: list[_Layer], floor_ratio: float) -> _Layer | None:
    """The best-supported layer where the floor's edge should be if `rim` is the outer edge (None if none).
    Lower than the rim, the floor is seen a little off its centre (parallax): a loose centre test."""
    return max((layer for layer in layers if is_floor_of(layer.rim, rim, floor_ratio)),
               key=lambda layer: layer.support, default=None)


def is_floor_of(inner: Rim, rim: Rim, floor_ratio: float) -> bool:
    """`inner` is where the bowl's floor edge is seen for a rim `rim`: at its size (FLOOR_TOLERANCE), and off its
    centre by no more than a tilted top camera's parallax shows (FLOOR_CENTRE_SLACK)."""
    return (abs(inner.mean_radius_px / rim.mean_radius_px - floor_ratio) <= FLOOR_TOLERANCE * floor_ratio
            and math.hypot(inner.cx - rim.cx, inner.cy - rim.cy) <= FLOOR_CENTRE_SLACK * rim.mean_radius_px)


def _smoothed_lab(frame: np.ndarray) -> np.ndarray:
    """Lab in roughly perceptual units (L 0..100), smoothed against noise and JPEG blocks."""
    lab = rgb_to_lab(frame).astype(np.float32)
    lab[:, :, 0] *= 100 / 255
    lab[:, :, 1:] -= 128
    return cv2.GaussianBlur(lab, (0, 0), 1.5)


def _colour_gradient(lab: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradient of the Lab image: each channel's Sobel, summed along the strongest channel's direction."""
    gxs = [cv2.Sobel(lab[:, :, c], cv2.CV_32F, 1, 0, ksize=3) for c in range(3)]
    gys = [cv2.Sobel(lab[:, :, c], cv2.CV_32F, 0, 1, ksize=3) for c in range(3)]
    # structure tensor of the three channels: its main eigenvector is the edge normal
    gxx = sum(g * g for g in gxs)
    gyy = sum(g * g for g in gys)
    gxy = sum(a * b for a, b in zip(gxs, gys, strict=True))
    angle = 0.5 * np.arctan2(2 * gxy, gxx - gyy)
    magnitude = np.sqrt(0.5 * (gxx + gyy + np.sqrt((gxx - gyy) ** 2 + 4 * gxy ** 2)))
    return np.cos(angle), np.sin(angle), magnitude


def _voted_centres(gx: np.ndarray, gy: np.ndarray, magnitude: np.ndarray, r_min: float, r_max: float,
                   edges: int = 5000, peaks: int = 5) -> list[tuple[float, float]]:
    """Circle centres by gradient voting: each strong edge pixel votes along its normal, both ways."""
    h, w = magnitude.shape
    # thin the edges: keep pixels at least as strong as both neighbours across the edge
    ys, xs = np.mgrid[0:h, 0:w]
    step_x, step_y = np.round(gx).astype(int), np.round(gy).astype(int)
    ahead = magnitude[np.clip(ys + step_y, 0, h - 1), np.clip(xs + step_x, 0, w - 1)]
    behind = magnitude[np.clip(ys - step_y, 0, h - 1), np.clip(xs - step_x, 0, w - 1)]
    ridge = (magnitude >= ahead) & (magnitude >= behind) & (magnitude > 3 * np.median(magnitude))
    ys, xs = np.nonzero(ridge)
    if len(xs) == 0:
        return []
    values = magnitude[ys, xs]
    order = np.argsort(values)[::-1][:edges]
    xs, ys = xs[order], ys[order]
    weight = np.ones(len(xs))
    nx, ny = gx[ys, xs], gy[ys, xs]
    radii = np.arange(r_min, r_max, 1.0)
    accumulator = np.zeros(h * w)
    for sign in (-1.0, 1.0):
        cx = np.round(xs[:, None] + sign * nx[:, None] * radii[None, :]).astype(int)
        cy = np.round(ys[:, None] + sign * ny[:, None] * radii[None, :]).astype(int)
        ok = (cx >= 0) & (cy >= 0) & (cx < w) & (cy < h)
        accumulator += np.bincount((cy * w + cx)[ok], np.broadcast_to(weight[:, None], cx.shape)[ok], h * w)
    accumulator = cv2.GaussianBlur(accumulator.reshape(h, w).astype(np.float32), (0, 0), 1.0)
    found = []
    for _ in range(peaks):
        _, top, _, (x, y) = cv2.minMaxLoc(accumulator)
        if top <= 0:
            break
        found.append((float(x), float(y)))
        cv2.circle(accumulator, (x, y), max(3, int(r_min * 0.6)), 0, -1)
    return found


@dataclass(frozen=True)
class _Rays:
    """Every edge found along rays from one voted centre: what the layers and the ring fit are made of."""

    centre: tuple[float, float]
    phis: np.ndarray          # (RAYS,) ray angles
    candidates: np.ndarray    # (RAYS, K) edge radii along each ray, NaN-padded
    usable: np.ndarray        # (RAYS,) rays that stay inside the frame over most of their length
    radii: np.ndarray         # the sampled radii
    r_edge: np.ndarray        # all edge radii, flattened
    ray: np.ndarray           # the ray of each edge in `r_edge`


def _edges_along_rays(lab: np.ndarray, centre: tuple[float, float], r_min: float, r_max: float) -> _Rays:
    """Colour-gradient peaks along RAYS rays from `centre`, to a tenth of a pixel."""
    h, w = lab.shape[:2]
    step = 0.5
    radii = np.arange(0.5 * r_min, 1.15 * r_max, step, dtype=np.float32)
    phis = np.linspace(0, 2 * np.pi, RAYS, endpoint=False).astype(np.float32)
    map_x = centre[0] + np.cos(phis)[:, None] * radii[None, :]
    map_y = centre[1] + np.sin(phis)[:, None] * radii[None, :]
    valid = (map_x >= 1) & (map_y >= 1) & (map_x < w - 2) & (map_y < h - 2)
    profile = cv2.remap(lab, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    diff = profile[:, 2:] - profile[:, :-2]
    strength = np.sqrt(np.sum(diff * diff, axis=2))
    strength[~(valid[:, 2:] & valid[:, :-2])] = 0
    noise = np.median(strength) + 1e-3
    threshold = max(3.0 * noise, 1.0)
    centre_s = strength[:, 1:-1]
    peak = (centre_s > strength[:, :-2]) & (centre_s >= strength[:, 2:]) & (centre_s > threshold)
    ray, index = np.nonzero(peak)
    left, mid, right = strength[ray, index], strength[ray, index + 1], strength[ray, index + 2]
    curvature = np.minimum(left - 2 * mid + right, -1e-6)  # negative at a maximum
    offset = np.clip(0.5 * (left - right) / curvature, -0.5, 0.5)
    r_edge = radii[index + 2] + offset * step  # strength[:, k] sits between radii k and k + 2
    per_ray = np.bincount(ray, minlength=RAYS)
    width = max(1, int(per_ray.max()) if len(per_ray) else 1)
    candidates = np.full((RAYS, width), np.nan)
    slot = np.arange(len(ray)) - np.concatenate([[0], np.cumsum(per_ray)])[ray]
    candidates[ray, slot] = r_edge
    usable = np.mean(valid, axis=1) > 0.5
    return _Rays(centre, phis, candidates, usable, radii, r_edge, ray)


def _layers_on(rays: _Rays, r_min: float, r_max: float) -> list[_Layer]:
    """Concentric ellipses of edges around the rays' centre: radii that recur over many rays, each
    refined into a layer (a circle, and an ellipse where its edges go round far enough)."""
    centre, phis, candidates, usable, radii, r_edge, ray = (rays.centre, rays.phis, rays.candidates, rays.usable,
                                                            rays.radii, rays.r_edge, rays.ray)
    step = float(radii[1] - radii[0])
    histogram: np.ndarray = np.zeros(len(radii))
    bins = np.clip(((r_edge - radii[0]) / step).astype(int), 0, len(radii) - 1)
    np.add.at(histogram, np.unique(ray * len(radii) + bins) % len(radii), 1)
    histogram = np.convolve(histogram, np.ones(5), mode="same")
    layers: list[_Layer] = []
    for _ in range(8):
        k = int(np.argmax(histogram))
        if histogram[k] < 0.2 * RAYS:
            break
        histogram[max(0, k - 4):k + 5] = 0
        layer = _refine_layer(centre, phis, candidates, usable, float(radii[k]))
        if layer is None or not r_min <= layer.rim.mean_radius_px <= r_max:
            continue
        if any(abs(layer.rim.a - other.rim.a) < 1.0 and math.hypot(layer.rim.cx - other.rim.cx,
                                                                   layer.rim.cy - other.rim.cy) < 1.0
               for other in layers):
            continue  # the same edge, reached from another radius
        layers.append(layer)
    return layers


def _refine_layer(centre: tuple[float, float], phis: np.ndarray, candidates: np.ndarray,
                  usable: np.ndarray, radius: float) -> _Layer | None:
    """Pick, on each ray, the edge nearest the current circle; refit; repeat with a tighter band."""
    cos, sin = np.cos(phis), np.sin(phis)
    expected = np.full(len(phis), radius)
    filled = ~np.all(np.isnan(candidates), axis=1)
    rows = np.arange(len(phis))
    circle = None
    for tolerance in (max(3.0, 0.08 * radius), 2.5, 1.5, 1.5):
        gap = np.abs(candidates - expected[:, None])
        gap[np.isnan(gap)] = np.inf
        j = np.argmin(gap, axis=1)
        near = filled & (gap[rows, j] <= tolerance)
        if near.sum() < 12:
            return None
        r_k = candidates[rows[near], j[near]]
        points = np.column_stack([centre[0] + r_k * cos[near], centre[1] + r_k * sin[near]])
        circle = _circle_fit(points)
        if circle is None:
            return None
        expected = _ellipse_radius_along_rays(circle, centre, phis)
    if circle is None:   # (the loop above fitted one, or returned)
        return None
    distance = np.abs(np.hypot(points[:, 0] - circle.cx, points[:, 1] - circle.cy) - circle.a)
    keep = distance <= 1.5
    points = points[keep]
    support = min(1.0, float(keep.sum() / max(1, usable.sum())))
    angles = np.sort(np.arctan2(points[:, 1] - circle.cy, points[:, 0] - circle.cx))
    widest_gap = float(np.max(np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi])))) if len(angles) else 7.0
    ellipse = None
    if widest_gap < math.radians(75) and len(points) >= 20:
        (cx, cy), (d1, d2), angle = cv2.fitEllipse(points.astype(np.float32))
        ellipse = Rim(float(cx), float(cy), float(d1 / 2), float(d2 / 2), float(angle))
    fitted = ellipse or circle
    residual = np.abs(np.linalg.norm(fitted.to_cm(points, 2.0), axis=1) - 1.0) * fitted.mean_radius_px
    return _Layer(circle, ellipse, points, support, float(np.sqrt(np.mean(residual ** 2))))


@dataclass(frozen=True)
class _Ring:
    """The rim as a band of known width: its outer edge, fitted on both of the band's edges."""

    rim: Rim                 # the outer edge
    outer: np.ndarray        # (N, 2) outer-edge points, one per ray that shows it
    inner: np.ndarray        # (M, 2) inner-edge points as seen, in the fit (none where the outer edge sufficed)
    outer_share: float       # shares of the usable rays showing each edge
    inner_share: float
    either_share: float      # rays showing at least one of them
    residual_px: float
    ellipse: bool            # fitted as an ellipse (the edges go round far enough), else a circle
    floor_share: float = 0.0  # support of the floor's edge where the bowl's shape puts it for this rim
    floor: _Layer | None = None

    @property
    def score(self) -> float:
        return self.outer_share + self.inner_share + FLOOR_WEIGHT * self.floor_share

    @property
    def inner_weight(self) -> float:
        """How much of the fit rests on the inner edge, whose scale depends on the rim's width."""
        return len(self.inner) / max(1, len(self.inner) + len(self.outer))

    def points(self, ratio: float) -> np.ndarray:
        """All points as outer-edge points: the inner ones pushed out by the band's width."""
        centre = np.array([self.rim.cx, self.rim.cy])
        return np.vstack([self.outer, centre + (self.inner - centre) / ratio])


def _scaled(rim: Rim, factor: float) -> Rim:
    return Rim(rim.cx, rim.cy, rim.a * factor, rim.b * factor, rim.angle_deg)


def _refine_ring(rays: _Rays, guess: Rim, ratio: float) -> _Ring | None:
    """Fit the rim's outer edge on both edges of its band: on each ray, the edge nearest the outer
    ellipse, and the edge nearest the inner one (the outer scaled by `ratio`, the band's inner edge
    over its outer edge). A rim whose outer edge barely shows against the table (white on white, a
    glossy lip catching the light) still shows where its wall begins; a shadow's edge outside the rim
    has no partner edge a rim's width inside it."""
    cos, sin = np.cos(rays.phis), np.sin(rays.phis)
    rows = np.arange(len(rays.phis))
    filled = ~np.all(np.isnan(rays.candidates), axis=1)
    centre = np.array(rays.centre)
    rim = guess
    band = (1 - ratio) * guess.mean_radius_px
    outer: np.ndarray = np.empty((0, 2))
    inner: np.ndarray = outer
    for tolerance in (min(3.0, 0.4 * band), 1.5, 1.2, 1.2):
        picked = []
        for edge in (rim, _scaled(rim, ratio)):
            expected = _ellipse_radius_along_rays(edge, rays.centre, rays.phis)
            gap = np.abs(rays.candidates - expected[:, None])
            gap[np.isnan(gap)] = np.inf
            j = np.argmin(gap, axis=1)
            near = filled & (gap[rows, j] <= tolerance)
            r_k = rays.candidates[rows[near], j[near]]
            picked.append(np.column_stack([centre[0] + r_k * cos[near], centre[1] + r_k * sin[near]]))
        outer, inner = picked
        if len(outer) + len(inner) < 12:
            return None
        middle = np.array([rim.cx, rim.cy])
        points = np.vstack([outer, middle + (inner - middle) / ratio])
        fitted = _circle_fit(points)
        if fitted is None:
            return None
        rim = fitted
    # the final fit: an ellipse where the edges go round far enough to fix one, without outliers
    middle = np.array([rim.cx, rim.cy])
    points = np.vstack([outer, middle + (inner - middle) / ratio])
    angles = np.sort(np.arctan2(points[:, 1] - rim.cy, points[:, 0] - rim.cx))
    widest_gap = float(np.max(np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi]))))
    ellipse = widest_gap < math.radians(75) and len(points) >= 20
    if ellipse:
        (cx, cy), (d1, d2), angle = cv2.fitEllipse(points.astype(np.float32))
        rim = Rim(float(cx), float(cy), float(d1 / 2), float(d2 / 2), float(angle))
    distance = np.abs(np.linalg.norm(rim.to_cm(points, 2.0), axis=1) - 1.0) * rim.mean_radius_px
    keep = distance <= 1.5
    outer, inner = outer[keep[:len(outer)]], inner[keep[len(outer):]]
    usable = max(1, int(rays.usable.sum()))
    rays_out = _rays_of(outer, rays)
    rays_in = _rays_of(inner, rays)
    residual = float(np.sqrt(np.mean(distance[keep] ** 2))) if keep.any() else math.inf
    outer_share = min(1.0, len(rays_out) / usable)
    ring = _Ring(rim, outer, inner, outer_share, min(1.0, len(rays_in) / usable),
                 min(1.0, len(rays_out | rays_in) / usable), residual, ellipse)
    if outer_share >= OUTER_ALONE and len(outer) >= 20:
        # the outer edge is the measurement itself: where it shows nearly all round, the inner
        # edge (whose place depends on the lip's width and shading) would only add its bias
        angles = np.sort(np.arctan2(outer[:, 1] - rim.cy, outer[:, 0] - rim.cx))
        alone = float(np.max(np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi])))) < math.radians(75)
        fitted = _fit(outer, alone)
        if fitted is not None:
            ring = replace(ring, rim=fitted, ellipse=alone, inner=np.empty((0, 2)))
    return ring


def _fit(points: np.ndarray, ellipse: bool) -> Rim | None:
    if ellipse:
        (cx, cy), (d1, d2), angle = cv2.fitEllipse(points.astype(np.float32))
        return Rim(float(cx), float(cy), float(d1 / 2), float(d2 / 2), float(angle))
    return _circle_fit(points)


def _rays_of(points: np.ndarray, rays: _Rays) -> set[int]:
    """Which rays these points lie on."""
    phi = np.arctan2(points[:, 1] - rays.centre[1], points[:, 0] - rays.centre[0]) % (2 * np.pi)
    return set(np.round(phi / (2 * np.pi) * len(rays.phis)).astype(int) % len(rays.phis))


def _circle_fit(points: np.ndarray) -> Rim | None:
    """Least-squares circle (Kasa): robust where only part of the rim is in view."""
    x, y = points[:, 0], points[:, 1]
    design = np.column_stack([x, y, np.ones_like(x)])
    (a, b, c), *_ = np.linalg.lstsq(design, x * x + y * y, rcond=None)
    cx, cy = a / 2, b / 2
    r2 = c + cx * cx + cy * cy
    if not np.isfinite(r2) or r2 <= 16:
        return None
    r = math.sqrt(r2)
    return Rim(float(cx), float(cy), r, r, 0.0)


def _clipped_share(frame: np.ndarray, rim: Rim) -> float:
    """Share of the pixels in a band around the rim that are saturated white or crushed black."""
    mask = np.zeros(frame.shape[:2], np.uint8)
    centre = (round(rim.cx), round(rim.cy))
    cv2.circle(mask, centre, round(rim.mean_radius_px * 1.2), 255, -1)
    cv2.circle(mask, centre, round(rim.mean_radius_px * 0.85), 0, -1)
    band = frame[mask > 0]
    if len(band) == 0:
        return 0.0
    clipped = np.all(band >= 250, axis=1) | np.all(band <= 5, axis=1)
    return float(np.mean(clipped))


def _ellipse_radius_along_rays(rim: Rim, origin: tuple[float, float], phis: np.ndarray) -> np.ndarray:
    """Where each ray from `origin` meets the ellipse (the origin lies inside it)."""
    theta = math.radians(rim.angle_deg)
    c, s = math.cos(theta), math.sin(theta)
    ox, oy = origin[0] - rim.cx, origin[1] - rim.cy
    u0, v0 = ox * c + oy * s, -ox * s + oy * c
    du, dv = np.cos(phis) * c + np.sin(phis) * s, -np.cos(phis) * s + np.sin(phis) * c
    qa = (du / rim.a) ** 2 + (dv / rim.b) ** 2
    qb = 2 * (u0 * du / rim.a ** 2 + v0 * dv / rim.b ** 2)
    qc = (u0 / rim.a) ** 2 + (v0 / rim.b) ** 2 - 1
    disc = np.maximum(qb * qb - 4 * qa * qc, 0)
    return (-qb + np.sqrt(disc)) / (2 * qa)


def _resampled_sigma(points: np.ndarray, ellipse: bool, rounds: int = 40) -> tuple[float, float, float, float]:
    """Standard errors of the fit's centre and semi-axes: refit on rays drawn with replacement."""
    rng = np.random.default_rng(0)
    fits = []
    for _ in range(rounds):
        sample = points[rng.integers(0, len(points), len(points))]
        if ellipse:
            (cx, cy), (d1, d2), _ = cv2.fitEllipse(sample.astype(np.float32))
            fits.append((cx, cy, max(d1, d2) / 2, min(d1, d2) / 2))
        elif (circle := _circle_fit(sample)) is not None:
            fits.append((circle.cx, circle.cy, circle.a, circle.b))
    sd = np.std(np.array(fits), axis=0)
    return float(sd[0]), float(sd[1]), float(sd[2]), float(sd[3])
