"""The bowl rim in the top view: from two clicks, or found automatically by an ellipse fit.

A camera that is not straight above sees the circular rim as an ellipse; mapping image points
through that ellipse (rotate, then scale each axis to the rim's known diameter) gives
centimetres in the rim plane, to first order in the tilt.

The automatic fit has to hold on real frames: a white bowl on a white table, wood grain, a hard
shadow across the rim, the arm over part of it, blur, noise and JPEG blocks. It works in three
steps. Edge pixels vote for circle centres along their gradient (texture votes scatter, a bowl's
concentric edges pile up). Rays from each voted centre find every edge along them; edges that
line up as a concentric ellipse over much of the circumference form a layer (the floor, the inner
and the outer edge of the rim); the outermost well-supported layer is the rim's outer edge.
Refitting on resampled rays gives the fit's own uncertainty, which measurements carry on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

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
    support: float                                  # share of rays with an edge on the ellipse
    residual_px: float                              # RMS distance of those edges from the ellipse
    sigma: tuple[float, float, float, float]        # standard error of cx, cy, a, b (px), from resampling
    layers: int                                     # concentric layers seen (floor, inner and outer rim edge)
    rival_px: float = 0.0                           # how far a nearly as well supported edge lies from it


@dataclass(frozen=True)
class _Layer:
    rim: Rim                 # circle fit
    ellipse: Rim | None      # ellipse fit, where the edges go round far enough to fix one
    points: np.ndarray       # (N, 2) edge points on the ellipse, one per supporting ray
    support: float
    residual_px: float


RAYS = 144
MIN_SUPPORT = 0.45       # an edge layer at all
RIM_SUPPORT = 0.5        # the layer taken as the rim's outer edge


def find_rim(frame: np.ndarray, min_radius_frac: float = 0.035, max_radius_frac: float = 0.3) -> Rim | None:
    """The rim's outer edge, or None where the automatic fit is not sure of it."""
    try:
        return fit_rim(frame, min_radius_frac, max_radius_frac).rim
    except DetectionError:
        return None


def fit_rim(frame: np.ndarray, min_radius_frac: float = 0.035, max_radius_frac: float = 0.3) -> RimFit:
    """The bowl rim's outer edge with its uncertainty; DetectionError with the reason when unsure."""
    h, w = frame.shape[:2]
    r_min, r_max = min_radius_frac * min(h, w), max_radius_frac * min(h, w)
    lab = _smoothed_lab(frame)
    half = cv2.resize(lab, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    gx, gy, magnitude = _colour_gradient(half)
    centres = [(2 * x + 0.5, 2 * y + 0.5) for x, y in _voted_centres(gx, gy, magnitude, r_min / 2, r_max / 2)]
    if not centres:
        raise DetectionError(NotMeasured.RIM_NOT_FOUND, "no circular edges in the frame")
    best: tuple[float, _Layer, list[_Layer]] | None = None
    weakest_miss = 0.0
    for centre in centres:
        layers = _layers(lab, centre, r_min, r_max)
        weakest_miss = max([weakest_miss, *(layer.support for layer in layers)])
        good = [layer for layer in layers if layer.support >= MIN_SUPPORT]
        if not good:
            continue
        supports = sorted((layer.support for layer in good), reverse=True)
        # the outer edge is the outermost one nearly as well supported as the best: beyond the rim
        # there is only table, whose texture, shadows and halos make partial rings at most
        rim_edge = max((layer for layer in good if layer.support >= 0.6 * supports[0]),
                       key=lambda layer: layer.rim.a)
        score = supports[0] + 0.5 * sum(supports[1:2])  # a bowl shows whole, concentric edges
        if best is None or score > best[0]:
            best = (score, rim_edge, layers)
    if best is None:
        if weakest_miss > 0:
            raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                                 f"edges found on only {100 * weakest_miss:.0f}% of the rim "
                                 f"(needs {100 * MIN_SUPPORT:.0f}%)")
        raise DetectionError(NotMeasured.RIM_NOT_FOUND, "no ring of edges around any candidate centre")
    _, layer, all_layers = best
    rim = layer.rim
    if layer.support < RIM_SUPPORT:
        raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                             f"the rim's outer edge is found on only {100 * layer.support:.0f}% of it "
                             f"(needs {100 * RIM_SUPPORT:.0f}%)")
    washed = _clipped_share(frame, rim)
    if washed > 0.4:
        raise DetectionError(NotMeasured.WEAK_EDGE_SUPPORT,
                             f"{100 * washed:.0f}% of the pixels around the rim are clipped white or black "
                             "(exposure): its outer edge cannot be told from the table")
    ellipse = layer.ellipse
    if ellipse is not None:
        if min(ellipse.a, ellipse.b) / max(ellipse.a, ellipse.b) < 0.9:
            raise DetectionError(NotMeasured.ELLIPSE_INCONSISTENT_WITH_CAMERA,
                                 f"the rim's edges make a {ellipse.a:.0f} x {ellipse.b:.0f} px ellipse: a camera "
                                 "looking down within 25 degrees of vertical sees the rim nearly round")
        rim = ellipse
    # a weaker concentric edge just outside (a white rim's outer edge on a white table, a shadow's
    # edge) could be the rim's outer edge as well: the distance to it is part of what the fit does not know
    rivals = [other.rim.a - layer.rim.a for other in all_layers
              if 1.0 < other.rim.a / layer.rim.a < 1.25 and other.support >= 0.25
              and math.hypot(other.rim.cx - layer.rim.cx, other.rim.cy - layer.rim.cy) < 0.1 * layer.rim.a]
    return RimFit(rim, layer.support, layer.residual_px, _resampled_sigma(layer.points, ellipse is not None),
                  sum(1 for other in all_layers if other.support >= MIN_SUPPORT), max(rivals, default=0.0))


def _smoothed_lab(frame: np.ndarray) -> np.ndarray:
    """Lab in roughly perceptual units (L 0..100), smoothed against noise and JPEG blocks."""
    lab = cv2.cvtColor(frame, cv2.COLOR_RGB2LAB).astype(np.float32)
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


def _layers(lab: np.ndarray, centre: tuple[float, float], r_min: float, r_max: float) -> list[_Layer]:
    """Concentric ellipses of edges around `centre`: rays find the edges, radii that recur form layers."""
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
    histogram = np.zeros(len(radii))
    bins = np.clip(((r_edge - radii[0]) / step).astype(int), 0, len(radii) - 1)
    np.add.at(histogram, np.unique(ray * len(radii) + bins) % len(radii), 1)
    histogram = np.convolve(histogram, np.ones(5), mode="same")
    layers = []
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
