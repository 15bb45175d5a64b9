"""Far-cube geometry against exact projections: a known camera, tilted and off-centre, projects the rim,
the floor and cubes on the table; what `plane.py` recovers from those pixels is compared with the truth."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from harness.vision.measure import visible_part_shifts
from harness.vision.plane import candidate_poses, cube_corners, cube_offset, pose_from_floor
from harness.vision.rim import Rim

RIM_Z, FLOOR_Z, RADIUS, FLOOR_RADIUS, CUBE = 4.2, 0.4, 5.75, 3.65, 3.0
K = np.array([[580.0, 0, 320], [0, 580.0, 240], [0, 0, 1]])


def _camera(height: float, tilt_deg: float, azimuth_deg: float,
            aim: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """World-to-camera rotation and the camera's position: looking at `aim` on the table, `tilt_deg` off vertical."""
    t, a = math.radians(tilt_deg), math.radians(azimuth_deg)
    position = np.array([aim[0] + height * math.tan(t) * math.cos(a), aim[1] + height * math.tan(t) * math.sin(a),
                         height])
    forward = np.array([aim[0], aim[1], 0.0]) - position
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    return np.vstack([right, down, forward]), position


def _project(points: np.ndarray, rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
    camera = (points - position) @ rotation.T
    image = camera @ K.T
    return image[:, :2] / image[:, 2:3]


def _ellipse(points: np.ndarray) -> Rim:
    (cx, cy), (d1, d2), angle = cv2.fitEllipse(points.astype(np.float32))
    return Rim(float(cx), float(cy), float(d1 / 2), float(d2 / 2), float(angle))


def _circle(radius: float, z: float, n: int = 180) -> np.ndarray:
    phi = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.column_stack([radius * np.cos(phi), radius * np.sin(phi), np.full(n, z)])


VIEWS = [(70.0, 0.0, 0.0, (2.0, -9.0)), (62.0, 8.0, 30.0, (0.0, 0.0)), (90.0, 12.0, 200.0, (-6.0, 4.0)),
         (55.0, 15.0, 120.0, (5.0, 5.0)), (75.0, 4.0, 300.0, (8.0, -3.0))]


@pytest.mark.parametrize("height, tilt, azimuth, aim", VIEWS)
def test_far_points_and_cubes_are_placed_within_a_small_share_of_their_distance(height, tilt, azimuth, aim) -> None:
    rotation, position = _camera(height, tilt, azimuth, aim)
    rim = _ellipse(_project(_circle(RADIUS, RIM_Z), rotation, position))
    floor = _ellipse(_project(_circle(FLOOR_RADIUS, FLOOR_Z), rotation, position))
    pose = pose_from_floor(rim, (floor.cx, floor.cy), K, RADIUS, RIM_Z - FLOOR_Z, FLOOR_RADIUS)
    down = rotation @ np.array([0.0, 0.0, -1.0])
    assert math.degrees(math.acos(min(1.0, float(pose.normal @ down)))) < 0.2   # the true tilt, not its mirror
    assert pose.distance_cm == pytest.approx(height - RIM_Z, rel=0.002)
    rng = np.random.default_rng(int(height))
    for distance in (3.0, 8.0, 12.0, 15.0, 20.0, 26.0):
        angle = rng.uniform(0, 2 * np.pi)
        truth = np.array([distance * math.cos(angle), distance * math.sin(angle)])
        # a point on the table
        pixel = _project(np.array([[*truth, 0.0]]), rotation, position)
        assert np.linalg.norm(pose.to_plane(pixel, RIM_Z)[0]) == pytest.approx(distance, abs=0.002 * distance)
        # a cube standing on the table: its silhouette (top face and the sides the view shows)
        yaw = rng.uniform(0, 90)
        corners = cube_corners(truth, yaw, CUBE, 0.0)
        world = np.column_stack([corners[:, :2], -corners[:, 2]])   # heights up from the table
        hull = cv2.convexHull(_project(world, rotation, position).astype(np.float32))
        m = cv2.moments(hull)
        found = cube_offset(pose, (m["m10"] / m["m00"], m["m01"] / m["m00"]), yaw, CUBE, RIM_Z)
        assert np.linalg.norm(found) == pytest.approx(distance, abs=max(0.02, 0.005 * distance))


def test_the_wrong_mirror_pose_would_misplace_far_cubes() -> None:
    """Why the floor is needed: both poses fit the rim, but they disagree by centimetres far from it."""
    rotation, position = _camera(70.0, 8.0, 30.0, (0.0, 0.0))
    rim = _ellipse(_project(_circle(RADIUS, RIM_Z), rotation, position))
    first, second = candidate_poses(rim, K, RADIUS)
    pixel = _project(np.array([[20.0, 12.0, 0.0]]), rotation, position)
    apart = np.linalg.norm(first.to_plane(pixel, RIM_Z)[0] - second.to_plane(pixel, RIM_Z)[0])
    assert apart > 0.5


@pytest.mark.parametrize("height, tilt, azimuth, aim", VIEWS)
def test_a_partly_hidden_cube_is_placed_from_the_visible_part_of_its_silhouette(height, tilt, azimuth, aim) -> None:
    """A cube 20 cm out, its silhouette cut by a straight occluder (the gripper's edge) over 0-40 % of
    its width. The blob's centroid lies off the cube's by about half what is hidden; the places where
    the modelled silhouette still covers the blob include the true one (to 2 % of its width), and
    their middle is nearer the truth than the centroid's placement (where the visible edges pin the
    cube, much nearer; where the cut leaves it free to slide, about half-way)."""
    rotation, position = _camera(height, tilt, azimuth, aim)
    rim = _ellipse(_project(_circle(RADIUS, RIM_Z), rotation, position))
    floor = _ellipse(_project(_circle(FLOOR_RADIUS, FLOOR_Z), rotation, position))
    pose = pose_from_floor(rim, (floor.cx, floor.cy), K, RADIUS, RIM_Z - FLOOR_Z, FLOOR_RADIUS)
    truth = np.array([20.0 * math.cos(math.radians(azimuth + 40)), 20.0 * math.sin(math.radians(azimuth + 40))])
    silhouette = cv2.convexHull(pose.project(cube_corners(truth, 25.0, CUBE, RIM_Z)).astype(np.float32)).reshape(-1, 2)
    width = float(np.ptp(silhouette[:, 0]))
    for hidden in (0.0, 0.2, 0.4):
        mask = np.zeros((480, 640), np.uint8)
        cv2.fillConvexPoly(mask, np.round(silhouette * 16).astype(np.int32), 255, cv2.LINE_8, 4)
        mask[:, : math.floor(silhouette[:, 0].min() + hidden * width)] = 0      # hidden: left of the cut
        outline = max(cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)[0], key=cv2.contourArea)
        m = cv2.moments(outline)
        centroid = (m["m10"] / m["m00"], m["m01"] / m["m00"])
        placed = cube_offset(pose, centroid, 25.0, CUBE, RIM_Z)
        modelled = cv2.convexHull(pose.project(cube_corners(placed, 25.0, CUBE, RIM_Z)).astype(np.float32))
        shifts = visible_part_shifts(modelled.reshape(-1, 2), outline)
        true_shift = pose.project(np.array([[*truth, RIM_Z]]))[0] - pose.project(np.array([[*placed, RIM_Z]]))[0]
        assert np.min(np.linalg.norm(shifts - true_shift, axis=1)) <= 0.02 * width, (hidden, true_shift, shifts)
        fitted = np.array(centroid) + shifts.mean(axis=0)
        refit = cube_offset(pose, tuple(fitted), 25.0, CUBE, RIM_Z)
        if hidden == 0.0:
            assert np.linalg.norm(placed - truth) <= 0.05
        else:   # the centroid is pulled towards what is seen; the visible part's fit is not
            assert np.linalg.norm(placed - truth) >= 0.1 * hidden * CUBE
            assert np.linalg.norm(refit - truth) <= 0.8 * np.linalg.norm(placed - truth), (hidden, refit, placed, truth)
