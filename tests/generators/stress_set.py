"""A hard set of top frames with exact truth, for the automatic rim and the cube measurement.

Real frames are harder than the project's clean renders: bowls that barely differ from the table
(white on white, dark on dark), wood or cloth tables, hard shadows across the rim, the arm hiding
part of it, motion blur, sensor noise, JPEG artefacts, auto-exposure shifts and a lens that bends
straight lines. Every frame here is rendered by the project's own MuJoCo scene (camera pose, light,
materials, arm pose varied per frame) and then passed through a camera model with known
coefficients, so each one carries its truth: the cube's distance from the bowl centre, the judge's
inside/outside, how much of the rim and of the cube the camera can see, and the lens.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum

import cv2
import mujoco
import numpy as np

from harness.models.defaults import DEFAULT_START_POSE
from harness.sim.gl_draw import OwnContextRenderer
from harness.sim.kinematics import TopDownIK
from harness.sim.scene import TABLE_SURFACES, SceneGeometry
from harness.sim.world import SimWorld

WIDTH, HEIGHT = 640, 480
RIM_TOP_Z = 0.045          # top of the rim ring above the table (bowl height + half the floor + the ring)

# bowl, rim ring and table colours (RGB 0..1); the contrast cases are the point of the set
PALETTES: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]] = {
    "blue_on_brown": ((0.2, 0.35, 0.75), (0.12, 0.22, 0.55), (0.52, 0.42, 0.32)),
    "white_on_white": ((0.93, 0.93, 0.91), (0.9, 0.9, 0.88), (0.84, 0.84, 0.82)),
    "dark_on_dark": ((0.13, 0.13, 0.14), (0.1, 0.1, 0.11), (0.19, 0.18, 0.17)),
    "green_on_wood": ((0.25, 0.55, 0.3), (0.2, 0.45, 0.25), (1.0, 1.0, 1.0)),
    "grey_glossy_on_speckle": ((0.55, 0.57, 0.6), (0.5, 0.52, 0.55), (1.0, 1.0, 1.0)),
    "cream_on_cloth": ((0.88, 0.82, 0.68), (0.82, 0.76, 0.62), (1.0, 1.0, 1.0)),
}
PALETTE_TABLE = {"green_on_wood": "wood", "grey_glossy_on_speckle": "speckle", "cream_on_cloth": "cloth"}


class Distribution(StrEnum):
    """Which scenes a set is drawn from.

    STRESS is the set the rim and the measurement were developed on. WIDE is wider than anything
    tuned on: any bowl, lip and table colour on any table texture, dimmer and brighter light, the
    arm in other poses, the camera 0.5-1.0 m up, tilted up to 15 degrees in any direction and aimed
    up to 8 cm off the bowl, and cubes far outside the bowl (8-26 cm from its centre) as often as
    near it. Sets for judging are drawn from WIDE with held-out seeds (tests/data/heldout_seeds.yaml).

    NEAR_RIM draws WIDE's scenes, but puts the cube where a reading is most doubtful: set down
    against the bowl's outside (under 8 cm from its centre), dropped onto the lip, and in about
    half the frames with the gripper held over the cube so that it hides part of it. WIDE sets
    hold only a few such frames, too few to judge a 95 % interval in that band.

    CAMERAS draws WIDE's scenes through the cameras a desk may have (issue 59): each of RESOLUTIONS
    in turn (4:3 and 16:9), a horizontal field of view of 40-90 degrees, the camera 0.5-0.9 m up and
    tilted up to 12 degrees, barrel distortion on half the frames, the light's colour temperature
    2700-6500 K; motion blur scales with the resolution (the same motion smears more pixels).
    """

    STRESS = "stress"
    WIDE = "wide"
    NEAR_RIM = "near_rim"
    CAMERAS = "cameras"


# the cameras a desk may have (issue 59): USB-camera settings, 4:3 and 16:9
RESOLUTIONS = ((320, 240), (424, 240), (640, 360), (640, 480), (800, 600), (1280, 720), (1920, 1080))


WIDE_PLACES = ("inside", "rim", "outside", "far", "far")
NEAR_RIM_PLACES = ("against", "rim", "against", "inside", "against", "rim")


@dataclass(frozen=True)
class Look:
    """Everything varied for one frame: scene, light, arm, and the camera's own defects."""

    palette: str
    table: str
    camera_height: float
    tilt_deg: float
    fovy_deg: float
    camera_dxy: tuple[float, float]
    light_dir: tuple[float, float, float]
    shadows: bool
    arm_over_rim: bool
    blur_px: float
    blur_angle_deg: float
    noise_sigma: float
    jpeg_quality: int | None
    gain: float
    white_balance: tuple[float, float, float]
    k1: float
    k2: float
    # WIDE sets only (None: the STRESS set's palette, camera placement, light and arm)
    colours: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]] | None = None  # bowl, lip, table
    glossy: bool = False
    light_diffuse: float | None = None
    tilt_azimuth_deg: float = 0.0
    roll_deg: float = 0.0
    aim_dxy: tuple[float, float] = (0.0, 0.0)
    arm_offsets_deg: tuple[float, ...] | None = None
    arm_over_cube: bool = False     # NEAR_RIM sets: the gripper held over the cube, hiding part of it
    size: tuple[int, int] = (WIDTH, HEIGHT)   # the camera's resolution (width, height); CAMERAS sets vary it


@dataclass(frozen=True)
class StressFrame:
    frame: np.ndarray            # what the camera delivers: distorted, blurred, noisy, compressed
    look: Look
    distance_cm: float           # cube centre to bowl centre, horizontal, at rest
    inside: bool                 # the judge's verdict
    where: str                   # where the cube was put: inside, rim, outside, far, against (the bowl)
    rim_visible: float           # share of the rim's circumference the camera sees (0..1)
    cube_visible: float          # share of the cube's silhouette the camera sees (0..1)
    camera_matrix: np.ndarray    # 3x3 pinhole intrinsics of the render
    distortion: np.ndarray       # OpenCV (k1, k2, p1, p2, k3) applied to the render
    rim_px: tuple[float, float, float]   # the rim's outer edge in the undistorted image: centre x, y, mean radius
    top_face: np.ndarray | None = None   # with `stress_frames(top_face=True)`: where the camera sees the cube's face
    #                                      that looks up (bool, distorted as the frame), a segmenter's truth
    cube_mask: np.ndarray | None = None  # with `stress_frames(cube_mask=True)`: every pixel where the camera sees the
    #                                      cube, sides too (bool, distorted): the blob `find_cube` outlines, exactly


def random_look(rng: np.random.Generator, k: int) -> Look:
    """The k-th look: palettes and tables cycle, the rest is drawn so each defect shows up often."""
    palette = list(PALETTES)[k % len(PALETTES)]
    table = PALETTE_TABLE.get(palette, TABLE_SURFACES[0])
    on = rng.random(8) < 0.5
    return Look(
        palette=palette, table=table,
        camera_height=float(rng.uniform(0.62, 0.88)), tilt_deg=float(rng.uniform(-8, 8)),
        fovy_deg=float(rng.uniform(40, 58)), camera_dxy=(float(rng.uniform(-0.04, 0.04)),
                                                       float(rng.uniform(-0.04, 0.04))),
        light_dir=_unit((rng.uniform(-0.7, 0.7), rng.uniform(-0.7, 0.7), -1.0)), shadows=bool(on[0]),
        arm_over_rim=bool(rng.random() < 0.35),
        blur_px=float(rng.uniform(1.5, 5)) if on[1] else 0.0, blur_angle_deg=float(rng.uniform(0, 180)),
        noise_sigma=float(rng.uniform(3, 9)) if on[2] else 1.0,
        jpeg_quality=int(rng.integers(30, 80)) if on[3] else None,
        gain=float(rng.uniform(0.55, 1.5)) if on[4] else 1.0,
        white_balance=tuple(float(v) for v in rng.uniform(0.9, 1.1, 3)) if on[5] else (1.0, 1.0, 1.0),
        k1=float(rng.uniform(-0.3, -0.05)) if on[6] else 0.0, k2=float(rng.uniform(0.0, 0.08)) if on[6] else 0.0,
    )


def _colour(rng: np.random.Generator, sat: tuple[float, float], val: tuple[float, float]) -> tuple[float, ...]:
    """Any colour but the cube's red (the cube is found by colour; a red bowl hides it by design)."""
    hue = float(rng.uniform(0.07, 0.93))
    return tuple(float(c) for c in colorsys.hsv_to_rgb(hue, float(rng.uniform(*sat)), float(rng.uniform(*val))))


def wide_look(rng: np.random.Generator, k: int) -> Look:
    """The k-th look of a WIDE set: the stress set's camera defects, on scenes drawn far more widely."""
    base = random_look(rng, k)
    bowl = _colour(rng, (0.0, 0.8), (0.1, 0.95))
    if rng.random() < 0.5:   # a lip of the bowl's own colour, a little darker or lighter
        shade = float(rng.uniform(0.75, 1.1))
        lip = tuple(min(1.0, c * shade) for c in bowl)
    else:                    # a lip of another colour
        lip = _colour(rng, (0.0, 0.9), (0.1, 0.95))
    table = _colour(rng, (0.0, 0.6), (0.15, 0.95))
    return replace(
        base, palette="wide", table=TABLE_SURFACES[int(rng.integers(0, len(TABLE_SURFACES)))],
        camera_height=float(rng.uniform(0.5, 1.0)), tilt_deg=float(rng.uniform(0, 15)),
        fovy_deg=float(rng.uniform(40, 62)), camera_dxy=(0.0, 0.0),
        colours=(bowl, lip, table), glossy=bool(rng.random() < 0.25), light_diffuse=float(rng.uniform(0.3, 1.0)),
        tilt_azimuth_deg=float(rng.uniform(0, 360)), roll_deg=float(rng.uniform(-15, 15)),
        aim_dxy=(float(rng.uniform(-0.08, 0.08)), float(rng.uniform(-0.08, 0.08))),
        arm_offsets_deg=tuple(float(v) for v in rng.uniform(-25, 25, 5)),
    )


def near_rim_look(rng: np.random.Generator, k: int) -> Look:
    """The k-th look of a NEAR_RIM set: WIDE's scenes, the gripper over the cube in about half the
    frames (and over the rim in a fifth of the others)."""
    look = wide_look(rng, k)
    over_cube = bool(rng.random() < 0.5)
    return replace(look, arm_over_cube=over_cube, arm_over_rim=not over_cube and bool(rng.random() < 0.2))


def colour_temperature_gains(kelvin: float) -> tuple[float, float, float]:
    """RGB gains of a light at `kelvin` on a camera balanced for daylight (6500 K): warm light is redder."""
    warm = (6500.0 - kelvin) / 3800.0          # 0 at 6500 K, 1 at 2700 K
    return 1.0 + 0.3 * warm, 1.0 + 0.04 * warm, 1.0 - 0.35 * warm


def camera_look(rng: np.random.Generator, k: int) -> Look:
    """The k-th look of a CAMERAS set: a WIDE scene through a camera of any resolution, field of view and lens."""
    look = wide_look(rng, k)
    width, height = RESOLUTIONS[k % len(RESOLUTIONS)]
    hfov = float(rng.uniform(40, 90))
    fovy = math.degrees(2 * math.atan(math.tan(math.radians(hfov) / 2) * height / width))
    barrel = bool(rng.random() < 0.5)
    gains = colour_temperature_gains(float(rng.uniform(2700, 6500)))
    return replace(look, size=(width, height), fovy_deg=fovy, blur_px=look.blur_px * height / HEIGHT,
                   camera_height=float(rng.uniform(0.5, 0.9)), tilt_deg=float(rng.uniform(0, 12)),
                   aim_dxy=(float(rng.uniform(-0.04, 0.04)), float(rng.uniform(-0.04, 0.04))),
                   k1=float(rng.uniform(-0.3, -0.08)) if barrel else 0.0,
                   k2=float(rng.uniform(0.0, 0.08)) if barrel else 0.0,
                   white_balance=tuple(g * w for g, w in zip(gains, look.white_balance, strict=True)))


def _unit(v: tuple[float, ...]) -> tuple[float, float, float]:
    a = np.asarray(v, float)
    a = a / np.linalg.norm(a)
    return float(a[0]), float(a[1]), float(a[2])


def camera_matrix(fovy_deg: float, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """MuJoCo's pinhole: square pixels, principal point at the image centre."""
    f = (height / 2) / math.tan(math.radians(fovy_deg) / 2)
    return np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], float)


def distort(image: np.ndarray, matrix: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """What a lens with these OpenCV coefficients makes of an ideal pinhole image."""
    if not np.any(coefficients):
        return image
    h, w = image.shape[:2]
    # the map is smooth: solve it on a coarse grid (every 4 px) and interpolate
    step = 4
    ys, xs = np.mgrid[0:h + step:step, 0:w + step:step].astype(np.float32)
    pixels = np.stack([xs.ravel(), ys.ravel()], axis=1).reshape(-1, 1, 2)
    ideal = cv2.undistortPointsIter(pixels, matrix, coefficients, None, matrix,
                                    (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-7))
    coarse = ideal.reshape(xs.shape[0], xs.shape[1], 2)
    fine = cv2.resize(coarse, (coarse.shape[1] * step, coarse.shape[0] * step), interpolation=cv2.INTER_LINEAR)
    # cv2.resize puts coarse sample j at fine coordinate step * j + (step - 1) / 2: shift back to grid
    offset = (step - 1) / 2
    gy, gx = np.mgrid[0:h, 0:w].astype(np.float32)
    maps = cv2.remap(fine, gx + offset, gy + offset, cv2.INTER_LINEAR)
    return cv2.remap(image, maps[..., 0], maps[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def camera_defects(image: np.ndarray, look: Look, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Lens, motion blur, exposure and white balance, sensor noise, JPEG: in the order a camera applies them."""
    out = distort(image, matrix, np.array([look.k1, look.k2, 0, 0, 0], float))
    if look.blur_px > 0:
        size = math.ceil(look.blur_px) | 1
        kernel = np.zeros((size, size), np.float32)
        c = size // 2
        t = math.radians(look.blur_angle_deg)
        dx, dy = math.cos(t) * look.blur_px / 2, math.sin(t) * look.blur_px / 2
        cv2.line(kernel, (round(c - dx), round(c - dy)), (round(c + dx), round(c + dy)), 1.0, 1, cv2.LINE_AA)
        out = cv2.filter2D(out, -1, kernel / kernel.sum())
    linear = out.astype(np.float32) * look.gain * np.asarray(look.white_balance, np.float32)
    linear += rng.normal(0, look.noise_sigma, linear.shape).astype(np.float32)
    out = np.clip(linear, 0, 255).astype(np.uint8)
    if look.jpeg_quality is not None:
        _, data = cv2.imencode(".jpg", out[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, look.jpeg_quality])
        out = cv2.imdecode(data, cv2.IMREAD_COLOR)[:, :, ::-1].copy()
    return out


class _Stage:
    """The MuJoCo world with the stress set's knobs: camera pose, light, materials, arm pose."""

    def __init__(self, geometry: SceneGeometry) -> None:
        self.geometry = geometry
        self.world = SimWorld(replace(geometry, surface_variants=True))
        m = self.world.model
        self.camera = m.camera("top").id
        self.table = m.geom("table").id
        names = [m.geom(i).name for i in range(m.ngeom)]
        self.rim_geoms = {i for i, n in enumerate(names) if n.startswith("bowl_rim_")}
        self.bowl_geoms = {i for i, n in enumerate(names) if n.startswith("bowl_")}
        self.cube_geom = m.geom("cube").id
        self.materials = {m.material(i).name: i for i in range(m.nmat)}
        m.vis.global_.offwidth, m.vis.global_.offheight = max(r[0] for r in RESOLUTIONS), max(r[1] for r in RESOLUTIONS)
        self.size = (WIDTH, HEIGHT)
        self.segmenters: dict[tuple[int, int], mujoco.Renderer] = {}
        self.ik = TopDownIK(m)

    @property
    def segmenter(self) -> mujoco.Renderer:
        if self.size not in self.segmenters:
            renderer = OwnContextRenderer(self.world.model, self.size[1], self.size[0])
            renderer.enable_segmentation_rendering()
            self.segmenters[self.size] = renderer
        return self.segmenters[self.size]

    def dress(self, look: Look) -> None:
        m = self.world.model
        self.size = look.size
        bowl, rim, table = look.colours or PALETTES[look.palette]
        glossy = self.materials["bowl_glossy"] if "glossy" in look.palette or look.glossy else -1
        for g in self.bowl_geoms:
            m.geom_rgba[g, :3] = rim if g in self.rim_geoms else bowl
            m.geom_matid[g] = glossy
        m.geom_rgba[self.table, :3] = table
        m.geom_matid[self.table] = self.materials.get(f"table_{look.table}", -1)
        m.light_dir[0] = look.light_dir
        m.light_pos[0] = np.array([*self.geometry.bowl_xy, 0.0]) - 1.4 * np.asarray(look.light_dir)
        m.light_cutoff[0] = 70
        m.light_castshadow[0] = look.shadows
        m.light_diffuse[0] = look.light_diffuse or self.geometry.light_intensity
        g = self.geometry
        if look.colours is not None:
            self._aim(look)
            return
        tilt = math.radians(look.tilt_deg)
        x = g.top_camera_xy[0] + look.camera_dxy[0] - look.camera_height * math.tan(tilt)
        m.cam_pos[self.camera] = [x, g.top_camera_xy[1] + look.camera_dxy[1], look.camera_height]
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, _axis_quat(2, -math.pi / 2), _axis_quat(0, tilt))
        m.cam_quat[self.camera] = quat
        m.cam_fovy[self.camera] = look.fovy_deg

    def _aim(self, look: Look) -> None:
        """A WIDE camera: `camera_height` up, looking at a point `aim_dxy` off the bowl, `tilt_deg` off
        vertical towards `tilt_azimuth_deg`, image up along the robot's +x turned by `roll_deg`."""
        g, m = self.geometry, self.world.model
        aim = np.array([g.bowl_xy[0] + look.aim_dxy[0], g.bowl_xy[1] + look.aim_dxy[1], 0.0])
        t, a = math.radians(look.tilt_deg), math.radians(look.tilt_azimuth_deg)
        reach = look.camera_height * math.tan(t)
        position = aim + np.array([reach * math.cos(a), reach * math.sin(a), look.camera_height])
        back = (position - aim) / np.linalg.norm(position - aim)       # the camera's +z looks away from the scene
        r = math.radians(look.roll_deg)
        up_hint = np.array([math.cos(r), math.sin(r), 0.0])
        right = np.cross(up_hint, back)
        right /= np.linalg.norm(right)
        up = np.cross(back, right)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.column_stack([right, up, back]).ravel())
        m.cam_pos[self.camera] = position
        m.cam_quat[self.camera] = quat
        m.cam_fovy[self.camera] = look.fovy_deg

    def drop_cube(self, where: str, rng: np.random.Generator, arm_offsets_deg: tuple[float, ...] | None = None
                  ) -> None:
        g, world = self.geometry, self.world
        pose = dict(DEFAULT_START_POSE)
        for name, extra in zip(list(pose)[:5], arm_offsets_deg or (), strict=False):
            pose[name] += extra
        world.set_arm(pose)
        rim = g.bowl_rim_radius
        if where == "far":
            radius, angle = self._far_spot(rng)
        elif where == "against":   # set down touching or nearly touching the bowl's outside
            radius, angle = rng.uniform(rim + 0.0145, rim + 0.0225), rng.uniform(0, 2 * math.pi)
        else:
            radius = {"inside": rng.uniform(0, rim - 0.025), "rim": rng.uniform(rim - 0.01, rim + 0.01),
                      "outside": rng.uniform(rim + 0.025, rim + 0.06)}[where]
            angle = rng.uniform(0, 2 * math.pi)
        world.place_cube((g.bowl_xy[0] + radius * math.cos(angle), g.bowl_xy[1] + radius * math.sin(angle)),
                         rng.uniform(0, math.pi / 2))
        if where not in ("outside", "against"):
            world.data.qpos[world.cube_qpos + 2] = 0.075  # drop it in from above the rim
        world.data.ctrl[:] = world.joint_positions_rad()
        for _ in range(450):  # 1.5 s to come to rest; the judge's running watch is not needed here
            mujoco.mj_step(world.model, world.data)

    def _far_spot(self, rng: np.random.Generator) -> tuple[float, float]:
        """8-26 cm from the bowl's centre, on the table in view, clear of the arm's base."""
        g = self.geometry
        mujoco.mj_forward(self.world.model, self.world.data)
        radius = angle = 0.0
        for attempt in range(60):
            radius = rng.uniform(0.08, 0.26) if attempt < 40 else rng.uniform(0.08, 0.15)
            angle = rng.uniform(0, 2 * math.pi)
            x, y = g.bowl_xy[0] + radius * math.cos(angle), g.bowl_xy[1] + radius * math.sin(angle)
            px = self.project(np.array([[x, y, g.cube_edge]]))[0]
            margin, (width, height) = 30 * self.size[1] / HEIGHT, self.size
            if margin <= px[0] <= width - margin and margin <= px[1] <= height - margin and math.hypot(x, y) > 0.14:
                break
        return radius, angle

    def arm_over_rim(self, rng: np.random.Generator) -> None:
        """Hold the gripper above a point of the rim, as an arm that has just let go does."""
        g, world = self.geometry, self.world
        angle = rng.uniform(0, 2 * math.pi)
        reach = g.bowl_rim_radius + rng.uniform(-0.01, 0.02)
        target = np.array([g.bowl_xy[0] + reach * math.cos(angle), g.bowl_xy[1] + reach * math.sin(angle),
                           rng.uniform(0.09, 0.14)])
        seed = world.joint_positions_rad()[:5]
        q, _ = self.ik.solve_reachable(target, self.ik.target_rotation(angle, seed), seed)
        world.data.qpos[world.qpos_idx[:5]] = q
        mujoco.mj_forward(world.model, world.data)

    def arm_over_cube(self, rng: np.random.Generator) -> None:
        """Hold the gripper a little above and beside the cube, so that it hides part of it from the
        camera: an arm that has just let go and not yet lifted away."""
        g, world = self.geometry, self.world
        pos, _ = world.cube_pose()
        angle = rng.uniform(0, 2 * math.pi)
        step = rng.uniform(0.045, 0.075)
        target = np.array([pos[0] + step * math.cos(angle), pos[1] + step * math.sin(angle),
                           rng.uniform(0.07, 0.12)])
        seed = world.joint_positions_rad()[:5]
        bearing = math.atan2(target[1] - g.bowl_xy[1], target[0] - g.bowl_xy[0])
        q, _ = self.ik.solve_reachable(target, self.ik.target_rotation(bearing, seed), seed)
        world.data.qpos[world.qpos_idx[:5]] = q
        mujoco.mj_forward(world.model, world.data)

    def project(self, points: np.ndarray) -> np.ndarray:
        """World points (N, 3) to pixels of the ideal (undistorted) top image."""
        d = self.world.data
        pos, rot = d.cam_xpos[self.camera], d.cam_xmat[self.camera].reshape(3, 3)
        local = (points - pos) @ rot
        width, height = self.size
        f = (height / 2) / math.tan(math.radians(self.world.model.cam_fovy[self.camera]) / 2)
        return np.column_stack([width / 2 + f * local[:, 0] / -local[:, 2],
                                height / 2 - f * local[:, 1] / -local[:, 2]])

    def rim_in_image(self) -> tuple[float, float, float]:
        g = self.geometry
        angles = np.linspace(0, 2 * np.pi, 90, endpoint=False)
        edge = np.column_stack([g.bowl_xy[0] + g.bowl_rim_radius * np.cos(angles),
                                g.bowl_xy[1] + g.bowl_rim_radius * np.sin(angles), np.full_like(angles, 0.042)])
        (cx, cy), (d1, d2), _ = cv2.fitEllipse(self.project(edge).astype(np.float32))
        return float(cx), float(cy), float((d1 + d2) / 4)

    def segmentation(self) -> np.ndarray:
        """The top camera's segmentation render (geom ids), once a frame: `visibility`, `top_face`, `cube_pixels`."""
        self.segmenter.update_scene(self.world.data, camera="top")
        return np.asarray(self.segmenter.render()[:, :, 0])

    def visibility(self, ids: np.ndarray) -> tuple[float, float]:
        """Shares of the rim ring and of the cube's silhouette that reach the camera (`ids`: `segmentation()`)."""
        g, world = self.geometry, self.world
        angles = np.linspace(0, 2 * np.pi, 180, endpoint=False)
        r = g.bowl_rim_radius - 0.002
        ring = np.column_stack([g.bowl_xy[0] + r * np.cos(angles), g.bowl_xy[1] + r * np.sin(angles),
                                np.full_like(angles, RIM_TOP_Z - 0.002)])
        px = np.round(self.project(ring)).astype(int)
        inside = (px[:, 0] >= 0) & (px[:, 1] >= 0) & (px[:, 0] < self.size[0]) & (px[:, 1] < self.size[1])
        seen = np.zeros(len(px), bool)
        seen[inside] = np.isin(ids[px[inside, 1], px[inside, 0]], list(self.rim_geoms))
        body = world.cube_body
        half = g.cube_edge / 2
        corners = np.array([[sx, sy, sz] for sx in (-half, half) for sy in (-half, half) for sz in (-half, half)])
        world_corners = world.data.xpos[body] + corners @ world.data.xmat[body].reshape(3, 3).T
        hull = cv2.convexHull(self.project(world_corners).astype(np.float32))
        expected = cv2.contourArea(hull)
        cube_pixels = float(np.sum(ids == self.cube_geom))
        return float(seen.mean()), float(min(1.0, cube_pixels / expected)) if expected > 0 else 0.0

    def top_face(self, ids: np.ndarray) -> np.ndarray:
        """The visible part of the cube's face that looks up, in the ideal (undistorted) image: the projected face
        polygon, cut to the cube's pixels of the segmentation render (`ids`)."""
        world, half = self.world, self.geometry.cube_edge / 2
        body = world.cube_body
        rot = world.data.xmat[body].reshape(3, 3)
        up = int(np.argmax(np.abs(rot[2])))
        a, b = [i for i in range(3) if i != up]
        centre = world.data.xpos[body] + np.sign(rot[2, up]) * half * rot[:, up]
        corners = np.array([centre + half * (sa * rot[:, a] + sb * rot[:, b])
                            for sa, sb in ((-1, -1), (-1, 1), (1, 1), (1, -1))])
        polygon = np.zeros(ids.shape, np.uint8)
        cv2.fillPoly(polygon, [np.round(self.project(corners) * 16).astype(np.int32)], 255, cv2.LINE_AA, shift=4)
        return np.where(ids == self.cube_geom, polygon, 0).astype(np.uint8)

    def cube_pixels(self, ids: np.ndarray) -> np.ndarray:
        """Every pixel of the ideal (undistorted) image where the camera sees the cube (255), sides included."""
        return np.where(ids == self.cube_geom, 255, 0).astype(np.uint8)

    def close(self) -> None:
        for renderer in self.segmenters.values():
            renderer.close()
        self.world.close()


def _axis_quat(axis: int, angle: float) -> np.ndarray:
    q = np.zeros(4)
    q[0] = math.cos(angle / 2)
    q[1 + axis] = math.sin(angle / 2)
    return q


def stress_frames(count: int, seed: int = 0, geometry: SceneGeometry | None = None,
                  distribution: Distribution = Distribution.STRESS,
                  only: Collection[int] | None = None, top_face: bool = False,
                  cube_mask: bool = False) -> Iterator[StressFrame]:
    """`count` hard frames, each with its own look, cube drop (inside, on the rim, beside; in WIDE
    sets also far outside the bowl; in NEAR_RIM sets mostly against the bowl or on its lip) and truth.

    `only`: the indices of the frames to draw and yield (default: all). A frame depends on every frame before it
    (the random draws and the physics state they leave), so the others are still set up, with the same draws and
    the same physics, but not drawn: rendering, the camera's defects and the visibility check are most of a
    frame's cost, and a test about frame 42 of a set paid for 42 others (`stress_frame`).

    `top_face`: each frame also carries the exact mask of the cube's top face (`StressFrame.top_face`), for a
    segmenter's training and judging (`benchmarks/learned_segmenter.py`); `cube_mask`: the exact mask of all of
    the cube the camera sees (`StressFrame.cube_mask`), the shipped segmenter's truth. The frames are the same either
    way."""
    geometry = geometry or SceneGeometry()
    rng = np.random.default_rng(seed)
    stage = _Stage(geometry)
    looks = {Distribution.STRESS: random_look, Distribution.WIDE: wide_look, Distribution.NEAR_RIM: near_rim_look,
             Distribution.CAMERAS: camera_look}
    places = {Distribution.STRESS: ("inside", "rim", "outside"), Distribution.WIDE: WIDE_PLACES,
              Distribution.NEAR_RIM: NEAR_RIM_PLACES, Distribution.CAMERAS: WIDE_PLACES}[distribution]
    try:
        for k in range(count):
            look = looks[distribution](rng, k)
            where = places[k % len(places)]
            stage.dress(look)
            stage.drop_cube(where, rng, look.arm_offsets_deg)
            if look.arm_over_rim:
                stage.arm_over_rim(rng)
            elif look.arm_over_cube:
                stage.arm_over_cube(rng)
            if only is not None and k not in only:
                _draw_defects_noise(look, rng)   # what camera_defects would have drawn: the frames after depend on it
                continue
            world = stage.world
            pos, _ = world.cube_pose()
            distance = 100 * math.hypot(pos[0] - geometry.bowl_xy[0], pos[1] - geometry.bowl_xy[1])
            ids = stage.segmentation()
            rim_visible, cube_visible = stage.visibility(ids)
            matrix = camera_matrix(look.fovy_deg, *look.size)
            coefficients = np.array([look.k1, look.k2, 0, 0, 0], float)
            face = distort(stage.top_face(ids), matrix, coefficients) > 127 if top_face else None
            silhouette = distort(stage.cube_pixels(ids), matrix, coefficients) > 127 if cube_mask else None
            ideal = world.render("top", *look.size)
            yield StressFrame(camera_defects(ideal, look, matrix, rng), look, distance,
                              world.judge.cube_inside_bowl(world.data), where, rim_visible, cube_visible,
                              matrix, coefficients, stage.rim_in_image(), face, silhouette)
    finally:
        stage.close()


def stress_frame(seed: int, index: int, distribution: Distribution = Distribution.STRESS) -> StressFrame:
    """Frame `index` of a set, exactly as `stress_frames` yields it among all the others, for the price of setting
    the ones before it up without drawing them."""
    (frame,) = stress_frames(index + 1, seed=seed, distribution=distribution, only=(index,))
    return frame


def _draw_defects_noise(look: Look, rng: np.random.Generator) -> None:
    """The random draws `camera_defects` makes for a frame of this look (its sensor noise), without the frame."""
    width, height = look.size
    rng.normal(0, look.noise_sigma, (height, width, 3))


def board_images(board_image: np.ndarray, square_px: int, square_mm: float, matrix: np.ndarray,
                 coefficients: np.ndarray, count: int, seed: int = 0,
                 size: tuple[int, int] = (WIDTH, HEIGHT)) -> list[np.ndarray]:
    """Views of a flat printed board (`board_image`, `square_px` pixels per `square_mm` square) through
    a lens with known intrinsics and distortion: tilted, turned and moved about the frame, as a person
    holds a board in front of a camera. Rendered at twice the size and averaged down (anti-aliased)."""
    rng = np.random.default_rng(seed)
    mm_per_px = square_mm / square_px
    h_board, w_board = board_image.shape[:2]
    to_mm = np.array([[mm_per_px, 0, -w_board * mm_per_px / 2], [0, mm_per_px, -h_board * mm_per_px / 2],
                      [0, 0, 1]])
    supersample = np.diag([2.0, 2.0, 1.0])
    images = []
    for k in range(count):
        rvec = np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.3)])
        rotation, _ = cv2.Rodrigues(rvec)
        depth = rng.uniform(1.5, 2.0) * matrix[0, 0] * w_board * mm_per_px / size[0]
        centre = [(k % 3 - 1) * 0.22, (k // 3 % 3 - 1) * 0.18]  # sweep the frame so the corners see the board
        t = np.array([centre[0] * depth + rng.uniform(-5, 5), centre[1] * depth + rng.uniform(-5, 5), depth])
        homography = supersample @ matrix @ np.column_stack([rotation[:, 0], rotation[:, 1], t]) @ to_mm
        big = cv2.warpPerspective(board_image, homography, (2 * size[0], 2 * size[1]), flags=cv2.INTER_AREA,
                                  borderValue=200)
        ideal = cv2.resize(big, size, interpolation=cv2.INTER_AREA)
        images.append(distort(ideal, matrix, coefficients))
    return images
