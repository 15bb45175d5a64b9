"""An outcome proposed from a real arm's evidence: the gripper's own positions and the final top frame.

A person scoring fifty trials in a row mislabels some. The arm already says most of what happened:
a gripper that closes to its stop closed on nothing; one whose servo squeezes part-way holds something
(without the servo's load: one that stops part-way); one that opens again let go of it, somewhere (forward
kinematics says where, and how high). The final top frame, measured against the bowl rim, says whether the
cube ended in the bowl. Together they give a label with its reasons, which the operator confirms or overrides;
the rules mirror the simulator's judge so the two can be compared on rehearsed trials.

A success needs the evidence that the sequence completed in time: the cube let go at least `settle_s` before
the episode's end and, where a settled cube ends the episode early (a simulated one, `EpisodeEnd`), an episode
that did not run to its limit. Otherwise no success is proposed: a cube in the bowl that the judge never saw
at rest there is no success, and nothing in the joints tells it from one that settled. Where the episode's end
says the cube never settled (a simulated episode that ran to its limit), that is the judge's wrong placement.

The judge's placement is more than a cube let go over the bowl: let go at most 12 cm above the bowl floor
(higher, it was dropped in), the gripper then withdrawn 4 cm from it, and nothing moving it before it rests. The
grasp point says all three within allowances (where the trace reads the release, where the cube then lies):
past them the judge's label is proposed, within them nothing is, and a gripper that came back to where the cube
lies after withdrawing is never proposed anything (it may have moved a cube that had already settled).

A cube opened out of the jaws lands near where they let go; one squeezed out (the jaws closing on past it to
their stop) is flung, and lands further (`squeezed_out_cm`), if the squeeze began at the table, where a cube
to squeeze lies.

Where the evidence contradicts itself (jaws that rested part-closed without opening first, jaws that rested
only wider than the cube, a cube seen far from where it was let go, a drop whose landing the final frame did
not show, a squeeze lost at once before any lift, a release height or a withdrawal within its allowance, a
gripper back at the cube) no label is proposed: the
operator chooses unprompted, because a wrong default confirmed with Enter is worse than no default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from harness.models.protocol import JOINT_NAMES
from harness.models.taxonomy import Label
from harness.run.anatomy import GRIP_STILL, LOAD_HOLD


class Reason(StrEnum):
    """Why a label was proposed; stored by value in the attempt."""

    NEVER_CLOSED = "gripper never closed"
    NEVER_SQUEEZED = "gripper closed part-way but never squeezed anything: nothing between the jaws"
    CLOSED_ON_NOTHING = "gripper closed to its stop: nothing between the jaws"
    CLOSED_ON_SOMETHING = "gripper stopped part-way: holding something"
    SQUEEZED_SOMETHING = "gripper squeezed something part-way: holding it"
    LIFTED = "lifted while holding"
    NOT_LIFTED = "never lifted while holding"
    OPENED_OVER_BOWL = "opened over the bowl"
    OPENED_MID_AIR = "opened in the air away from the bowl"
    OPENED_LOW_AWAY = "opened low, away from the bowl"
    STILL_HOLDING = "still holding at the end"
    CUBE_IN_BOWL = "final frame: cube in the bowl"
    CUBE_NOT_IN_BOWL = "final frame: cube outside the bowl"
    CUBE_NOT_MEASURED = "final frame: cube not measured"
    # the evidence contradicts itself: no label proposed
    RESTED_PART_CLOSED = "gripper rested part-closed without opening first: held or not, unknown"
    NOT_WHERE_LET_GO = "final frame: cube far from where it was let go"
    STOPPED_WIDE = "jaws rested only wider than the cube: on the cube or short of it, unknown"
    LANDING_UNSEEN = "dropped, but the final frame did not show where it landed"
    LET_GO_LATE = "let go too near the end to know whether the cube settled in time"
    LOST_AT_ONCE = "jaws closed on past what they squeezed at once, before any lift: held or not, unknown"
    NEVER_SETTLED = "ran to its time limit after letting go over the bowl: the cube never settled there in time"
    OPENED_TOO_HIGH = "opened over the bowl higher than a placement (12 cm above its floor): dropped in"
    RELEASE_HEIGHT_UNSURE = "opened over the bowl near the highest a placement may be: placed or dropped, unknown"
    RELEASE_AT_RIM = "opened right over the bowl's rim: let go over the bowl or beside it, unknown"
    NEVER_WITHDREW = "the gripper never withdrew from where it let go"
    WITHDRAWAL_UNSURE = "the gripper stayed near where it let go: whether it withdrew from the cube, unknown"
    CAME_BACK = "the gripper came back to where it let go: whether it moved the cube, unknown"




BANDS_FPS = 30.0   # the rate the per-sample bands were tuned at (the engine's and the exported runs')


@dataclass(frozen=True)
class GripperBands:
    """Gripper positions (LeRobot units, 0 closed .. 100 open) that tell the cases apart.

    Defaults are the SO-101 on a 3 cm cube (it stops near 18); a real arm's calibration may move them. The per-sample
    ones (`steady_delta`, `steady_samples`, and anatomy's `GRIP_STILL`) are at `BANDS_FPS`: a trace at another rate
    scales them to the same speeds and spans.
    """

    empty_below: float = 6.0        # closed this far: nothing between the jaws
    holding_above: float = 8.0      # stopped between these two: the cube is held
    holding_below: float = 35.0
    open_above: float = 40.0        # opened this far after holding: let go
    steady_delta: float = 1.0       # moved less than this per sample: the jaws have stopped
    steady_samples: int = 8         # ... for this many samples (0.27 s at 30 Hz, the judge's 0.25 s)
    lift_min_m: float = 0.02        # grasp point rose this far while holding: a lift
    drop_min_height_m: float = 0.04  # cube bottom higher than this above the table when let go: a drop
    closed_by: float = 5.0          # a part-closed rest counts as a close only this far below the widest before
    eased_open: float = 8.0         # this much wider than where they stopped on the cube: the jaws let it go
    #                                 (held cubes drift the jaws at most ~4 units; the judge sees it released by then)
    landing_cm: float = 4.0         # a dropped cube lands within this of where it was let go (plus the +/-)
    on_cube_below: float = 21.0     # jaws resting at or under this while holding are on the cube (it stops them
    #                                 near 18); resting only wider, the policy's command may have stopped them
    settle_s: float = 1.0           # let go at least this before the end: the cube's fall, the judge's 0.5 s at rest
    settled_end_s: float = 2.0      # a simulated episode a settled cube ends early ends this long after the release
    #                                 or more (the judge's rest, then the end): 1.4-2.4 s for 90 % of the 184
    #                                 successes that ended early; one let go `settle_s` to this before the limit may
    #                                 have settled as the limit came (held-out act192s9200-600-jitter trial 3: 1.27 s)
    release_rim_m: float = 0.01     # let go this near the rim (the grasp point from the bowl centre), over the bowl
    #                                 or not is unknown: the judge reads the cube's centre when the jaws' contacts end,
    #                                 the trace the grasp point when they open (held-out act192s9200-600-rand trial 10:
    #                                 0.8 mm inside the rim for the trace, 1.2 mm outside for the judge)
    squeezed_out_cm: float = 10.0   # a cube the jaws squeezed out (closed on past it to their stop) is flung: it
    #                                 lands within this of where it went (5.0-8.4 cm seen, cubes 7-11 cm high) ...
    on_table_m: float = 0.05        # ... if the squeeze began with the grasp point this low (a cube on the table;
    #                                 one squeezed higher was not on the table to be squeezed: the hold is in doubt)
    lost_at_once_s: float = 0.15    # squeezed out this soon after the hold, never lifted: the judge's grasp (both
    #                                 jaws on the cube for its span) may or may not have been met
    # The judge's placement (`sim.judge.JudgeThresholds`, pinned equal by a test), read from the grasp point:
    release_max_height_m: float = 0.12   # a placement lets go with the cube's bottom at most this above the bowl
    bowl_floor_m: float = 0.004          # floor, which is this above the table; higher, the cube was dropped in
    release_read_high_m: float = 0.04    # the trace reads the release later than the judge (jaws past the open
    release_read_low_m: float = 0.02     # band): its cube height, from the grasp point, read 0.9 cm under to 3.3 cm
    #                                      over the judge's on the 166 attempts let go over the bowl: within these
    #                                      of the limit, placed or dropped is unknown
    withdraw_min_m: float = 0.04    # a placement's gripper withdraws this far from the cube after letting go
    cube_spot_m: float = 0.01       # where the cube lies after a release over the bowl (under where it was let
    #                                 go, on the bowl floor) is known to about this
    came_back_m: float = 0.03       # the grasp point back this near to where the cube lies, after withdrawing:
    #                                 the jaws reach it (the judge's success may have come before, or never)


@dataclass
class GripperTrace:
    """Follows the gripper through one episode, observation by observation, at `fps` (the protocol's control rate
    in a run, the dataset's frame rate in `harness score`): the hold's and the release's times read from it.

    `grasp_point` is the arm's forward kinematics: joint positions (LeRobot units) -> metres.
    """

    grasp_point: Callable[[dict[str, float]], np.ndarray]
    bands: GripperBands = field(default_factory=GripperBands)
    closed_empty: bool = False
    held: bool = False
    released: bool = False
    hold_start_z: float | None = None   # the grasp point's height when the hold was read
    lift_from_z: float | None = None    # ... and where the grasp began (`_hold`), what a lift is measured from
    max_lift_m: float = 0.0
    release_xyz: tuple[float, float, float] | None = None
    last_grip: float | None = None
    opened: bool = False   # a grasp is an opening then a closing: a gripper resting part-closed holds nothing
    rested_part_closed: bool = False   # ... unless it closed to rest there: then whether it holds something
    widest: float | None = None        # is unknown (the widest it was before, to tell a close from holding still)
    hold_grip: float | None = None     # where the jaws stopped on the cube
    rest_grip: float | None = None     # the narrowest the jaws rested while holding (steady, before letting go)
    fps: float = 30.0                  # observations a second (the caller passes the protocol's or dataset's)
    samples: int = 0                   # observations seen
    held_at: int | None = None         # the observation the hold was established at
    released_at: int | None = None     # ... when the jaws let go
    squeezed_out: bool = False         # ... by closing on past the cube to their stop (it slipped or was flung out)
    load_read: bool = False            # the arm reports the gripper's load: holding is read from it
    squeezed: bool = False             # the hold is the servo squeezing something (not only a rest part-closed)
    closed_part: bool = False          # with the load read: closed part-way after opening (squeezing or not)
    after_release: list[tuple[float, float, float]] = field(default_factory=list)   # the grasp point each
    #                                    observation after the jaws let go: did it withdraw, did it come back
    _steady: int = 0
    _squeeze: int = 0
    _closing_low_z: float | None = None   # the grasp point's lowest since the jaws last opened (where a grasp began)
    _widest_yet: float = -math.inf

    def see(self, joints: dict[str, float], load: float | None = None) -> None:
        """One observation: the joints (LeRobot units) and, where the arm reports it, the gripper servo's load
        (`GRIPPER_LOAD_KEY`, negative towards closed). With the load, holding is the servo squeezing something
        (`run.anatomy`'s rule): a policy that pauses its jaws part-closed, on nothing, is not holding, and a grasp
        is dated where the jaws squeeze the cube, not at the first rest on the way."""
        grip = float(joints["gripper"])
        b = self.bands
        self.samples += 1
        moved = None if self.last_grip is None else abs(grip - self.last_grip)
        per_sample = BANDS_FPS / self.fps   # a speed in units a sample at BANDS_FPS, in this trace's samples
        self._steady = self._steady + 1 if moved is not None and moved < b.steady_delta * per_sample else 0
        squeezing = load is not None and -load >= LOAD_HOLD and b.holding_above <= grip <= b.holding_below
        self.load_read = self.load_read or load is not None
        still = moved is None or moved < GRIP_STILL * per_sample
        self._squeeze = self._squeeze + 1 if squeezing and still else 0
        self.last_grip = grip
        steady = self._steady >= self.steady_samples
        if not self.held:
            self.opened = self.opened or grip > b.open_above
            if grip > b.open_above:
                self._closing_low_z = None
            else:   # the arm's kinematics only while the jaws are not open: where a grasp may begin
                z = float(self.grasp_point(joints)[2])
                self._closing_low_z = z if self._closing_low_z is None else min(self._closing_low_z, z)
            if not self.opened:
                self.widest = widest = grip if self.widest is None else max(self.widest, grip)
            if self.load_read:
                self._hold_by_load(joints, grip, steady)
                return
            if not self.opened:
                self.rested_part_closed = self.rested_part_closed or (
                    steady and b.holding_above <= grip <= b.holding_below and widest - grip >= b.closed_by)
                return
            if steady and grip < b.empty_below:
                self.closed_empty = True
            elif steady and b.holding_above <= grip <= b.holding_below:
                self._hold(joints, grip)
            return
        point = self.grasp_point(joints)
        if self.released:
            self.after_release.append((float(point[0]), float(point[1]), float(point[2])))
            return
        eased = self.hold_grip is not None and grip - self.hold_grip > b.eased_open
        if grip > b.open_above or grip < b.empty_below or eased:   # let go (or slipped out and the jaws closed)
            self.released = True
            self.squeezed_out = grip < b.empty_below
            self.release_xyz = (float(point[0]), float(point[1]), float(point[2]))
            self.released_at = self.samples
            return
        if steady:
            self.rest_grip = min(self.rest_grip if self.rest_grip is not None else grip, grip)
        self.max_lift_m = max(self.max_lift_m, float(point[2]) - (self.lift_from_z or 0.0))

    def _hold_by_load(self, joints: dict[str, float], grip: float, steady: bool) -> None:
        """Before a hold, with the load read: squeezing for the steady span after closing (`closed_by` below the
        widest yet: a gripper opening, or the start pose's pushing on its own stop, is no grasp) is
        holding; resting at the closed end without squeezing closed on nothing; resting part-closed without
        squeezing is the policy's own pause (its command, not a cube, stopped the jaws), which says nothing yet."""
        self._widest_yet = max(self._widest_yet, grip)
        closed = self._widest_yet - grip >= self.bands.closed_by
        if closed and self._squeeze >= self.steady_samples:
            self._hold(joints, grip)
            self.squeezed = True
        elif steady and grip < self.bands.empty_below and self.opened:
            self.closed_empty = True
        elif self.opened and grip <= self.bands.holding_below:
            self.closed_part = True

    def _hold(self, joints: dict[str, float], grip: float) -> None:
        self.held = True
        self.held_at = self.samples
        self.hold_grip = self.rest_grip = grip
        self.hold_start_z = float(self.grasp_point(joints)[2])
        # a lift is measured from where the grasp began, the lowest the jaws were since they last opened (`see` has
        # taken this observation in): a squeeze read only once the cube was rising in them (the load builds as it
        # lifts) began at the table, where the judge's lift is measured from (held-out run act96s9100-900-rand trial
        # 10: squeeze read at 9.2 cm, the jaws closed at 2.0; read from 9.2 the 8 cm lift was 1.6 cm, and a success
        # was proposed as no grasp)
        self.lift_from_z = self._closing_low_z if self._closing_low_z is not None else self.hold_start_z

    @property
    def steady_samples(self) -> int:
        """The bands' steady span (`steady_samples` at `BANDS_FPS`) in this trace's samples."""
        return max(1, round(self.bands.steady_samples * self.fps / BANDS_FPS))

    @property
    def held_s(self) -> float | None:
        """How long the jaws held before letting go (None: never held, or never let go)."""
        if self.held_at is None or self.released_at is None:
            return None
        return (self.released_at - self.held_at) / self.fps

    @property
    def after_release_s(self) -> float | None:
        """How long the trace went on after the jaws let go (None: never let go)."""
        return None if self.released_at is None else (self.samples - self.released_at) / self.fps

    @property
    def elapsed_s(self) -> float:
        return self.samples / self.fps

    def distances_after_release(self, spot: tuple[float, float, float]) -> np.ndarray:
        """The grasp point's distance (m) from `spot` at each observation after the jaws let go (empty: none)."""
        if not self.after_release:
            return np.zeros(0)
        gaps: np.ndarray = np.linalg.norm(np.asarray(self.after_release) - np.asarray(spot), axis=1)
        return gaps


@dataclass(frozen=True)
class FinalView:
    """What the final top frame says: the cube in the bowl or not (None: not measured), and how far."""

    inside: bool | None
    distance_cm: float | None = None
    uncertainty_cm: float | None = None


@dataclass(frozen=True)
class EpisodeEnd:
    """What the end of the episode says. A real arm's episode runs to its time limit whatever happened
    (`ends_when_settled` False: its end says nothing). A simulated one ends `after_verdict_s` after its judge's
    final verdict, so a cube that settled in the bowl ends it early: one that ran to `time_limit_s` with the cube
    let go over the bowl never settled there in time, whatever the final frame shows (the judge's "inside the
    bowl but the sequence was incomplete": a cube still rocking on the bowl's slope, which no joint shows)."""

    time_limit_s: float | None = None
    ends_when_settled: bool = False


@dataclass(frozen=True)
class Proposal:
    """A label and why; `label` None: no proposal, the evidence contradicts itself (`refused` says how)."""

    label: Label | None
    reasons: tuple[Reason, ...]
    placement_error_cm: float | None = None
    uncertainty_cm: float | None = None

    @property
    def refused(self) -> bool:
        return self.label is None

    def record(self) -> dict[str, object]:
        """What the attempt stores (`Attempt.proposal`); label None when none was proposed."""
        out: dict[str, object] = {"label": self.label.value if self.label else None,
                                  "reasons": [r.value for r in self.reasons]}
        if self.placement_error_cm is not None:
            out["placement_error_cm"] = round(self.placement_error_cm, 3)
        if self.uncertainty_cm is not None:
            out["uncertainty_cm"] = round(self.uncertainty_cm, 3)
        return out

    def line(self) -> str:
        """One line for a prompt: the label and why."""
        where = (f", cube {self.placement_error_cm:.1f} +/- {self.uncertainty_cm or 0:.1f} cm from the bowl centre"
                 if self.placement_error_cm is not None else "")
        if self.label is None:
            return f"no label proposed: the evidence disagrees{where} ({self.reasons_text()})"
        return f"proposed {self.label.display}{where} ({self.reasons_text()})"

    def reasons_text(self) -> str:
        """Why, for people: the reasons in the order they were found."""
        return "; ".join(r.value for r in self.reasons)


def propose(trace: GripperTrace, view: FinalView, bowl_xy_m: tuple[float, float], bowl_radius_m: float,
            cube_half_m: float, episode: EpisodeEnd | None = None) -> Proposal:
    """The judge's rules, read from proprioception and the final frame instead of the true state.

    A success is proposed only with the evidence that the sequence completed in time: let go at least
    `settle_s` before the episode ended, and, where a settled cube would have ended the episode early
    (`episode`), an episode that ended early."""
    episode = episode or EpisodeEnd()
    b = trace.bands
    reasons: list[Reason] = []
    seen = {True: Reason.CUBE_IN_BOWL, False: Reason.CUBE_NOT_IN_BOWL, None: Reason.CUBE_NOT_MEASURED}[view.inside]

    def done(label: Label | None) -> Proposal:
        return Proposal(label, (*reasons, seen), view.distance_cm, view.uncertainty_cm)

    def refuse(why: Reason) -> Proposal:
        reasons.append(why)
        return done(None)

    if not trace.held:
        if trace.rested_part_closed and not trace.closed_empty:
            return refuse(Reason.RESTED_PART_CLOSED)
        reasons.append(Reason.CLOSED_ON_NOTHING if trace.closed_empty else
                       Reason.NEVER_SQUEEZED if trace.closed_part else Reason.NEVER_CLOSED)
        return done(Label.NO_GRASP)
    reasons.append(Reason.SQUEEZED_SOMETHING if trace.squeezed else Reason.CLOSED_ON_SOMETHING)
    lifted = trace.max_lift_m >= b.lift_min_m
    reasons.append(Reason.LIFTED if lifted else Reason.NOT_LIFTED)
    if not trace.squeezed and (trace.rest_grip is None or trace.rest_grip > b.on_cube_below):
        return refuse(Reason.STOPPED_WIDE)   # a lift then raised nothing, unless the servo felt the cube
    held_s = trace.held_s
    if not lifted and trace.squeezed_out and held_s is not None and held_s < b.lost_at_once_s:
        return refuse(Reason.LOST_AT_ONCE)   # a grasp the judge may or may not have counted
    if not trace.released or trace.release_xyz is None:
        reasons.append(Reason.STILL_HOLDING)
        return done(Label.WRONG_PLACEMENT)
    x, y, z = trace.release_xyz
    from_centre = math.hypot(x - bowl_xy_m[0], y - bowl_xy_m[1])
    if abs(from_centre - bowl_radius_m) < b.release_rim_m:
        return refuse(Reason.RELEASE_AT_RIM)
    over_bowl = from_centre < bowl_radius_m
    height = z - cube_half_m
    if over_bowl:
        reasons.append(Reason.OPENED_OVER_BOWL)
        above_floor = height - b.bowl_floor_m   # the cube's bottom over the bowl floor, as the trace reads it
        if above_floor > b.release_max_height_m + b.release_read_high_m:
            reasons.append(Reason.OPENED_TOO_HIGH)   # the judge's drop (or, landed inside, no placement)
            over_bowl = False
        elif above_floor > b.release_max_height_m - b.release_read_low_m:
            return refuse(Reason.RELEASE_HEIGHT_UNSURE)
    else:
        reasons.append(Reason.OPENED_MID_AIR if height > b.drop_min_height_m else Reason.OPENED_LOW_AWAY)
    inside = view.inside if view.inside is not None else over_bowl   # unmeasured: where it was let go
    if over_bowl and view.inside is False and view.distance_cm is not None and \
            view.distance_cm - 100 * bowl_radius_m > b.landing_cm + (view.uncertainty_cm or 0.0):
        return refuse(Reason.NOT_WHERE_LET_GO)   # let go over the bowl, seen far beyond its rim: never carried
    gaps = trace.distances_after_release((x, y, b.bowl_floor_m + cube_half_m))   # from where the cube lies
    withdrawn = np.flatnonzero(gaps >= b.withdraw_min_m + b.cube_spot_m)   # surely past the judge's withdrawal
    if over_bowl and len(withdrawn) and gaps[withdrawn[0]:].min() <= b.came_back_m:
        return refuse(Reason.CAME_BACK)   # settled before it came back (a success) or moved by it: unknown
    if inside and lifted and over_bowl:
        if episode.ends_when_settled and episode.time_limit_s is not None and \
                trace.elapsed_s >= episode.time_limit_s - 1.5 / trace.fps:
            after = trace.after_release_s
            if after is not None and b.settle_s <= after < b.settled_end_s:
                return refuse(Reason.LET_GO_LATE)   # it may have settled as the limit came (under `settle_s` it
            #                                         had no time to: the judge's wrong placement, as below)
            reasons.append(Reason.NEVER_SETTLED)   # a settled cube would have ended it early: the judge's verdict
            return done(Label.WRONG_PLACEMENT)     # at the limit is "inside the bowl, sequence incomplete"
        if len(gaps) and gaps.max() < b.withdraw_min_m - b.cube_spot_m:
            reasons.append(Reason.NEVER_WITHDREW)   # the judge's "inside the bowl, sequence incomplete"
            return done(Label.WRONG_PLACEMENT)
        after = trace.after_release_s
        if after is not None and after < b.settle_s:
            return refuse(Reason.LET_GO_LATE)
        if not len(withdrawn):
            return refuse(Reason.WITHDRAWAL_UNSURE)
        return done(Label.SUCCESS)
    if inside and not lifted:
        return done(Label.NO_GRASP)
    if not inside and not over_bowl and height > b.drop_min_height_m:
        let_go_cm = 100 * math.hypot(x - bowl_xy_m[0], y - bowl_xy_m[1])
        if view.distance_cm is None:
            return refuse(Reason.LANDING_UNSEEN)
        flung = trace.squeezed_out and trace.hold_start_z is not None and trace.hold_start_z <= b.on_table_m
        if abs(view.distance_cm - let_go_cm) > (b.squeezed_out_cm if flung else b.landing_cm) + \
                (view.uncertainty_cm or 0.0):
            return refuse(Reason.NOT_WHERE_LET_GO)
        return done(Label.GRASPED_THEN_DROPPED)
    return done(Label.WRONG_PLACEMENT)


def so101_grasp_point() -> Callable[[dict[str, float]], np.ndarray]:
    """Forward kinematics of the SO-101 from its MuJoCo model: LeRobot joint units -> grasp point (m)."""
    import harness.sim  # noqa: F401  (headless GL before mujoco)
    from harness.sim.kinematics import TopDownIK
    from harness.sim.scene import SceneGeometry, build_model
    from harness.sim.units import to_sim

    ik = TopDownIK(build_model(SceneGeometry()))
    arm = JOINT_NAMES[:5]

    def grasp_point(joints: dict[str, float]) -> np.ndarray:
        return ik.grasp_point(np.array([to_sim(n, float(joints[n])) for n in arm]))

    return grasp_point
