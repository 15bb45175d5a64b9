"""Cube-to-bowl-centre distance from one top-camera frame.

Two heights matter. The scale is calibrated on the rim, but the camera sees the cube's top face,
which sits lower (on the bowl floor, or on the table). Seen from a camera at height H, a point at
height z lands where a rim-plane point would be (H - z_rim) / (H - z) times farther from the
camera's nadir; `measure_frame` undoes that when it knows the camera's focal length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from harness.vision.rim import Rim


@dataclass(frozen=True)
class Geometry:
    bowl_cm: float = 11.5
    bowl_height_cm: float = 4.5      # rim above the table
    bowl_floor_cm: float = 0.4       # floor above the table
    cube_cm: float = 3.0
    focal_px: float | None = None    # None: no height correction


@dataclass(frozen=True)
class Measurement:
    cube_px: tuple[float, float]
    offset_cm: tuple[float, float]
    distance_cm: float
    inside: bool
    yaw_deg: float


class DetectionError(Exception):
    """The frame does not show what a measurement needs (no cube, no rim); never a made-up number."""


def find_cube(frame: np.ndarray, rim: Rim, geometry: Geometry) -> tuple[tuple[float, float], float, np.ndarray]:
    """Centre (px), yaw (deg) and outline of the red cube: saturation and hue, not brightness, so a
    dimmer room or the yellow arm in view do not fool it."""
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    red = ((hsv[:, :, 0] <= 8) | (hsv[:, :, 0] >= 172)) & (hsv[:, :, 1] >= 110) & (hsv[:, :, 2] >= 40)
    mask = cv2.morphologyEx(red.astype(np.uint8) * 255, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    px_per_cm = rim.mean_radius_px / (geometry.bowl_cm / 2)
    expected = (geometry.cube_cm * px_per_cm) ** 2
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    candidates = [c for c in contours if 0.2 * expected <= cv2.contourArea(c) <= 3.0 * expected]
    if not candidates:
        sizes = sorted((round(cv2.contourArea(c)) for c in contours), reverse=True)[:3]
        raise DetectionError(f"no cube-coloured blob of about {expected:.0f} px^2 "
                             f"(largest red blobs: {sizes or 'none'})")
    best = max(candidates, key=cv2.contourArea)
    moments = cv2.moments(best)
    centre = (moments["m10"] / moments["m00"], moments["m01"] / moments["m00"])
    (_, _), (_, _), angle = cv2.minAreaRect(best)
    return centre, angle % 90, best


def measure_frame(frame: np.ndarray, rim: Rim, geometry: Geometry) -> Measurement:
    centre, yaw, _ = find_cube(frame, rim, geometry)
    offset = rim.to_cm(np.array([centre]), geometry.bowl_cm)[0]
    inside = _inside(offset, yaw, geometry)
    if geometry.focal_px:
        offset = _height_corrected(frame.shape, rim, geometry, centre, inside)
        inside = _inside(offset, yaw, geometry)
    return Measurement(centre, (float(offset[0]), float(offset[1])), float(np.hypot(*offset)), inside, yaw)


def _inside(offset: np.ndarray, yaw_deg: float, g: Geometry) -> bool:
    """All four corners of the cube's footprint within the rim circle (the judge's rule, seen from above)."""
    half = g.cube_cm / 2
    t = math.radians(yaw_deg)
    rotation = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    corners = [offset + rotation @ np.array([sx * half, sy * half]) for sx in (-1, 1) for sy in (-1, 1)]
    return all(np.hypot(*c) < g.bowl_cm / 2 for c in corners)


def _height_corrected(shape: tuple[int, ...], rim: Rim, g: Geometry, centre: tuple[float, float],
                      inside: bool) -> np.ndarray:
    camera_to_rim_cm = g.focal_px * (g.bowl_cm / 2) / rim.mean_radius_px
    camera_height = camera_to_rim_cm + g.bowl_height_cm
    top = (g.bowl_floor_cm if inside else 0.0) + g.cube_cm
    nadir = rim.to_cm(np.array([[shape[1] / 2, shape[0] / 2]]), g.bowl_cm)[0]
    seen = rim.to_cm(np.array([centre]), g.bowl_cm)[0]
    return nadir + (seen - nadir) * (camera_height - top) / (camera_height - g.bowl_height_cm)


def annotate(frame: np.ndarray, rim: Rim, geometry: Geometry, result: Measurement | None, note: str) -> np.ndarray:
    """The frame with the rim, its centre, the cube and the distance drawn on it."""
    out = frame.copy()
    cv2.ellipse(out, ((rim.cx, rim.cy), (2 * rim.a, 2 * rim.b), rim.angle_deg), (0, 255, 255), 1)
    cv2.drawMarker(out, (round(rim.cx), round(rim.cy)), (0, 255, 255), cv2.MARKER_CROSS, 12, 1)
    if result is not None:
        cube = (round(result.cube_px[0]), round(result.cube_px[1]))
        cv2.drawMarker(out, cube, (255, 255, 255), cv2.MARKER_TILTED_CROSS, 10, 2)
        cv2.line(out, (round(rim.cx), round(rim.cy)), cube, (255, 255, 255), 1)
    cv2.rectangle(out, (0, 0), (out.shape[1], 22), (0, 0, 0), -1)
    cv2.putText(out, note, (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return out
