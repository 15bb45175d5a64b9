"""The table's plane from the rim and the floor, and exact pixel -> table-centimetre geometry.

With the lens known (its camera matrix K), the rim's image ellipse is a cone of rays through the
camera centre. Exactly two plane orientations cut that cone in a circle (`candidate_poses`), mirror
images about the line of sight, and the rim looks the same from both; they differ far from the rim
(the scale changes across a tilted table at first order in the tilt), which is where far cubes sit.
Worse, the ellipse's flattening, which is all that carries the tilt, is a sub-pixel difference of
its axes that blur and a lip's shading bias. So the tilt is taken from the bowl's floor instead
(`pose_from_floor`): a concentric circle a known height lower, whose centre is seen shifted towards
the point below the camera; the rim's ellipse gives only its centre and its size (area), which
barely depend on the tilt (`pose_with_normal`).

Once the pose is known, a pixel is a ray; the ray meets the plane of the height the point lies at
exactly, and the cube's whole silhouette (its top and the side faces a tilted or off-centre view
shows) is modelled, not just its top face.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from harness.vision.rim import Rim


@dataclass(frozen=True)
class PlanePose:
    """The rim plane in camera coordinates (OpenCV: x right, y down, z forward; centimetres)."""

    k: np.ndarray          # 3x3 camera matrix of the (undistorted) image
    normal: np.ndarray     # unit, pointing from the camera down into the table
    centre: np.ndarray     # the rim's centre (cm)
    u: np.ndarray          # unit in-plane axes: u along the image's x, v = normal x u (along the image's y)
    v: np.ndarray

    @property
    def distance_cm(self) -> float:
        """Camera to rim plane, along the plane's normal."""
        return float(self.normal @ self.centre)

    @property
    def tilt_deg(self) -> float:
        """Angle between the optical axis and the vertical."""
        return math.degrees(math.acos(min(1.0, abs(float(self.normal[2])))))

    def to_plane(self, pixels: np.ndarray, below_rim_cm: float | np.ndarray) -> np.ndarray:
        """Pixels (N, 2) of points lying `below_rim_cm` under the rim plane, to horizontal offsets
        (N, 2) in cm from the bowl's centre, along (u, v)."""
        p = np.atleast_2d(np.asarray(pixels, float))
        rays = np.column_stack([p, np.ones(len(p))]) @ np.linalg.inv(self.k).T
        depth = (self.distance_cm + np.asarray(below_rim_cm, float)) / (rays @ self.normal)
        points = rays * np.atleast_1d(depth)[:, None] - self.centre
        return np.column_stack([points @ self.u, points @ self.v])

    def project(self, local: np.ndarray) -> np.ndarray:
        """Local points (N, 3): (u, v) cm from the bowl centre and cm below the rim plane, to pixels."""
        local = np.atleast_2d(local)
        world = self.centre + local[:, :1] * self.u + local[:, 1:2] * self.v + local[:, 2:3] * self.normal
        image = world @ self.k.T
        return image[:, :2] / image[:, 2:3]


def ellipse_conic(rim: Rim) -> np.ndarray:
    """The rim ellipse as a 3x3 conic matrix C in pixels (p^T C p = 0 on the ellipse)."""
    t = math.radians(rim.angle_deg)
    c, s = math.cos(t), math.sin(t)
    to_axes = np.array([[c, s, -(c * rim.cx + s * rim.cy)], [-s, c, s * rim.cx - c * rim.cy], [0, 0, 1]])
    return to_axes.T @ np.diag([1 / rim.a ** 2, 1 / rim.b ** 2, -1.0]) @ to_axes


def candidate_poses(rim: Rim, k: np.ndarray, radius_cm: float) -> tuple[PlanePose, PlanePose]:
    """The two plane poses whose circle of `radius_cm` projects to the rim's ellipse.

    The cone's matrix Q = K^T C K has eigenvalues l1 >= l2 > 0 > l3 (up to sign); a plane with
    normal n cuts it in a circle iff Q restricted to the plane is isotropic, which holds for
    n = sqrt((l1 - l2) / (l1 - l3)) e1 +/- sqrt((l2 - l3) / (l1 - l3)) e3."""
    q = k.T @ ellipse_conic(rim) @ k
    values = np.linalg.eigvalsh(q)
    if np.sum(values > 0) < 2:
        q = -q
    values, vectors = np.linalg.eigh(q)       # ascending: l3 < 0 < l2 <= l1
    l3, l2, l1 = values
    e3, e1 = vectors[:, 0], vectors[:, 2]
    alpha = math.sqrt(max(0.0, (l1 - l2) / (l1 - l3)))
    gamma = math.sqrt(max(0.0, (l2 - l3) / (l1 - l3)))
    poses = []
    for sign in (1.0, -1.0):
        n = alpha * e1 + sign * gamma * e3
        n = n / np.linalg.norm(n)
        if n[2] < 0:
            n = -n
        poses.append(_pose_on(q, n, k, radius_cm))
    return poses[0], poses[1]


def _pose_on(q: np.ndarray, n: np.ndarray, k: np.ndarray, radius_cm: float) -> PlanePose:
    """The plane with normal n at the distance where the cone cuts it in a circle of `radius_cm`."""
    u = np.array([1.0, 0.0, 0.0]) - n[0] * n
    u = u / np.linalg.norm(u)
    v = np.cross(n, u)
    lam = 0.5 * float(u @ q @ u + v @ q @ v)
    w = np.array([u @ q @ n, v @ q @ n])
    rho = math.sqrt(max(1e-12, float(w @ w) / lam ** 2 - float(n @ q @ n) / lam))
    d = radius_cm / rho
    centre = d * (n - (w[0] * u + w[1] * v) / lam)
    return PlanePose(k, n, centre, u, v)


def circle_image(pose: PlanePose, radius_cm: float, below_rim_cm: float) -> tuple[np.ndarray, float]:
    """Centre (px) and product of the semi-axes (px^2) of the ellipse that a horizontal circle
    centred under the bowl's centre projects to: the conic H^-T diag(1, 1, -r^2) H^-1."""
    h = pose.k @ np.column_stack([pose.u, pose.v, pose.centre + below_rim_cm * pose.normal])
    inverse = np.linalg.inv(h)
    conic = inverse.T @ np.diag([1.0, 1.0, -radius_cm ** 2]) @ inverse
    m = conic[:2, :2]
    centre = -np.linalg.solve(m, conic[:2, 2])
    constant = float(conic[2, 2] + conic[:2, 2] @ centre)
    return centre, abs(constant) / math.sqrt(abs(float(np.linalg.det(m))))


def pose_with_normal(rim: Rim, normal: np.ndarray, k: np.ndarray, radius_cm: float, rounds: int = 2) -> PlanePose:
    """The rim's circle on a plane of this normal: placed so that its projection has the rim
    ellipse's centre and area. The ellipse's flattening is not used (it fixes the tilt only through
    sub-pixel differences of its axes, which a lip's shading or blur easily bias); its area and
    centre are robust, and barely depend on the tilt."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    u = np.array([1.0, 0.0, 0.0]) - n[0] * n
    u = u / np.linalg.norm(u)
    v = np.cross(n, u)
    inverse = np.linalg.inv(k)
    target = np.array([rim.cx, rim.cy])
    aim = target.copy()
    depth = k[1, 1] * radius_cm / math.sqrt(rim.a * rim.b)
    pose = PlanePose(k, n, inverse @ np.array([*aim, 1.0]) * depth, u, v)
    for _ in range(rounds):
        seen, axes = circle_image(pose, radius_cm, 0.0)
        depth *= math.sqrt(axes / (rim.a * rim.b))
        aim += target - seen
        pose = PlanePose(k, n, inverse @ np.array([*aim, 1.0]) * depth, u, v)
    return pose


def pose_from_floor(rim: Rim, floor_centre_px: tuple[float, float], k: np.ndarray, radius_cm: float,
                    below_rim_cm: float, floor_radius_cm: float, rounds: int = 2) -> PlanePose:
    """The rim plane's pose with its normal from the floor's parallax.

    The floor's centre lies `below_rim_cm` straight below the rim's: F = C + h n. The rim's
    ellipse fixes C (its centre and size, whatever the tilt); F lies on the ray through the floor's
    centre as seen, at the distance h from C, which leaves n: several pixels of shift for a few
    degrees of tilt. A circle's ellipse centre is not quite the image of its centre (perspective);
    the pose found predicts by how much, and the floor's seen centre is corrected by it."""
    pose = pose_with_normal(rim, np.array([0.0, 0.0, 1.0]), k, radius_cm)
    centre = pose.centre
    inverse = np.linalg.inv(k)
    seen = np.array(floor_centre_px, float)
    for _ in range(rounds):
        ray = inverse @ np.array([seen[0], seen[1], 1.0])
        b = float(ray @ centre)
        a = float(ray @ ray)
        disc = max(0.0, b * b - a * (float(centre @ centre) - below_rim_cm ** 2))
        mu = (b + math.sqrt(disc)) / a
        pose = pose_with_normal(rim, ray * mu - centre, k, radius_cm)
        centre = pose.centre
        ellipse_centre, _ = circle_image(pose, floor_radius_cm, below_rim_cm)
        true_centre = pose.project(np.array([[0.0, 0.0, below_rim_cm]]))[0]
        seen = np.array(floor_centre_px, float) - (ellipse_centre - true_centre)
    return pose


def cube_corners(offset_cm: np.ndarray, yaw_deg: float, edge_cm: float, base_below_rim_cm: float) -> np.ndarray:
    """The 8 corners of a cube standing flat at `offset_cm` (u, v), in local (u, v, below-rim) coordinates."""
    t = math.radians(yaw_deg)
    rotation = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    half = edge_cm / 2
    square = np.array([[sx * half, sy * half] for sx in (-1, 1) for sy in (-1, 1)]) @ rotation.T + offset_cm
    return np.vstack([np.column_stack([square, np.full(4, base_below_rim_cm)]),
                      np.column_stack([square, np.full(4, base_below_rim_cm - edge_cm)])])


def silhouette_centroid(pose: PlanePose, offset_cm: np.ndarray, yaw_deg: float, edge_cm: float,
                        base_below_rim_cm: float) -> np.ndarray:
    """Centroid (px) of the cube's silhouette: the convex hull of its projected corners."""
    corners = pose.project(cube_corners(offset_cm, yaw_deg, edge_cm, base_below_rim_cm))
    m = cv2.moments(cv2.convexHull(corners.astype(np.float32)))
    if m["m00"] <= 0:   # a degenerate view (a pose drawn far off): the corners' mean
        return corners.mean(axis=0)
    return np.array([m["m10"] / m["m00"], m["m01"] / m["m00"]])


def cube_offset(pose: PlanePose, centroid_px: tuple[float, float], yaw_deg: float, edge_cm: float,
                base_below_rim_cm: float, start: np.ndarray | None = None, rounds: int | None = None) -> np.ndarray:
    """The cube's centre (u, v cm from the bowl centre) whose modelled silhouette has the blob's centroid.

    Starts from the ray through the centroid at the cube's mid-height, then moves the cube by the
    centroid's miss, mapped to the table, until the modelled silhouette's centroid is the blob's."""
    middle = base_below_rim_cm - edge_cm / 2
    target = np.asarray(centroid_px, float)
    at_target = pose.to_plane(target, middle)[0]
    offset = at_target if start is None else np.asarray(start, float)
    for _ in range(rounds or (4 if start is None else 2)):   # from a nearby start, two rounds converge
        seen = silhouette_centroid(pose, offset, yaw_deg, edge_cm, base_below_rim_cm)
        offset = offset + at_target - pose.to_plane(seen, middle)[0]
    return offset
