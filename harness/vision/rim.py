"""The bowl rim in the top view: from two clicks, or found automatically by an ellipse fit.

A camera that is not straight above sees the circular rim as an ellipse; mapping image points
through that ellipse (rotate, then scale each axis to the rim's known diameter) gives
centimetres in the rim plane, to first order in the tilt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np


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

    def from_cm(self, points_cm: np.ndarray, bowl_cm: float) -> np.ndarray:
        theta = math.radians(self.angle_deg)
        c, s = math.cos(theta), math.sin(theta)
        radius_cm = bowl_cm / 2
        pts = np.atleast_2d(points_cm).astype(float)
        u, v = pts[:, 0] * self.a / radius_cm, pts[:, 1] * self.b / radius_cm
        return np.column_stack([self.cx + u * c - v * s, self.cy + u * s + v * c])

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


def find_rim(frame: np.ndarray, min_radius_frac: float = 0.04, max_radius_frac: float = 0.45) -> Rim | None:
    """The largest well-supported near-circular ellipse in the frame, taken as the rim's outer edge."""
    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    gray = cv2.GaussianBlur(gray, (5, 5), 0)
    edges = cv2.Canny(gray, 40, 120)
    edges = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    h, w = gray.shape
    size = min(h, w)
    best: tuple[float, Rim] | None = None
    for contour in contours:
        if len(contour) < 40:
            continue
        (cx, cy), (d1, d2), angle = cv2.fitEllipse(contour)
        a, b = d1 / 2, d2 / 2
        if not (min_radius_frac * size <= min(a, b) and max(a, b) <= max_radius_frac * size):
            continue
        if min(a, b) / max(a, b) < 0.6:
            continue
        if cx - a < 2 or cy - a < 2 or cx + a > w - 2 or cy + a > h - 2:
            continue
        rim = Rim(cx, cy, a, b, angle)
        support = _support(edges, rim)
        if support < 0.7:
            continue
        score = a * b
        if best is None or score > best[0]:
            best = (score, rim)
    if best is None:
        return None
    return _outer_edge(frame, best[1]) or best[1]


def _outer_edge(frame: np.ndarray, seed: Rim, rays: int = 180) -> Rim | None:
    """From the seed's centre, walk outward along rays until the colour becomes the table's.

    Colour here is chroma (Lab a, b), which a spotlight or a dimmer room barely changes, while
    the bowl's colour differs from the table's. The seed may be the rim or an inner edge (the
    floor); rays that run into the arm or the cube overshoot and are dropped before the fit.
    """
    lab = cv2.cvtColor(frame, cv2.COLOR_RGB2LAB).astype(np.float32)
    chroma = lab[:, :, 1:]
    table = np.median(chroma.reshape(-1, 2), axis=0)
    off_table = np.linalg.norm(chroma - table, axis=2) > 12
    h, w = off_table.shape
    radius = seed.mean_radius_px
    points = []
    for phi in np.linspace(0, 2 * np.pi, rays, endpoint=False):
        rs = np.arange(0.3 * radius, 3.0 * radius, 0.5)
        xs, ys = seed.cx + rs * np.cos(phi), seed.cy + rs * np.sin(phi)
        ok = (xs >= 0) & (ys >= 0) & (xs < w - 1) & (ys < h - 1)
        xs, ys, rs = xs[ok], ys[ok], rs[ok]
        inside = off_table[np.round(ys).astype(int), np.round(xs).astype(int)]
        leaving = np.nonzero(~inside[:-2] & ~inside[1:-1] & ~inside[2:])[0]
        if len(leaving) and leaving[0] > 0:
            i = leaving[0]
            points.append((xs[i] - 0.5 * np.cos(phi), ys[i] - 0.5 * np.sin(phi), rs[i]))
    if len(points) < rays // 3:
        return None
    pts = np.array(points)
    deviation = np.abs(pts[:, 2] - np.median(pts[:, 2]))
    keep = deviation <= np.percentile(deviation, 70)
    rim = None
    for _ in range(4):  # fit, drop the rays that disagree with the ellipse, fit again
        if keep.sum() < rays // 4:
            return rim
        (cx, cy), (d1, d2), angle = cv2.fitEllipse(pts[keep, :2].astype(np.float32))
        rim = Rim(cx, cy, d1 / 2, d2 / 2, angle)
        scaled = rim.to_cm(pts[:, :2], 2.0)  # unit circle when the point lies on the ellipse
        keep = np.abs(np.linalg.norm(scaled, axis=1) - 1.0) < 0.03
    return rim


def _support(edges: np.ndarray, rim: Rim, samples: int = 180) -> float:
    """Share of points along the ellipse that sit on an edge pixel."""
    angles = np.linspace(0, 2 * np.pi, samples, endpoint=False)
    theta = math.radians(rim.angle_deg)
    xs = rim.cx + rim.a * np.cos(angles) * math.cos(theta) - rim.b * np.sin(angles) * math.sin(theta)
    ys = rim.cy + rim.a * np.cos(angles) * math.sin(theta) + rim.b * np.sin(angles) * math.cos(theta)
    xi, yi = np.round(xs).astype(int), np.round(ys).astype(int)
    ok = (xi >= 0) & (yi >= 0) & (xi < edges.shape[1]) & (yi < edges.shape[0])
    return float(np.mean(edges[yi[ok], xi[ok]] > 0)) if ok.any() else 0.0
