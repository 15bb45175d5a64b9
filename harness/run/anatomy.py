"""A trial's anatomy from its proprioception alone: the joint positions the arm reported, the gripper commands
it was sent and the gripper servo's present load, each step, as a real arm records them too.

The grasp point comes from forward kinematics of the reported joints through the SO-101 model the
simulator uses (LeRobot units to radians as the arm's calibration defines them, `sim.units`). The
events mirror the simulator judge's rules, with what a servo can feel instead of contact forces (rules
version `models.anatomy.ANATOMY_RULES`): the gripper *holding* is its servo pushing towards closed
(`GRIPPER_LOAD_KEY`, STS3215 Present_Load, negative towards closed) at `LOAD_HOLD` or more while the gripper
stands still: something between the jaws. A gripper that reached its own command, which is what a learned
policy that commands the position it reaches does with or without a cube, has nothing to push against and no
load. Holding confirmed after the judge's own 0.25 s at full load; the grasp is then dated as the judge dates its
own: 0.25 s after both jaws first touched the cube, which is where the gripper came within `CONTACT_CLOSING` of
where it squeezes (rules 3; a policy that closes onto the cube slowly touches it well before the servo squeezes).
Lifted when the grasp point has risen the judge's 2 cm; released when the jaws leave the cube (the gripper opens
past `CONTACT_OPENING` above where it gripped, or closes fast past it: the cube slipped out). The two contact bands
are the simulated arm's, measured by `benchmarks/gripper_contact_band.py`, not fitted to any policy.

A trace without the load (a real arm's attempt recorded before the load was read) falls back to rules 1's
sign of holding, the gripper stopped short of a closing command, and says so (`grasp_signal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.models.anatomy import ANATOMY_RULES, LIFT_CM, GraspSignal, Phase, PhaseSpan, TrialAnatomy, describe
from harness.models.protocol import JOINT_NAMES
from harness.sim.units import GRIPPER_LOAD_KEY

FIRST_MOTION_DEG = 2.0       # a body joint this far from where the episode started it: the arm moved
GRIPPER_MOTION = 5.0         # gripper units (0-100) of travel that count as motion
CLOSING = 5.0                # the gripper this far below its opening so far: it is closing
HOLD_GAP = 4.0               # rules 1: reported gripper this far above a closing command: stopped by something
LOAD_HOLD = 500.0            # gripper servo pushing towards closed at least this (0.1 % of full torque), still:
#                              squeezing something. Physics, not a fit: a free gripper at rest reads under 20 % and
#                              a squeezing one saturates (the servo's error a fraction of a unit), so mid-scale.
GRIP_STILL = 2.0             # gripper units a step: at most this while squeezing counts as holding (a cube
#                              settling between the jaws creeps them 1-2 units; a free close runs 4-6 a step)
RELEASE_STEP = 1.0           # gripper units a step: a holding gripper closing this much has lost the cube (a held
#                              cube rotating in the jaws moves them a few tenths)
CONTACT_CLOSING = 2.8        # gripper units above where the jaws squeeze the cube at full load: both jaws first
#                              touch it this far up while closing (quasi-static, jaws square to the cube: 2.6-2.9)
CONTACT_OPENING = 1.7        # ... and last touch it this far up while opening (1.6-1.7). Both measured on the
#                              simulated arm, not fitted to any policy: benchmarks/gripper_contact_band.py
# GRIP_STILL, RELEASE_STEP and SHUT were set on the tuning policies' attempts (docs/benchmarks.md, issue 37).
SHUT = 2.0                   # gripper units: at its closed end nothing is between the jaws, whatever the load (a
#                              jerky command slams it into the end stop; a 3 cm cube holds it near 18)
STILL = 0.6                  # gripper units per step below which the gripper is not moving
GRASP_HOLD_S = 0.25          # the judge's grasp_hold_s
TRANSPORT_CM = 2.0           # grasp point this far (horizontally) from where it lifted: carrying
REOPEN = 2.0                 # gripper this far above its holding position: opening
OPENED = 10.0                # ... and this far: open (released)


class GraspPoints:
    """Forward kinematics of the SO-101's grasp point (the simulator's `grasp_point` site)."""

    def __init__(self) -> None:
        from harness.sim.kinematics import TopDownIK
        from harness.sim.scene import SceneGeometry, build_model

        self._ik = TopDownIK(build_model(SceneGeometry()))

    def of(self, joints_lerobot: np.ndarray) -> np.ndarray:
        """(n, 6) joint positions in LeRobot units -> (n, 3) grasp points in metres, robot base frame."""
        from harness.sim.units import to_sim

        body = JOINT_NAMES[:5]
        points = np.empty((len(joints_lerobot), 3))
        for i, row in enumerate(joints_lerobot):
            q = np.array([to_sim(name, float(v)) for name, v in zip(body, row[:5], strict=True)])
            points[i] = self._ik.grasp_point(q)
        return points


def anatomy_from_rows(rows: Sequence[dict[str, Any]], fk: GraspPoints, trained_xy_cm: tuple[float, float],
                      cube_start_cm: tuple[float, float], bowl_xy_cm: tuple[float, float],
                      stall_limit_s: float) -> TrialAnatomy | None:
    """The anatomy of one episode from the evidence recorder's rows (`obs.<joint>.pos`, `action.gripper.pos`,
    `t`); None for an episode with no step."""
    if not rows:
        return None
    t = np.array([float(r["t"]) for r in rows])
    q = np.array([[float(r[f"obs.{n}.pos"]) for n in JOINT_NAMES] for r in rows])
    command = np.array([float(r.get("action.gripper.pos", r["obs.gripper.pos"])) for r in rows])
    load = _loads(rows)
    points = fk.of(q) * 100.0   # cm
    rel = points[:, :2] - np.asarray(trained_xy_cm)
    return _anatomy(t, q, command, load, points, rel, cube_start_cm,
                    (bowl_xy_cm[0] - trained_xy_cm[0], bowl_xy_cm[1] - trained_xy_cm[1]), stall_limit_s)


def _loads(rows: Sequence[dict[str, Any]]) -> np.ndarray | None:
    """The gripper's load per row; None when any row lacks it (a trace recorded before it was read)."""
    key = f"obs.{GRIPPER_LOAD_KEY}"
    values = [r.get(key) for r in rows]
    if any(v is None for v in values):
        return None
    load = np.array(values, dtype=float)
    return load if np.isfinite(load).all() else None


def _anatomy(t: np.ndarray, q: np.ndarray, command: np.ndarray, load: np.ndarray | None, points: np.ndarray,
             rel: np.ndarray, cube: tuple[float, float], bowl: tuple[float, float],
             stall_limit_s: float) -> TrialAnatomy:
    n = len(t)
    dt = float(np.median(np.diff(t))) if n > 1 else 1 / 30
    gripper = q[:, 5]
    moved = (np.abs(q[:, :5] - q[0, :5]).max(axis=1) > FIRST_MOTION_DEG) | (np.abs(gripper - gripper[0]) >
                                                                           GRIPPER_MOTION)
    first = _first(moved)
    first_motion = float(t[first]) if first is not None else None
    stalled = (first_motion is None and t[-1] >= stall_limit_s) or (first_motion or 0.0) > stall_limit_s
    spans: list[PhaseSpan] = []
    start = 0.0
    ended = Phase.WAIT

    def enter(phase: Phase, at: float) -> None:
        nonlocal start, ended
        spans.append(PhaseSpan(phase=ended, start_s=round(start, 3), end_s=round(at, 3)))
        start, ended = at, phase

    closed_at = grasp_point = grasp_height = None
    touched: int | None = None
    holding = False
    max_lift = 0.0
    lifted_at = None
    released_at = release_point = release_height = None
    if first is not None:
        enter(Phase.APPROACH, float(t[first]))
        opened_so_far = np.maximum.accumulate(gripper)
        closing = _first((opened_so_far - gripper > CLOSING) & (np.arange(n) >= first))
        if closing is not None:
            enter(Phase.CLOSE, float(t[closing]))
            step = np.diff(gripper, prepend=gripper[0])
            still = np.abs(step) < STILL
            after = np.arange(n) > closing
            hold_steps = round(GRASP_HOLD_S / dt)
            shut = _first(still & after & (gripper - command <= HOLD_GAP) & (command < opened_so_far - CLOSING))
            if load is not None:
                squeezing = (-load >= LOAD_HOLD) & (gripper > SHUT)
                gripping = squeezing & (np.abs(step) < GRIP_STILL)
                hold = _held_for(gripping & after, hold_steps)
                holding = hold is not None
                if hold is not None:
                    squeezed = hold       # the squeeze confirmed: contact is certain up to here
                    touched = _touched_from(gripper, hold - hold_steps + 1, hold, closing)
                    hold = min(hold, touched + hold_steps - 1)
            else:
                hold = _held_for((gripper - command > HOLD_GAP) & still & after, hold_steps)
                holding = hold is not None and (shut is None or hold <= shut + hold_steps)
            closed = hold if holding else shut
            if closed is not None:
                # the judge's grasp: both jaws on the cube for its 0.25 s, from the first step they touched it
                grasped_at = float(t[touched]) + GRASP_HOLD_S if touched is not None else float(t[closed])
                closed_at = grasped_at
                grasp_point = (round(float(rel[closed, 0]), 3), round(float(rel[closed, 1]), 3))
                grasp_height = round(float(points[closed, 2]), 3)
                if holding:
                    held = gripper[closed]
                    if load is not None:  # the jaws leave the cube: open off it, or close fast past it (it slipped out)
                        reopened = _let_go(gripper, step, squeezing & still, squeezed)
                    else:
                        reopened = _first((np.arange(n) > closed) & (gripper > held + REOPEN))
                    end = reopened if reopened is not None else n
                    rise = points[closed:end, 2] - points[closed, 2]
                    max_lift = round(float(rise.max()), 3) if len(rise) else 0.0
                    lifted = _first(rise >= LIFT_CM)
                    enter(Phase.LIFT, grasped_at)
                    if lifted is not None:
                        at = closed + lifted
                        lifted_at = float(t[at])
                        away = np.hypot(*(rel[at:end] - rel[at]).T) >= TRANSPORT_CM
                        carried = _first(away)
                        if carried is not None:
                            enter(Phase.TRANSPORT, float(t[at + carried]))
                    if reopened is not None:
                        released_at = float(t[reopened])
                        release_point = (round(float(rel[reopened, 0]), 3), round(float(rel[reopened, 1]), 3))
                        release_height = round(float(points[reopened, 2]), 3)
                        enter(Phase.RELEASE, released_at)
                        open_again = _first((gripper > held + OPENED) & (np.arange(n) > reopened))
                        if open_again is not None:
                            enter(Phase.WITHDRAW, float(t[open_again]))
    spans.append(PhaseSpan(phase=ended, start_s=round(start, 3), end_s=round(float(t[-1]), 3)))
    anatomy = TrialAnatomy(
        first_motion_s=round(first_motion, 3) if first_motion is not None else None, stalled=bool(stalled),
        stall_limit_s=stall_limit_s, cube_start_cm=(round(cube[0], 3), round(cube[1], 3)),
        closed_at_s=round(closed_at, 3) if closed_at is not None else None, grasp_point_cm=grasp_point,
        grasp_height_cm=grasp_height, holding=holding, max_lift_cm=max_lift,
        lifted_at_s=round(lifted_at, 3) if lifted_at is not None else None,
        released_at_s=round(released_at, 3) if released_at is not None else None, release_point_cm=release_point,
        release_height_cm=release_height, phases=[s for s in spans if s.end_s > s.start_s or s is spans[-1]],
        ended_in=ended, summary="", rules=ANATOMY_RULES,
        grasp_signal=GraspSignal.LOAD if load is not None else GraspSignal.COMMAND)
    return anatomy.model_copy(update={"summary": describe(anatomy, bowl)})


def with_cube_start(anatomy: TrialAnatomy, cube_start_cm: tuple[float, float], bowl_xy_cm: tuple[float, float],
                    trained_xy_cm: tuple[float, float]) -> TrialAnatomy:
    """The same trace against where the cube really started (a real arm's measured start)."""
    moved = anatomy.model_copy(update={"cube_start_cm": (round(cube_start_cm[0], 3), round(cube_start_cm[1], 3))})
    bowl = (bowl_xy_cm[0] - trained_xy_cm[0], bowl_xy_cm[1] - trained_xy_cm[1])
    return moved.model_copy(update={"summary": describe(moved, bowl)})


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def _touched_from(gripper: np.ndarray, squeeze: int, held: int, closing: int) -> int:
    """Where the jaws reached the cube that they squeeze from `squeeze` on: the first step of the unbroken run,
    back from there, in which the gripper stood within `CONTACT_CLOSING` of where it squeezed the cube once the
    judge's 0.25 s at full load had passed (`held`), and did not open (a step of `STILL` or more: jaws that slam
    into the cube bounce off it, the cube jumps, and the judge's clock starts again after the bounce). The judge's
    grasp clock starts at that first contact of both jaws, not when the servo's squeeze reaches full load (a policy
    that closes onto the cube slowly, its command following the gripper, touches it some steps earlier)."""
    reach = gripper[held] + CONTACT_CLOSING
    first = squeeze
    while first - 1 > closing and gripper[first - 1] <= reach and gripper[first] - gripper[first - 1] < STILL:
        first -= 1
    return first


def _let_go(gripper: np.ndarray, step: np.ndarray, gripping: np.ndarray, squeezed: int) -> int | None:
    """The first step after `squeezed` (the squeeze confirmed: the gripper at full load and still for the judge's
    0.25 s, which it may have spent settling onto the cube) at which the jaws have left the cube, the judge's
    release: opened more than `CONTACT_OPENING` above where they last gripped it (`gripping`: squeezing, not
    moving), closed past it by `RELEASE_STEP` or more in one step (the cube slipped out and the gripper runs to its
    command; a gripper that opened a little and closes back onto the cube has not let go), or reached the closed
    end (`SHUT`). The load plays no part once the grasp is confirmed: a policy that eases its command to where the
    jaws stand still touches the cube."""
    gripped_at = float(gripper[squeezed])
    for i in range(squeezed + 1, len(gripper)):
        slipped = step[i] <= -RELEASE_STEP and gripper[i] < gripped_at
        if gripper[i] > gripped_at + CONTACT_OPENING or slipped or gripper[i] <= SHUT:
            return i
        if gripping[i]:
            gripped_at = float(gripper[i])
    return None


def _held_for(mask: np.ndarray, steps: int) -> int | None:
    """The first index at which `mask` has been true for `steps` consecutive steps."""
    run = 0
    for i, value in enumerate(mask):
        run = run + 1 if value else 0
        if run >= max(steps, 1):
            return i
    return None
