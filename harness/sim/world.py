"""One simulated table-top: physics, the judge, and cameras rendered on demand.

GL contexts belong to threads: an EGL context is current in at most one thread, and one left current in
a thread (or in a thread that has ended) cannot be made current in another (EGL_BAD_ACCESS). A world is
drawn from more than one thread (the TUI measures the cameras on one thread and runs the engine on
another), so each thread that draws gets renderers of its own (`_renderer`), and `release_renderers`
frees the calling thread's. A failure to draw is a `CameraRenderFailed`, which a trial records as a void.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import mujoco
import numpy as np

from harness.errors import CameraRenderFailed
from harness.models.protocol import JOINT_NAMES
from harness.models.render_profile import MeshDetail, RenderProfile
from harness.sim.gl_draw import DRAWS, OwnContextRenderer, context_still_current
from harness.sim.judge import Judge, JudgeThresholds
from harness.sim.scene import COARSE_VISUAL_GROUP, FULL_VISUAL_GROUP, PHYSICS_DT, SceneGeometry, build_model
from harness.sim.units import to_sim

CAMERA_NAMES = {"top": "top", "wrist": "wrist_cam"}
NOISE_PATTERNS = 7
COARSE_SLICES = 8   # slices and stacks of the bowl's capsules and cylinder in a coarse frame (MuJoCo's default: 28, 16)


def _scene_option(detail: MeshDetail) -> mujoco.MjvOption:
    """MuJoCo's default geom groups with one visual mesh set drawn."""
    option = mujoco.MjvOption()
    option.geomgroup[FULL_VISUAL_GROUP] = detail is MeshDetail.FULL
    option.geomgroup[COARSE_VISUAL_GROUP] = detail is MeshDetail.COARSE
    return option


def actuator_loads(model: mujoco.MjModel, actuator_force: np.ndarray, actuator_ids: np.ndarray) -> np.ndarray:
    """Actuator forces in Present_Load units: 0.1 % of each actuator's force cap, signed, within +-1000."""
    cap = np.abs(model.actuator_forcerange[actuator_ids]).max(axis=1)
    return np.clip(np.asarray(actuator_force)[actuator_ids] / cap * 1000.0, -1000.0, 1000.0)


@dataclass(frozen=True)
class FrameRequest:
    """Everything a frame of this world depends on, so another process can render it later.

    `qpos` is the configuration the world's poses were last computed from (after `mj_step`
    that is the one before the step's integration, which is what an immediate render shows).
    """

    camera: str
    width: int
    height: int
    qpos: np.ndarray
    noise_index: int
    frozen: bool
    detail: MeshDetail = MeshDetail.FULL


class SimWorld:
    """Owns the MuJoCo model and data. Time only moves in `step_control` (lock-step)."""

    def __init__(self, geometry: SceneGeometry | None = None, control_fps: int = 30,
                 judge_thresholds: JudgeThresholds | None = None,
                 render_profile: RenderProfile = RenderProfile.FULL) -> None:
        """`render_profile` decides the mesh set of each frame `render` and `frame_request` draw, by its size."""
        self.geometry = geometry or SceneGeometry()
        self.render_profile = RenderProfile(render_profile)
        self.model = build_model(self.geometry)
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)  # valid poses (and camera frames) before the first step
        self.control_fps = control_fps
        self.substeps = round(1.0 / (control_fps * PHYSICS_DT))
        self.qpos_idx = np.array([self.model.joint(j).qposadr[0] for j in JOINT_NAMES])
        self.dof_idx = np.array([self.model.joint(j).dofadr[0] for j in JOINT_NAMES])
        self.actuator_ids = np.array([self.model.actuator(j).id for j in JOINT_NAMES])
        self.cube_qpos = self.model.joint("cube_joint").qposadr[0]
        self.cube_body = self.model.body("cube").id
        g = self.geometry
        self.judge = Judge(self.model, g.bowl_xy, g.bowl_rim_radius, bowl_floor_z=g.table_z + 0.004,
                           bowl_height=g.bowl_height, cube_edge=g.cube_edge, thresholds=judge_thresholds,
                           table_z=g.table_z)
        # per drawing thread, by size and mesh set
        self._renderers: dict[threading.Thread, dict[tuple[int, int, MeshDetail], mujoco.Renderer]] = {}
        self._scene_options = {detail: _scene_option(detail) for detail in MeshDetail}
        self._stranded: list[mujoco.Renderer] = []   # of threads that ended holding them: never current again
        self._noise_bank: dict[tuple[int, int], np.ndarray] = {}
        self._render_count = 0
        self.frozen_cameras: set[str] = set()
        self._frozen_frames: dict[str, np.ndarray] = {}
        self._frozen_requested: set[str] = set()
        self._posed_qpos = self.data.qpos.copy()  # the configuration data's poses belong to
        # (simulated time, joint targets) each time the arm's command changed; None: not kept.
        self.command_log: list[tuple[float, np.ndarray]] | None = None

    @property
    def time(self) -> float:
        return float(self.data.time)

    @property
    def posed_qpos(self) -> np.ndarray:
        """The configuration a render now shows (see `FrameRequest`); read, not copied."""
        return self._posed_qpos

    def place_cube(self, cube_xy: tuple[float, float], cube_yaw: float, seed: int = 0) -> None:
        """Put the cube at rest at `cube_xy` (m) with `cube_yaw` (rad); the arm stays where it is.

        The seed adds sub-millimetre jitter so repeated attempts are not bit-identical,
        yet each attempt is reproducible.
        """
        rng = np.random.default_rng(seed)
        jitter = rng.normal(0.0, 0.0003, size=2)
        half = self.geometry.cube_edge / 2
        adr = self.cube_qpos
        self.data.qpos[adr:adr + 3] = [cube_xy[0] + jitter[0], cube_xy[1] + jitter[1],
                                       self.geometry.table_z + half + 0.0005]
        self.data.qpos[adr + 3:adr + 7] = [math.cos(cube_yaw / 2), 0, 0, math.sin(cube_yaw / 2)]
        cube_dof = self.model.joint("cube_joint").dofadr[0]
        self.data.qvel[cube_dof:cube_dof + 6] = 0
        mujoco.mj_forward(self.model, self.data)
        for _ in range(30):  # let the cube settle onto the table
            self._posed_qpos[:] = self.data.qpos
            mujoco.mj_step(self.model, self.data)
        self.judge.reset(rest_z=float(self.data.xpos[self.cube_body][2]))
        self.frozen_cameras.clear()
        self._frozen_frames.clear()
        self._frozen_requested.clear()
        self._render_count = 0   # each trial's sensor noise starts afresh: its frames do not depend on earlier trials

    def reset(self, cube_xy: tuple[float, float], cube_yaw: float, joints: dict[str, float],
              seed: int = 0) -> None:
        """A fresh scene: arm at `joints` (LeRobot units), cube at rest where asked."""
        mujoco.mj_resetData(self.model, self.data)
        self.set_arm(joints)
        self.place_cube(cube_xy, cube_yaw, seed)

    def set_arm(self, joints: dict[str, float]) -> None:
        """Teleport the arm (used between trials, where a real operator would also wait)."""
        q = np.array([to_sim(name, joints[name]) for name in JOINT_NAMES])
        self.data.qpos[self.qpos_idx] = q
        self.data.qvel[self.dof_idx] = 0
        self.data.ctrl[:] = q
        mujoco.mj_forward(self.model, self.data)
        self._posed_qpos[:] = self.data.qpos

    def step_control(self, targets_rad: np.ndarray, physics_steps: int | None = None) -> None:
        """Apply joint targets and advance one control period (or `physics_steps`), judging every
        physics step."""
        if self.command_log is not None and not np.array_equal(self.data.ctrl, targets_rad):
            self.command_log.append((self.time, np.array(targets_rad, dtype=float)))
        self.data.ctrl[:] = targets_rad
        dt = self.model.opt.timestep
        for _ in range(self.substeps if physics_steps is None else physics_steps):
            self._posed_qpos[:] = self.data.qpos
            mujoco.mj_step(self.model, self.data)
            self.judge.observe(self.data, dt)

    def hold(self, physics_steps: int) -> None:
        """Advance with the arm executing its present command (the policy is still thinking)."""
        if physics_steps > 0:
            self.step_control(self.data.ctrl.copy(), physics_steps)

    def physics_steps_for(self, seconds: float) -> int:
        """Whole physics steps in `seconds` of simulated time (what a latency can be resolved to)."""
        return max(0, round(seconds / self.model.opt.timestep))

    def joint_positions_rad(self) -> np.ndarray:
        return self.data.qpos[self.qpos_idx].copy()

    def servo_loads(self) -> np.ndarray:
        """Each joint's actuator force as an STS3215 reports its Present_Load: signed, in 0.1 % of the
        servo's full torque (here the actuator's force cap), so +-1000 is a stalled servo pushing its hardest.
        The emulator's `--sim` servos report the same numbers on the wire (`emulator.sim_coupling`)."""
        return actuator_loads(self.model, self.data.actuator_force, self.actuator_ids)

    def cube_pose(self) -> tuple[np.ndarray, float]:
        """True cube centre (m) and yaw (rad): what the scripted expert is allowed to read."""
        pos = self.data.xpos[self.cube_body].copy()
        rot = self.data.xmat[self.cube_body].reshape(3, 3)
        return pos, math.atan2(rot[1, 0], rot[0, 0])

    def render(self, camera: str, width: int = 640, height: int = 480) -> np.ndarray:
        return self.render_request(self.frame_request(camera, width, height))

    def view(self, camera: str, width: int = 640, height: int = 480) -> np.ndarray:
        """A frame for eyes outside the simulation (a video of the rollout a viewer watches): drawn without
        advancing the sensor noise, so watching a trial never changes the frames its policy is given."""
        request = FrameRequest(camera, width, height, self._posed_qpos.copy(), 0, False,
                               self.render_profile.detail_for(width, height))
        return self.render_request(request)

    def frame_request(self, camera: str, width: int = 640, height: int = 480) -> FrameRequest:
        """What `render` would draw now, without drawing it: advances the sensor noise and the
        frozen-camera bookkeeping exactly as a render does, so frames drawn later from these
        requests (here or in another process's world) are the frames a render would have given."""
        frozen = camera in self.frozen_cameras
        noise_index = -1
        if not (frozen and camera in self._frozen_requested):
            self._render_count += 1
            noise_index = self._render_count % NOISE_PATTERNS
        if frozen:
            self._frozen_requested.add(camera)
        return FrameRequest(camera, width, height, self._posed_qpos.copy(), noise_index, frozen,
                            self.render_profile.detail_for(width, height))

    def render_request(self, request: FrameRequest) -> np.ndarray:
        """Draw a frame from a request; a frozen camera repeats the first frame it froze on (a request with
        a noise index is that first frame: drawn afresh, so a world that draws for many trials, as the
        evidence writer's does, never repeats an earlier trial's frozen frame)."""
        if request.frozen and request.noise_index < 0 and request.camera in self._frozen_frames:
            return self._frozen_frames[request.camera]
        if not np.array_equal(request.qpos, self._posed_qpos):
            self._pose(request.qpos)
        with _drawing(request.camera):
            drawn = self._draw(CAMERA_NAMES.get(request.camera, request.camera), request.width, request.height,
                               request.detail)
        frame = drawn ^ self._noise_bank_for(request.width, request.height)[request.noise_index]
        if request.frozen:
            self._frozen_frames[request.camera] = frame
        return frame

    def render_view(self, qpos: np.ndarray, view: tuple[float, float, float], width: int, height: int) -> np.ndarray:
        """A frame from a MuJoCo free camera (azimuth and elevation in degrees, distance in m) looking at the
        point between the gripper's grasp point and the cube, in a recorded configuration: angles no mounted
        camera has. No sensor noise: no sensor sees it."""
        if not np.array_equal(qpos, self._posed_qpos):
            self._pose(qpos)
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.azimuth, camera.elevation, camera.distance = view
        grasp = self.data.site_xpos[self.model.site("grasp_point").id]
        camera.lookat[:] = (grasp + self.data.xpos[self.cube_body]) / 2
        with _drawing("free view"):
            return self._draw(camera, width, height, MeshDetail.FULL)

    def _draw(self, camera: str | mujoco.MjvCamera, width: int, height: int, detail: MeshDetail) -> np.ndarray:
        """A frame of the posed scene; a renderer whose GL context was released mid-draw (`gl_draw`) is closed
        and the frame drawn with a new one."""
        for _ in range(DRAWS):
            renderer = self._renderer(width, height, detail)
            renderer.update_scene(self.data, camera=camera, scene_option=self._scene_options[detail])
            frame = renderer.render()
            if context_still_current(renderer):
                return frame
            del self._renderers[threading.current_thread()][(width, height, detail)]
            renderer.close()
        raise mujoco.FatalError(f"the GL context was released during each of {DRAWS} draws")

    def _renderer(self, width: int, height: int, detail: MeshDetail) -> mujoco.Renderer:
        """The calling thread's renderer at this size and mesh set (module docstring: GL contexts belong to
        threads). A coarse one's context is made with fewer slices for the bowl's round primitives: MuJoCo
        builds those shapes into the context when it is made."""
        thread = threading.current_thread()
        own = self._renderers.get(thread)
        if own is None:
            for ended in [t for t in self._renderers if not t.is_alive()]:
                self._stranded.extend(self._renderers.pop(ended).values())   # kept: closing needs their thread
            own = self._renderers[thread] = {}
        renderer = own.get((width, height, detail))
        if renderer is None:
            quality = self.model.vis.quality
            slices, stacks = quality.numslices, quality.numstacks
            if detail is MeshDetail.COARSE:
                quality.numslices, quality.numstacks = min(slices, COARSE_SLICES), min(stacks, COARSE_SLICES)
            try:
                renderer = own[(width, height, detail)] = OwnContextRenderer(self.model, height, width)
            finally:
                quality.numslices, quality.numstacks = slices, stacks
        return renderer

    def _pose(self, qpos: np.ndarray) -> None:
        """Put this (rendering-only) world in a recorded configuration."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)
        self._posed_qpos[:] = qpos

    def _noise_bank_for(self, width: int, height: int) -> np.ndarray:
        """Least-significant-bit noise, as every real sensor has.

        Without it a still scene renders identical bytes twice, which is exactly what
        a frozen real camera looks like, and the dropout watch could not tell them apart.
        """
        bank = self._noise_bank.get((width, height))
        if bank is None:
            rng = np.random.default_rng(width * 10_007 + height)
            bank = rng.integers(0, 2, size=(NOISE_PATTERNS, height, width, 3), dtype=np.uint8)
            self._noise_bank[(width, height)] = bank
        return bank

    def release_renderers(self) -> None:
        """Free the calling thread's GL contexts (only the thread that drew with them can); another thread's
        are its own to free, and are never touched from here."""
        for renderer in self._renderers.pop(threading.current_thread(), {}).values():
            renderer.close()

    def close(self) -> None:
        self.release_renderers()



@contextlib.contextmanager
def _drawing(camera: str) -> Iterator[None]:
    """A GL failure while drawing `camera` as `CameraRenderFailed` (typed: the engine voids the trial)."""
    try:
        yield
    except mujoco.FatalError as error:
        raise CameraRenderFailed(camera, _said(error)) from error
    except Exception as error:
        if type(error).__module__.split(".")[0] != "OpenGL":   # PyOpenGL's EGL/OSMesa errors; anything else is a bug
            raise
        raise CameraRenderFailed(camera, _said(error)) from error


def _said(error: BaseException) -> str:
    text = (str(error).strip().splitlines() or [""])[0][:160]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
