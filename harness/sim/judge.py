"""Scores a simulated trial from the true physical state, every physics step.

The verdict follows a strict sequence (grasp, lift, release, withdraw, settle in
the bowl) so that a push or a knock into the bowl is never a success. Every
threshold lives in `JudgeThresholds`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import mujoco
import numpy as np

from harness.models.taxonomy import Label
from harness.models.verdict import EventKind, JudgeEvent, JudgeVerdict

_CORNER_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float).T


@dataclass(frozen=True)
class JudgeThresholds:
    grasp_hold_s: float = 0.25           # both jaws in contact this long = a sustained grasp
    grasp_max_rel_speed: float = 0.05    # m/s, cube vs the jaws' own motion at the cube's centre while held
    palm_max_force_n: float = 5.0        # stronger palm contact disqualifies a grasp step
    lift_min_m: float = 0.02             # cube centre above its resting height while held
    release_max_height_m: float = 0.12   # cube bottom above the bowl floor at release (over the bowl)
    drop_min_height_m: float = 0.04      # released higher than this above the table outside the bowl: a drop
    withdraw_min_m: float = 0.04         # grasp point this far from the cube after release
    rest_max_speed: float = 0.03         # m/s
    rest_max_ang_speed: float = 0.5      # rad/s
    stable_s: float = 0.5
    clean_contact_n: float = 1.0         # renewed jaw contact at or above this after release: not clean
    clean_reclose_rad: float = 0.10      # renewed gripper closing after release: not clean
    fail_rest_s: float = 1.0             # at rest outside the bowl this long after release: final failure


@dataclass
class JudgeState:
    grasp_time: float = 0.0
    grasped: bool = False
    lifted: bool = False
    released: bool = False
    release_xy: tuple[float, float] | None = None
    release_height: float | None = None
    release_over_bowl: bool = False
    withdrawn: bool = False
    stable_time: float = 0.0
    rest_outside_time: float = 0.0
    success: bool = False
    clean_release: bool = True
    post_release_max_gripper: float = -math.inf
    max_lift_m: float = 0.0
    events: list[JudgeEvent] = field(default_factory=list)


class Judge:
    def __init__(self, model: mujoco.MjModel, bowl_xy: tuple[float, float], bowl_rim_radius: float,
                 bowl_floor_z: float, bowl_height: float, cube_edge: float,
                 thresholds: JudgeThresholds | None = None, table_z: float = 0.0) -> None:
        """`table_z`: the table's height (the floor a drop is measured from; a reality-gap knob)."""
        self.model = model
        self.table_z = table_z
        self.t = thresholds or JudgeThresholds()
        self.bowl_xy = np.array(bowl_xy)
        self.rim_radius = bowl_rim_radius
        self.bowl_floor_z = bowl_floor_z
        self.bowl_height = bowl_height
        self.half = cube_edge / 2
        self.cube_geom = model.geom("cube").id
        self.cube_body = model.body("cube").id
        self.grasp_site = model.site("grasp_point").id
        self.gripper_qpos = model.joint("gripper").qposadr[0]
        self.gripper_act = model.actuator("gripper").id
        fixed = model.body("gripper").id
        moving = model.body("moving_jaw_so101_v1").id
        self.fixed_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] == fixed}
        self.moving_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] == moving}
        palm_bodies = {model.body("camera_mount").id, model.body("wrist").id}
        self.palm_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] in palm_bodies}
        # Per geom: 1 fixed jaw, 2 moving jaw, 3 palm, 0 anything the judge ignores.
        self._geom_role = np.zeros(model.ngeom, dtype=np.int8)
        for role, geoms in ((3, self.palm_geoms), (2, self.moving_geoms), (1, self.fixed_geoms)):
            self._geom_role[list(geoms)] = role
        self.rest_z = table_z + self.half
        self.state = JudgeState()
        self.time = 0.0
        self._force = np.zeros(6)

    def reset(self, rest_z: float) -> None:
        self.rest_z = rest_z
        self.state = JudgeState()
        self.time = 0.0

    # --- per physics step ---------------------------------------------------
    def observe(self, data: mujoco.MjData, dt: float) -> None:
        """One physics step. Reads only what the current phase needs: before release, velocities
        only while both jaws touch the cube; after release, the bowl test only while the cube rests."""
        s, t = self.state, self.t
        self.time += dt
        fixed_f, moving_f, palm_f = self.cube_contact_forces(data)
        cube_pos = data.xpos[self.cube_body]
        both_jaws = fixed_f > 0 and moving_f > 0

        if not s.released:
            holding_now = False
            if both_jaws and palm_f < t.palm_max_force_n:
                slip = self._cube_velocity(data)[3:] - self._jaw_velocity_at(data, cube_pos)
                holding_now = float(np.linalg.norm(slip)) < t.grasp_max_rel_speed
            s.grasp_time = s.grasp_time + dt if holding_now else 0.0
            if s.grasp_time >= t.grasp_hold_s and not s.grasped:
                s.grasped = True
                self._event(EventKind.GRASP, cube_pos)
            if s.grasped and both_jaws:
                s.max_lift_m = max(s.max_lift_m, float(cube_pos[2] - self.rest_z))
                if not s.lifted and cube_pos[2] - self.rest_z >= t.lift_min_m:
                    s.lifted = True
                    self._event(EventKind.LIFT, cube_pos)
            if s.grasped and fixed_f == 0 and moving_f == 0:
                s.released = True
                s.release_xy = (float(cube_pos[0]), float(cube_pos[1]))
                s.release_height = float(cube_pos[2] - self.half - self.table_z)
                over = self._horizontal_distance(cube_pos) < self.rim_radius
                s.release_over_bowl = bool(
                    over and cube_pos[2] - self.half - self.bowl_floor_z <= t.release_max_height_m
                )
                s.post_release_max_gripper = float(data.ctrl[self.gripper_act])
                self._event(EventKind.RELEASE, cube_pos)
            else:
                s.stable_time = 0.0
                s.rest_outside_time = 0.0
                return
        else:
            grip = float(data.ctrl[self.gripper_act])
            s.post_release_max_gripper = max(s.post_release_max_gripper, grip)
            if s.clean_release and (
                max(fixed_f, moving_f) >= t.clean_contact_n
                or s.post_release_max_gripper - grip > t.clean_reclose_rad
            ):
                s.clean_release = False
                self._event(EventKind.RENEWED_CONTACT, cube_pos)
            if not s.withdrawn:
                gap = float(np.linalg.norm(data.site_xpos[self.grasp_site] - cube_pos))
                if gap >= t.withdraw_min_m:
                    s.withdrawn = True
                    self._event(EventKind.WITHDRAW, cube_pos)

        cube_vel = self._cube_velocity(data)
        at_rest = float(np.linalg.norm(cube_vel[3:])) < t.rest_max_speed and float(
            np.linalg.norm(cube_vel[:3])) < t.rest_max_ang_speed
        inside = at_rest and self.cube_inside_bowl(data)
        if s.withdrawn and at_rest and inside and s.lifted and s.release_over_bowl:
            s.stable_time += dt
            if s.stable_time >= t.stable_s and not s.success:
                s.success = True
                self._event(EventKind.STABLE_IN_BOWL, cube_pos)
        else:
            s.stable_time = 0.0
        if at_rest and not inside:
            s.rest_outside_time += dt
        else:
            s.rest_outside_time = 0.0

    # --- verdict -----------------------------------------------------------
    @property
    def finished(self) -> bool:
        """True once more time cannot change the verdict."""
        s = self.state
        return s.success or (s.released and s.withdrawn and s.rest_outside_time >= self.t.fail_rest_s)

    def verdict(self, data: mujoco.MjData) -> JudgeVerdict:
        s = self.state
        cube_pos = data.xpos[self.cube_body]
        error_cm = 100 * self._horizontal_distance(cube_pos)
        inside = self.cube_inside_bowl(data)
        if s.success:
            label, detail = Label.SUCCESS, "grasped, lifted, released over the bowl, settled inside"
        elif not s.grasped:
            label = Label.NO_GRASP
            detail = "pushed into the bowl without a grasp" if inside else "the gripper never held the cube"
        elif not s.released:
            label, detail = Label.WRONG_PLACEMENT, "still holding the cube when the trial ended"
        elif not inside and not s.release_over_bowl and (s.release_height or 0) > self.t.drop_min_height_m:
            label, detail = Label.GRASPED_THEN_DROPPED, "released in the air away from the bowl"
        elif inside and not s.lifted:
            label, detail = Label.NO_GRASP, "slid into the bowl without a lift"
        elif inside:
            label, detail = Label.WRONG_PLACEMENT, "inside the bowl but the sequence was incomplete"
        else:
            label, detail = Label.WRONG_PLACEMENT, self._outside_detail(data, cube_pos)
        return JudgeVerdict(
            label=label,
            detail=detail,
            true_placement_error_cm=round(error_cm, 3),
            cube_inside_bowl=inside,
            clean_release=s.clean_release if s.released else None,
            grasped=s.grasped,
            lifted=s.lifted,
            max_lift_cm=round(100 * s.max_lift_m, 2),
            events=list(s.events),
            thresholds=asdict(self.t),
        )

    def _outside_detail(self, data: mujoco.MjData, cube_pos: np.ndarray) -> str:
        """Where a released cube outside the bowl is when the verdict is asked for: at rest, or (at the time
        limit) still moving, which is not "came to rest" (a cube falling over the bowl may yet land in it)."""
        vel = self._cube_velocity(data)
        if (float(np.linalg.norm(vel[3:])) < self.t.rest_max_speed
                and float(np.linalg.norm(vel[:3])) < self.t.rest_max_ang_speed):
            return "came to rest outside the bowl"
        if self._horizontal_distance(cube_pos) < self.rim_radius and cube_pos[2] > self.bowl_floor_z + self.half:
            return "still falling above the bowl when the trial ended"
        return "still moving outside the bowl when the trial ended"

    # --- geometry ----------------------------------------------------------
    def cube_inside_bowl(self, data: mujoco.MjData) -> bool:
        """All four bottom corners within the rim circle and the centre below the rim."""
        pos = data.xpos[self.cube_body]
        if not pos[2] < self.bowl_floor_z + self.bowl_height:
            return False
        rot = data.xmat[self.cube_body].reshape(3, 3)
        corners = pos + (rot @ _CORNER_SIGNS).T * self.half
        dx, dy = corners[:, 0] - self.bowl_xy[0], corners[:, 1] - self.bowl_xy[1]
        return bool(np.all(np.sqrt(dx * dx + dy * dy) < self.rim_radius))

    def _horizontal_distance(self, point: np.ndarray) -> float:
        return float(np.linalg.norm(point[:2] - self.bowl_xy))

    def cube_contact_forces(self, data: mujoco.MjData) -> tuple[float, float, float]:
        """Normal forces on the cube from the fixed jaw, the moving jaw and the palm.

        The contact list is filtered in one vectorised pass; only the few contacts that touch
        the cube and one of those parts are decoded (in contact order, so sums are unchanged)."""
        totals = [0.0, 0.0, 0.0, 0.0]
        if data.ncon == 0:
            return 0.0, 0.0, 0.0
        pairs = data.contact.geom
        for flat in np.flatnonzero(pairs == self.cube_geom).tolist():
            i, side = divmod(flat, 2)
            role = self._geom_role[pairs[i, 1 - side]]
            if role:
                mujoco.mj_contactForce(self.model, data, i, self._force)
                totals[role] += abs(float(self._force[0]))
        return totals[1], totals[2], totals[3]

    def _cube_velocity(self, data: mujoco.MjData) -> np.ndarray:
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, data, mujoco.mjtObj.mjOBJ_BODY, self.cube_body, vel, 0)
        return vel  # [angular(3), linear(3)] in world frame

    def _jaw_velocity_at(self, data: mujoco.MjData, point: np.ndarray) -> np.ndarray:
        """The velocity the gripper body would give a point rigidly attached to it at `point` (world frame).

        A cube held still in the jaws moves with the gripper, not with the grasp point: while the wrist turns, a cube
        a centimetre or two off the grasp point moves at the wrist's rate times that lever, which the grasp point's
        own velocity does not show (a cube carried up in a turning gripper read as slipping, and its grasp was never
        confirmed: the tiny SmolVLA, issue 37). Without rotation this is the grasp point's velocity, as before."""
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, data, mujoco.mjtObj.mjOBJ_SITE, self.grasp_site, vel, 0)
        lever = np.asarray(point, dtype=float) - data.site_xpos[self.grasp_site]
        return vel[3:] + np.cross(vel[:3], lever)

    def _event(self, kind: EventKind, cube_pos: np.ndarray) -> None:
        self.state.events.append(JudgeEvent(event=kind, t=round(self.time, 3),
                                            cube=[round(float(v), 4) for v in cube_pos]))
