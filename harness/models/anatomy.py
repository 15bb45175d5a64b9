"""Failure anatomy as data: what one trial's proprioception says (when the arm first moved, where the
gripper closed against where the cube stood, the phases it went through and the one it ended in), and
what a run's trials say together (the tracking slope: does the policy follow the cube, or go to the
trained position whatever the cube's offset).

The per-trial record is computed when the attempt is recorded (`harness.run.anatomy`, forward
kinematics through the simulator's SO-101 model) and stored with the attempt; the run-level figures
are computed here from the stored records, so a report over thousands of attempts stays cheap.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

# The rules that made a stored anatomy. 1 (stored without a `rules` field): holding was "the gripper stopped
# short of a closing command", blind to a learned policy that commands the position it reaches (issue 37).
# 2: holding is the gripper servo's load, sustained with the gripper still (`harness.run.anatomy`).
ANATOMY_RULES = 3
LIFT_CM = 2.0                # lifted: the grasp point 2 cm above where it closed (the judge's lift_min_m)


class GraspSignal(StrEnum):
    """What a trace's holding was read from."""

    LOAD = "load"            # the gripper servo's Present_Load (rules 2)
    COMMAND = "command"      # the gripper stopped short of its command: a trace without the load (rules 1)


class Phase(StrEnum):
    """The phases of a pick and place, in the order a successful trial goes through them."""

    WAIT = "wait"              # before the arm first moves
    APPROACH = "approach"      # moving towards the cube, gripper open
    CLOSE = "close"            # the gripper closing
    LIFT = "lift"              # holding the cube, raising it
    TRANSPORT = "transport"    # carrying it
    RELEASE = "release"        # opening over the target
    WITHDRAW = "withdraw"      # moving away after the release


class PhaseSpan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    phase: Phase
    start_s: float
    end_s: float


class TrialAnatomy(BaseModel):
    """One trial from its joint trace. Positions are table centimetres relative to the trained cube
    position (x away from the robot, y to its left), the frame of a trial's planned offset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    first_motion_s: float | None = Field(description="episode time at which a joint first moved beyond the "
                                                     "threshold; null: the arm never moved")
    stalled: bool = Field(description="no motion within the protocol's stall limit")
    stall_limit_s: float
    cube_start_cm: tuple[float, float] = Field(description="planned offset, or the measured start on a real arm")
    closed_at_s: float | None = Field(description="when the gripper closed (holding the cube, or shut on nothing)")
    grasp_point_cm: tuple[float, float] | None = Field(description="the gripper's grasp point on the table when it "
                                                                   "closed")
    grasp_height_cm: float | None = Field(None, description="grasp point above the table when it closed")
    holding: bool = Field(description="something between the jaws: the gripper servo loaded, the gripper still "
                                      "(rules 2), or stopped short of its command (rules 1)")
    max_lift_cm: float = Field(0.0, description="grasp point's highest rise above where it closed, while holding")
    lifted_at_s: float | None = Field(None, description="when the grasp point had risen 2 cm while holding")
    released_at_s: float | None = None
    release_point_cm: tuple[float, float] | None = None
    release_height_cm: float | None = None
    phases: list[PhaseSpan] = Field(default_factory=list)
    ended_in: Phase = Field(description="the last phase the trial reached")
    summary: str = Field(description="one line: what the trace says happened")
    rules: int | None = Field(None, description="the anatomy rules' version that computed this record; null: 1, "
                                                "the rules before the version was stored")
    grasp_signal: GraspSignal | None = Field(None, description="what holding was read from; null: the command gap "
                                                               "(rules 1)")

    @model_serializer(mode="wrap")
    def _omit_unversioned(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """A record from before the rules were versioned stores, and hashes, exactly as it did."""
        data = handler(self)
        for name in ("rules", "grasp_signal"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def rules_version(self) -> int:
        return self.rules or 1

    @property
    def grasp_offset_cm(self) -> tuple[float, float] | None:
        """Where the gripper closed, relative to the cube's start."""
        if self.grasp_point_cm is None:
            return None
        return (self.grasp_point_cm[0] - self.cube_start_cm[0], self.grasp_point_cm[1] - self.cube_start_cm[1])

    def phase_start(self, phase: Phase) -> float | None:
        return next((p.start_s for p in self.phases if p.phase is phase), None)


class TrackingFit(BaseModel):
    """Grasp point offset from the trained position regressed on the cube's offset, both axes pooled
    (x on x, y on y): slope 1 follows the cube, 0 goes to the trained position regardless."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(description="trials with a grasp point")
    slope: float
    slope95: tuple[float, float] = Field(description="95 % interval (t distribution)")
    intercept_cm: tuple[float, float] = Field(description="per axis: where the gripper closes for a cube on the "
                                                          "trained position")
    residual_sd_cm: float = Field(description="spread of grasp points around the fit")
    cube_spread_cm: float = Field(description="spread of cube offsets: a slope needs cubes in more than one place")


def tracking_fit(cubes: list[tuple[float, float]], grasps: list[tuple[float, float]]) -> TrackingFit | None:
    """Least squares with a common slope and a per-axis intercept; None under three trials or with every cube
    at one spot (a slope then says nothing)."""
    n = len(cubes)
    if n < 3:
        return None
    c = np.asarray(cubes, dtype=float)
    g = np.asarray(grasps, dtype=float)
    centred_c = c - c.mean(axis=0)
    spread = float(np.sqrt((centred_c ** 2).sum(axis=1).mean()))
    sxx = float((centred_c ** 2).sum())
    if sxx < 1e-6:
        return None
    centred_g = g - g.mean(axis=0)
    slope = float((centred_c * centred_g).sum() / sxx)
    intercept = g.mean(axis=0) - slope * c.mean(axis=0)
    residuals = g - (intercept + slope * c)
    dof = 2 * n - 3                                  # two coordinates per trial, one slope, two intercepts
    sigma2 = float((residuals ** 2).sum() / dof)
    half = _t975(dof) * math.sqrt(sigma2 / sxx)
    return TrackingFit(n=n, slope=round(slope, 4), slope95=(round(slope - half, 4), round(slope + half, 4)),
                       intercept_cm=(round(float(intercept[0]), 3), round(float(intercept[1]), 3)),
                       residual_sd_cm=round(math.sqrt(sigma2), 3), cube_spread_cm=round(spread, 3))


def _t975(dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def describe(a: TrialAnatomy, bowl: tuple[float, float] | None, timing_withheld: bool = False) -> str:
    """What the trace says, in the words an operator would use. `timing_withheld`: without the time of the first
    motion (an open, sealed comparison: a slower policy moves later in every trial, so the time names its arm).
    `bowl`: the bowl's centre relative to the trained cube position; None: the release's distance to it unsaid."""
    if a.first_motion_s is None:
        return "the arm never moved" + (" (stalled)" if a.stalled else "")
    moved = "first motion withheld while blind" if timing_withheld else f"first moved at {a.first_motion_s:.1f} s"
    wait = f"{moved}{' (stalled)' if a.stalled else ''}"
    if a.closed_at_s is None:
        return f"{wait}; the gripper never closed"
    offset = a.grasp_offset_cm
    assert offset is not None
    where = _direction(offset)
    if not a.holding:
        return f"{wait}; closed on nothing {math.hypot(*offset):.1f} cm from the cube{where}"
    if a.max_lift_cm < LIFT_CM:
        return (f"{wait}; grasped {math.hypot(*offset):.1f} cm from the cube's start, lifted only "
                f"{a.max_lift_cm:.1f} cm")
    if a.released_at_s is None:
        return f"{wait}; grasped and lifted {a.max_lift_cm:.1f} cm, still holding at the end ({a.ended_in.value})"
    assert a.release_point_cm is not None
    during = "transport" if a.phase_start(Phase.TRANSPORT) is not None else "lift"
    height = f" at {a.release_height_cm:.0f} cm height" if a.release_height_cm is not None else ""
    opened = f"{wait}; grasped, lifted {a.max_lift_cm:.1f} cm, opened after {during}{height}"
    if bowl is None:
        return opened
    to_bowl = math.hypot(a.release_point_cm[0] - bowl[0], a.release_point_cm[1] - bowl[1])
    return f"{opened}, {to_bowl:.1f} cm from the bowl centre"


def _direction(offset: tuple[float, float]) -> str:
    """Which way the gripper missed, along the larger axis (+x away from the robot, +y to its left)."""
    dx, dy = offset
    if math.hypot(dx, dy) < 0.5:
        return ""
    return f", {'+' if dx > 0 else '-'}x" if abs(dx) >= abs(dy) else f", {'+' if dy > 0 else '-'}y"
