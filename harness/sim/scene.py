"""Builds the MuJoCo scene: the Menagerie SO-101, a table, a cube, a bowl and a top camera.

The arm model is read from the installed `so101-nexus` wheel (it carries the
Menagerie `robotstudio_so101` files); nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np

from harness.errors import MissingComponent
from harness.models.protocol import Scene
from harness.models.reality_gap import RealityGap
from harness.models.render_profile import COARSE_CELL_MM
from harness.sim.meshes import clustered, decimated

PHYSICS_DT = 1.0 / 300.0
BOWL_WALL_SEGMENTS = 16
BOWL_FLOOR_SIDES = 8      # the bowl floor's contact shape: an octagon of two squares (`_add_bowl`)
GRASP_POINT_IN_GRIPPER = (0.011, 0.0, -0.085)
FULL_VISUAL_GROUP = 2     # the Menagerie's visual geoms: drawn by MuJoCo's default geom groups
COARSE_VISUAL_GROUP = 5   # their coarse copies (issue 42): drawn only when a render profile asks for them
COLLISION_ONLY_GROUP = 3  # geoms that are touched, never drawn (MuJoCo's default geom groups draw 0-2)


@dataclass(frozen=True)
class SceneGeometry:
    """Everything about the table-top layout that the scene, judge and expert share (metres)."""

    bowl_xy: tuple[float, float] = (0.18, 0.14)
    bowl_rim_diameter: float = 0.115
    bowl_floor_diameter: float = 0.075
    bowl_height: float = 0.04
    cube_edge: float = 0.03
    cube_mass: float = 0.03
    top_camera_height: float = 0.75
    top_camera_xy: tuple[float, float] = (0.20, 0.05)
    top_camera_fovy: float = 45.0
    top_camera_tilt_deg: float = 0.0
    light_intensity: float = 0.6
    exposure: float = 1.0        # every light (the sun and the headlight) times this: a reality-gap knob
    cube_friction: float = 1.0   # the cube's sliding friction coefficient: a reality-gap knob
    # The table's surface (and the cube and bowl on it) above the arm's base, which stays at z = 0 with the top
    # camera: a reality-gap knob (a desk whose arm sits on a riser, or a mat under the cube and bowl).
    table_z: float = 0.0
    # Extra table materials, a glossy bowl material and a shadow map, switched per frame by the
    # measurement stress set (tests/generators/stress_set.py); off for ordinary runs, where they cost nothing.
    surface_variants: bool = False

    @property
    def bowl_rim_radius(self) -> float:
        return self.bowl_rim_diameter / 2

    @property
    def bowl_floor_radius(self) -> float:
        return self.bowl_floor_diameter / 2


def menagerie_dir() -> Path:
    spec = importlib.util.find_spec("so101_nexus")
    if spec is None or not spec.submodule_search_locations:
        raise MissingComponent("so101-nexus is not installed: run scripts/setup (it installs the SO-101 model)")
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "SO101_menagerie"
    if not (path / "so101.xml").is_file():
        raise MissingComponent(f"SO-101 model not found at {path}: run scripts/setup")
    return path


def _use_decimated_visual_meshes(spec: mujoco.MjSpec, assets: Path) -> None:
    collision_meshes = {g.meshname for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH and g.contype}
    for mesh in spec.meshes:
        if mesh.name in collision_meshes or not mesh.file:
            continue
        vertices, faces = decimated(assets / mesh.file)
        mesh.file = ""
        mesh.uservert = vertices.astype(np.float64).ravel().tolist()
        mesh.userface = faces.astype(np.int32).ravel().tolist()


def _add_coarse_visual_geoms(spec: mujoco.MjSpec, assets: Path) -> None:
    """A copy of every visual mesh geom from the coarse mesh set, in its own geom group, massless and without
    contacts: physics does not change (tests/unit/sim/test_render_profile.py), and a renderer picks one set or the
    other through its geom groups."""
    files = {mesh.name: (mesh.file, list(mesh.scale)) for mesh in spec.meshes}
    made: set[str] = set()
    for body in spec.bodies:
        for geom in list(body.geoms):
            if geom.type != mujoco.mjtGeom.mjGEOM_MESH or geom.contype or geom.conaffinity:
                continue
            if geom.group != FULL_VISUAL_GROUP:
                continue
            name = f"coarse_{geom.meshname}"
            if name not in made:
                file, scale = files[geom.meshname]
                vertices, faces = clustered(assets / file, COARSE_CELL_MM / 1000 / max(scale))
                mesh = spec.add_mesh(name=name, scale=scale)
                mesh.uservert = vertices.astype(np.float64).ravel().tolist()
                mesh.userface = faces.astype(np.int32).ravel().tolist()
                made.add(name)
            copy = body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=name, pos=list(geom.pos),
                                 quat=list(geom.quat), rgba=list(geom.rgba), group=COARSE_VISUAL_GROUP,
                                 contype=0, conaffinity=0, mass=0)
            copy.material = geom.material
            copy.alt = geom.alt   # some Menagerie geoms are oriented by Euler angles, not a quaternion


MAX_FRAME = (1920, 1080)   # the largest frame (width, height) the simulated cameras draw


def build_spec(geometry: SceneGeometry, fast_meshes: bool = True, coarse_meshes: bool = True) -> mujoco.MjSpec:
    """`coarse_meshes`: add the coarse visual set (render profiles' small frames); physics is the same without."""
    spec = mujoco.MjSpec.from_file(str(menagerie_dir() / "so101.xml"))
    if coarse_meshes:
        _add_coarse_visual_geoms(spec, menagerie_dir() / "assets")
    if fast_meshes:
        _use_decimated_visual_meshes(spec, menagerie_dir() / "assets")
    spec.option.timestep = PHYSICS_DT
    spec.visual.quality.offsamples = 0
    spec.visual.quality.shadowsize = 0
    # the offscreen framebuffer bounds every frame drawn: the largest camera a desk may have (`--camera-size`
    # takes up to 1920x1080), not the menagerie model's 640x480
    spec.visual.global_.offwidth, spec.visual.global_.offheight = MAX_FRAME
    spec.visual.headlight.ambient = [0.25 * geometry.exposure] * 3
    spec.visual.headlight.diffuse = [0.3 * geometry.exposure] * 3
    world = spec.worldbody

    world.add_light(name="sun", pos=[0.2, 0.0, 1.5], dir=[0, 0, -1], castshadow=False,
                    diffuse=[geometry.light_intensity * geometry.exposure] * 3)
    table = world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1.0, 1.0, 0.01],
                           pos=[0, 0, geometry.table_z], rgba=[0.52, 0.42, 0.32, 1])
    table.friction = [1.0, 0.005, 0.0001]

    half = geometry.cube_edge / 2
    cube_body = world.add_body(name="cube", pos=[0.22, -0.05, geometry.table_z + half])
    cube_body.add_freejoint(name="cube_joint")
    cube = cube_body.add_geom(name="cube", type=mujoco.mjtGeom.mjGEOM_BOX, size=[half] * 3,
                              rgba=[0.85, 0.1, 0.1, 1], mass=geometry.cube_mass, condim=4)
    cube.friction = [geometry.cube_friction, 0.005, 0.0001]
    if geometry.cube_friction != 1.0:
        # MuJoCo takes the larger friction of two touching geoms unless one has priority: a slippery cube must
        # have it, or the gripper's pads would decide. The twin's cube (1.0) is built exactly as it always was.
        cube.priority = 1

    _add_bowl(world, geometry)
    if geometry.surface_variants:
        _add_surface_variants(spec)

    # The point between the jaws where a held cube's centre sits: what the expert aims
    # at and what the judge watches. Offsets are in the gripper body's frame.
    spec.body("gripper").add_site(name="grasp_point", pos=list(GRASP_POINT_IN_GRIPPER), size=[0.004, 0, 0],
                                  group=3)

    tilt = math.radians(geometry.top_camera_tilt_deg)
    cam = world.add_camera(name="top", pos=[geometry.top_camera_xy[0] - geometry.top_camera_height * math.tan(tilt),
                                            geometry.top_camera_xy[1], geometry.top_camera_height])
    # Image "up" is the robot's +x (away from the base), as on a camera mounted above the table.
    cam.fovy = geometry.top_camera_fovy
    cam.quat = _camera_quat(-math.pi / 2, tilt)
    return spec


def _axis_quat(axis: int, angle: float) -> np.ndarray:
    q = np.zeros(4)
    q[0] = math.cos(angle / 2)
    q[1 + axis] = math.sin(angle / 2)
    return q


def _quat_mul(a: np.ndarray, b: np.ndarray) -> list[float]:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, a, b)
    return out.tolist()


def _camera_quat(yaw: float, tilt: float) -> list[float]:
    """Yaw about world z, then tilt about the camera's own x axis (toward +x for tilt > 0)."""
    return _quat_mul(_axis_quat(2, yaw), _axis_quat(0, tilt))


def _add_bowl(world: mujoco.MjsBody, g: SceneGeometry) -> None:
    """A static bowl of primitives: a floor disc and a ring of outward-tilted wall slabs."""
    bx, by = g.bowl_xy
    bowl = world.add_body(name="bowl", pos=[bx, by, g.table_z])
    floor_thickness = 0.004
    floor_radius = g.bowl_floor_radius + 0.004
    # The floor is drawn as a disc but touched as two squares turned 45 degrees apart (an octagon whose corners are
    # the disc's edge, inside the walls' foot all round). MuJoCo meets a box with a cylinder through its general
    # convex collider, which gives a cube lying on the floor along an edge one contact point that jumps from one
    # end of the edge to the other step by step: a cube that landed tilted against the wall rocked on for seconds
    # (issue 59 item 5; tests/unit/sim/test_bowl_rest.py). Box on box gives both ends, and the cube rests as a real
    # one does. The squares are invisible (alpha 0, a geom group no camera draws), so no frame changes.
    bowl.add_geom(name="bowl_floor", type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                  size=[floor_radius, floor_thickness / 2, 0], pos=[0, 0, floor_thickness / 2],
                  rgba=[0.2, 0.35, 0.75, 1], contype=0, conaffinity=0)
    half_side = floor_radius * math.cos(math.pi / BOWL_FLOOR_SIDES)
    for i in range(BOWL_FLOOR_SIDES // 4):
        square = bowl.add_geom(name=f"bowl_floor_touch_{i}", type=mujoco.mjtGeom.mjGEOM_BOX,
                               size=[half_side, half_side, floor_thickness / 2], pos=[0, 0, floor_thickness / 2],
                               rgba=[0.2, 0.35, 0.75, 0], group=COLLISION_ONLY_GROUP)
        square.quat = _axis_quat(2, 2 * math.pi / BOWL_FLOOR_SIDES * i).tolist()
    wall_top = g.bowl_rim_radius - 0.005  # the wall's outer face stays inside the rim ring's outer edge
    wall_run = wall_top - g.bowl_floor_radius
    slope = math.atan2(wall_run, g.bowl_height)
    wall_len = math.hypot(wall_run, g.bowl_height)
    mid_r = (wall_top + g.bowl_floor_radius) / 2
    seg_w = 2 * math.pi * wall_top / BOWL_WALL_SEGMENTS * 0.62
    for i in range(BOWL_WALL_SEGMENTS):
        phi = 2 * math.pi * i / BOWL_WALL_SEGMENTS
        geom = bowl.add_geom(
            name=f"bowl_wall_{i}", type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.002, seg_w, wall_len / 2],
            pos=[mid_r * math.cos(phi), mid_r * math.sin(phi), g.bowl_height / 2 + floor_thickness / 2],
            rgba=[0.2, 0.35, 0.75, 1],
        )
        geom.quat = _quat_mul(_axis_quat(2, phi), _axis_quat(1, slope))
    # A rounded rim ring, darker than the wall. Its outer edge is the
    # rim diameter, as a person measures a bowl with a ruler across the outside.
    ring = 0.003
    for i in range(BOWL_WALL_SEGMENTS * 2):
        phi = 2 * math.pi * (i + 0.5) / (BOWL_WALL_SEGMENTS * 2)
        rim = bowl.add_geom(
            name=f"bowl_rim_{i}", type=mujoco.mjtGeom.mjGEOM_CAPSULE,
            size=[ring, math.pi * (g.bowl_rim_radius - ring) / (BOWL_WALL_SEGMENTS * 2), 0],
            pos=[(g.bowl_rim_radius - ring) * math.cos(phi), (g.bowl_rim_radius - ring) * math.sin(phi),
                 g.bowl_height + floor_thickness / 2],
            rgba=[0.12, 0.22, 0.55, 1], contype=0, conaffinity=0,
        )
        rim.quat = _quat_mul(_axis_quat(2, phi), _axis_quat(0, math.pi / 2))


TABLE_SURFACES = ("plain", "wood", "speckle", "cloth")


def _surface_texture(kind: str, size: int = 256) -> np.ndarray:
    """A tileable RGB texture for the table: wood grain, granite-like speckle, or a woven cloth."""
    rng = np.random.default_rng(len(kind))
    y, x = np.mgrid[0:size, 0:size] / size
    if kind == "wood":
        wobble = 0.04 * np.sin(2 * np.pi * (3 * x + rng.random())) + 0.02 * np.sin(2 * np.pi * 7 * x)
        grain = 0.5 + 0.5 * np.sin(2 * np.pi * 14 * (y + wobble))
        base = np.array([0.58, 0.42, 0.26])
        rgb = base * (0.75 + 0.3 * grain[..., None])
    elif kind == "speckle":
        rgb = np.full((size, size, 3), 0.62) + rng.normal(0, 0.12, (size, size, 1))
    else:  # cloth: a fine two-tone weave
        weave = ((np.floor(x * 32) + np.floor(y * 32)) % 2)[..., None]
        rgb = np.array([0.30, 0.36, 0.30]) + 0.1 * weave
    return (np.clip(rgb, 0, 1) * 255).astype(np.uint8)


def _add_surface_variants(spec: mujoco.MjSpec) -> None:
    spec.visual.quality.shadowsize = 2048
    for kind in TABLE_SURFACES[1:]:
        image = _surface_texture(kind)
        texture = spec.add_texture(name=f"table_{kind}", type=mujoco.mjtTexture.mjTEXTURE_2D,
                                   width=image.shape[1], height=image.shape[0], nchannel=3)
        texture.data = image.tobytes()
        material = spec.add_material(name=f"table_{kind}")
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"table_{kind}"
        material.texrepeat = [6, 6]
    glossy = spec.add_material(name="bowl_glossy")
    glossy.specular = 0.9
    glossy.shininess = 0.9
    glossy.reflectance = 0.0


def build_model(geometry: SceneGeometry | None = None, fast_meshes: bool = True,
                coarse_meshes: bool = True) -> mujoco.MjModel:
    return build_spec(geometry or SceneGeometry(), fast_meshes, coarse_meshes).compile()


def gapped_geometry(gap: RealityGap, base: SceneGeometry | None = None) -> SceneGeometry:
    """The emulated arm's table with a declared reality gap: the scene's knobs (cube friction and mass, the top
    camera's tilt, exposure, the table's height); the servos' knobs are `emulator.sim_coupling`'s."""
    return replace(base or SceneGeometry(), cube_friction=gap.cube_friction, cube_mass=gap.cube_mass_g / 1000,
                   top_camera_tilt_deg=gap.camera_tilt_deg, exposure=gap.exposure,
                   table_z=gap.table_height_mm / 1000)


def scene_mismatch(scene: Scene, table: SceneGeometry) -> tuple[str, str] | None:
    """The first protocol scene field the simulated table does not have (within 0.5 mm), with the table's
    value in cm; None when they agree. Callers word the refusal for their own table (emulated, recorded)."""
    pairs = (("scene.bowl_xy_cm", scene.bowl_xy_cm, (table.bowl_xy[0] * 100, table.bowl_xy[1] * 100)),
             ("scene.bowl_diameter_cm", (scene.bowl_diameter_cm,), (table.bowl_rim_diameter * 100,)),
             ("scene.cube_edge_cm", (scene.cube_edge_cm,), (table.cube_edge * 100,)))
    for field, asked, there in pairs:
        if any(abs(a - b) > 0.05 for a, b in zip(asked, there, strict=True)):
            return field, ", ".join(f"{v:g}" for v in there)
    return None
