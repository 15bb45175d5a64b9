"""Where the operator actually put the cube, from the top camera and the bowl-rim calibration.

A randomized protocol means nothing if the cube went 2 cm from where it said. The rim gives the
scale (pixels -> cm around the bowl); one frame with the cube on the trained spot gives the table's
axes in the image (a camera looking down sees the table mirrored, so a rotation is all that is
left to find). Then every frame says where the cube is on the table, how far that is from the
trial's target, and whether it is within the tolerance the trial may start at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.models.protocol import Scene, Trial
from harness.vision.measure import Geometry, find_cube, measure_frame
from harness.vision.reasons import DetectionError, NotMeasured
from harness.vision.rim import Rim


@dataclass(frozen=True)
class Tolerance:
    """How close the cube must be to its target before a trial starts (the issue's 0.5 cm, 10 deg)."""

    cm: float = 0.5
    deg: float = 10.0


@dataclass(frozen=True)
class CubeOnTable:
    """The cube's measured place in the protocol's table frame (cm) and its yaw (deg, modulo 90)."""

    xy_cm: tuple[float, float]
    yaw_deg: float
    uncertainty_cm: float
    inside_bowl: bool
    distance_to_bowl_cm: float
    centre_px: tuple[float, float] | None = None


@dataclass(frozen=True)
class PlacementReading:
    """One frame of the placement guide: where the cube is against where the trial wants it."""

    target_dxy_cm: tuple[float, float]
    target_yaw_deg: float
    measured_dxy_cm: tuple[float, float] | None
    measured_yaw_deg: float | None
    error_cm: float | None
    yaw_error_deg: float | None
    uncertainty_cm: float | None
    within: bool
    not_measured: NotMeasured | None = None
    detail: str = ""
    tolerance: Tolerance = Tolerance()
    target_corners_px: tuple[tuple[float, float], ...] = ()   # the target's footprint in the frame, to draw
    cube_px: tuple[float, float] | None = None                # where the cube was found in the frame

    def correction(self) -> str:
        """Which way to move and turn the cube onto its target, in the operator's words (robot's view)."""
        if self.measured_dxy_cm is None or self.measured_yaw_deg is None:
            return ""
        ddx = self.target_dxy_cm[0] - self.measured_dxy_cm[0]
        ddy = self.target_dxy_cm[1] - self.measured_dxy_cm[1]
        turn = (self.target_yaw_deg - self.measured_yaw_deg + 45.0) % 90.0 - 45.0
        moves, says = [], []
        if (self.error_cm or 0.0) > self.tolerance.cm:   # only what is outside the tolerance
            if abs(ddx) >= 0.1:
                moves.append(f"{abs(ddx):.1f} cm {'away from' if ddx > 0 else 'toward'} the robot")
            if abs(ddy) >= 0.1:
                moves.append(f"{abs(ddy):.1f} cm to the {'left' if ddy > 0 else 'right'}")
        if moves:
            says.append("move it " + ", ".join(moves))
        if (self.yaw_error_deg or 0.0) > self.tolerance.deg:
            says.append(f"turn it {abs(turn):.0f} deg {'anticlockwise' if turn > 0 else 'clockwise'}")
        return "; ".join(says)

    def line(self) -> str:
        tx, ty = self.target_dxy_cm
        target = f"target dx {tx:+.1f} dy {ty:+.1f} cm yaw {self.target_yaw_deg:+.0f} deg; "
        if self.error_cm is None:
            return (f"{target}cube not measured ({self.not_measured.value if self.not_measured else '?'}): "
                    f"{self.detail}")
        dx, dy = self.measured_dxy_cm or (0.0, 0.0)
        state = "OK" if self.within else "move it"
        return (f"{target}cube at dx {dx:+.1f} dy {dy:+.1f} cm yaw {self.measured_yaw_deg:+.0f} deg: "
                f"{self.error_cm:.1f} cm (+/- {self.uncertainty_cm:.1f}) and {self.yaw_error_deg:.0f} deg "
                f"from the target - {state}")

    def record(self) -> dict[str, object]:
        """What the attempt stores as its measured start (`Attempt.measured_start`)."""
        out: dict[str, object] = {"dx_cm": None, "dy_cm": None, "yaw_deg": None}
        if self.measured_dxy_cm is not None:
            out = {"dx_cm": round(self.measured_dxy_cm[0], 2), "dy_cm": round(self.measured_dxy_cm[1], 2),
                   "yaw_deg": round(self.measured_yaw_deg or 0.0, 1), "error_cm": round(self.error_cm or 0.0, 2),
                   "yaw_error_deg": round(self.yaw_error_deg or 0.0, 1),
                   "uncertainty_cm": round(self.uncertainty_cm or 0.0, 2)}
        out["within_tolerance"] = self.within
        return out


def _yaw_gap(a: float, b: float) -> float:
    """Smallest turn between two yaws of a cube (90 degree symmetry)."""
    d = (a - b) % 90.0
    return min(d, 90.0 - d)


@dataclass(frozen=True)
class TopView:
    """The top camera's view of the table: the rim (scale), the table's axes in the image, the scene."""

    rim: Rim
    geometry: Geometry
    scene: Scene
    rotation_deg: float      # image axes = R(rotation) . mirror . table axes
    scale: float = 1.0       # table cm per rim-plane cm: the table lies below the rim, so it looks smaller
    size: tuple[int, int] | None = None   # (width, height) of the frames the rim was calibrated on

    def check_size(self, frame: np.ndarray) -> None:
        """The rim is in the calibration frame's pixels: a camera giving frames of another size is refused
        (its rim would be read at the wrong scale), naming both sizes."""
        if self.size is not None and (frame.shape[1], frame.shape[0]) != tuple(self.size):
            raise DetectionError(NotMeasured.CALIBRATION_SIZE_MISMATCH,
                                 f"the bowl calibration was made on {self.size[0]}x{self.size[1]} frames; the camera "
                                 f"gives {frame.shape[1]}x{frame.shape[0]}: re-calibrate at this size")

    def _to_table(self, image_cm: np.ndarray) -> np.ndarray:
        t = math.radians(self.rotation_deg)
        c, s = math.cos(t), math.sin(t)
        u, v = image_cm
        back = self.scale * np.array([c * u + s * v, -s * u + c * v])   # R(-t)
        return np.array([back[0], -back[1]])                            # the mirror is its own inverse

    def cube(self, frame: np.ndarray) -> CubeOnTable:
        """The cube's place on the table. Raises `DetectionError` (with its reason) when there is none."""
        self.check_size(frame)
        m = measure_frame(frame, self.rim, self.geometry)
        t = math.radians(self.rim.angle_deg)
        u, v = m.offset_cm                                   # along the rim's axes
        image_cm = np.array([u * math.cos(t) - v * math.sin(t), u * math.sin(t) + v * math.cos(t)])
        bx, by = self.scene.bowl_xy_cm
        rel = self._to_table(image_cm)
        yaw = (self.rotation_deg - m.yaw_deg) % 90.0
        return CubeOnTable((bx + float(rel[0]), by + float(rel[1])), yaw, m.uncertainty_cm, m.inside,
                           m.distance_cm, (float(m.cube_px[0]), float(m.cube_px[1])))

    def reading(self, frame: np.ndarray, trial: Trial, tolerance: Tolerance) -> PlacementReading:
        """The guide's line for this frame: measured offset, distance from the target, within or not."""
        target = (trial.dx_cm, trial.dy_cm)
        footprint = self.target_footprint_px(trial)
        try:
            cube = self.cube(frame)
        except DetectionError as err:
            return PlacementReading(target, trial.yaw_deg, None, None, None, None, None, False, err.reason, err.detail,
                                    tolerance, footprint)
        ox, oy = self.scene.trained_cube_xy_cm
        dxy = (cube.xy_cm[0] - ox, cube.xy_cm[1] - oy)
        error = math.hypot(dxy[0] - target[0], dxy[1] - target[1])
        yaw_error = _yaw_gap(cube.yaw_deg, trial.yaw_deg)
        return PlacementReading(target, trial.yaw_deg, dxy, cube.yaw_deg, error, yaw_error, cube.uncertainty_cm,
                                error <= tolerance.cm and yaw_error <= tolerance.deg, tolerance=tolerance,
                                target_corners_px=footprint, cube_px=cube.centre_px)

    def still_within(self, frame: np.ndarray, reading: PlacementReading) -> bool:
        """Whether the cube in `frame` is where `reading` measured it, so close that the reading's verdict
        (within tolerance) holds for this frame too. Only finds the cube (tens of ms), no full measurement:
        the guide's second look that tells a cube at rest from one passing through the target."""
        if not reading.within or reading.cube_px is None or reading.measured_yaw_deg is None:
            return False
        try:
            self.check_size(frame)
            centre, image_yaw, _ = find_cube(frame, self.rim, self.geometry)
        except DetectionError:
            return False
        px_per_cm = self.rim.mean_radius_px / (self.geometry.bowl_cm / 2) / self.scale
        moved_cm = math.hypot(centre[0] - reading.cube_px[0], centre[1] - reading.cube_px[1]) / px_per_cm
        turned = _yaw_gap((self.rotation_deg - image_yaw) % 90.0, reading.measured_yaw_deg)
        tolerance = reading.tolerance
        return ((reading.error_cm or 0.0) + moved_cm <= tolerance.cm
                and (reading.yaw_error_deg or 0.0) + turned <= tolerance.deg)

    def target_footprint_px(self, trial: Trial) -> tuple[tuple[float, float], ...]:
        """The four corners of the cube's top face where the trial wants it, in the image (to draw)."""
        cx, cy = self.target_px(trial)
        half = self.geometry.cube_cm * self.rim.mean_radius_px / self.geometry.bowl_cm   # half an edge, px
        t = math.radians(self.rotation_deg - trial.yaw_deg)      # the inverse of `cube`'s yaw
        c, s = math.cos(t), math.sin(t)
        return tuple((cx + c * u - s * v, cy + s * u + c * v)
                     for u, v in ((-half, -half), (half, -half), (half, half), (-half, half)))

    def target_px(self, trial: Trial) -> tuple[float, float]:
        """Where the trial's target is in the image (rim plane), to draw the footprint the operator aims at."""
        ox, oy = self.scene.trained_cube_xy_cm
        bx, by = self.scene.bowl_xy_cm
        rel = np.array([ox + trial.dx_cm - bx, -(oy + trial.dy_cm - by)]) / self.scale
        t = math.radians(self.rotation_deg)
        image_cm = np.array([math.cos(t) * rel[0] - math.sin(t) * rel[1], math.sin(t) * rel[0] + math.cos(t) * rel[1]])
        a = math.radians(self.rim.angle_deg)
        u = image_cm[0] * math.cos(a) + image_cm[1] * math.sin(a)
        v = -image_cm[0] * math.sin(a) + image_cm[1] * math.cos(a)
        radius = self.geometry.bowl_cm / 2
        pu, pv = u * self.rim.a / radius, v * self.rim.b / radius
        return (self.rim.cx + pu * math.cos(a) - pv * math.sin(a), self.rim.cy + pu * math.sin(a) + pv * math.cos(a))


def table_axes(rim: Rim, geometry: Geometry, scene: Scene, cube_on_trained_spot: np.ndarray,
               size: tuple[int, int] | None = None) -> TopView:
    """Find the table's axes in the image (and the table's scale) from one frame with the cube on the trained spot.

    Raises `DetectionError` when the cube is not measured, or when its measured distance from the bowl
    differs from the protocol's by more than 1.5 cm (a wrong scene, or the cube not on its spot).
    """
    probe = TopView(rim, geometry, scene, 0.0, size=size)
    probe.check_size(cube_on_trained_spot)
    m = measure_frame(cube_on_trained_spot, rim, geometry)
    t = math.radians(rim.angle_deg)
    u, v = m.offset_cm
    image = (u * math.cos(t) - v * math.sin(t), u * math.sin(t) + v * math.cos(t))
    ox, oy = scene.trained_cube_xy_cm
    bx, by = scene.bowl_xy_cm
    mirrored = (ox - bx, -(oy - by))
    expected = math.hypot(*mirrored)
    if abs(m.distance_cm - expected) > 1.5:
        raise DetectionError(NotMeasured.TOO_UNCERTAIN, f"the cube measures {m.distance_cm:.1f} cm from the bowl; "
                             f"the protocol puts the trained spot {expected:.1f} cm from it")
    rotation = math.degrees(math.atan2(image[1], image[0]) - math.atan2(mirrored[1], mirrored[0]))
    return TopView(probe.rim, geometry, scene, rotation, expected / m.distance_cm, size)
