"""Graded outcomes of a trial, defined once: how far an attempt got (progress) and how soon it succeeded.

A comparison's stopping rule declares its primary outcome before trial 1 (`PrimaryOutcome`, in the protocol's
`stopping_rule.primary_outcome`, locked with it). Success or failure throws away what the harness already knows
about each attempt: the judge (simulated arm) and the anatomy (a real arm's joint trace, checked against the
judge at 129 of 130 grasps on learned policies, docs/anatomy.md) say how far it got, and every attempt has a
time. A test on the graded outcome separates two policies with fewer trials when they differ before the last
step (one grasps more often, the other lifts more often), and cannot help when they differ only in it.

* `progress` (`Progress`): 0 no grasp, 1 grasped, 2 lifted, 3 carried over the bowl, 4 placed. The label
  decides the ends (success is 4, no_grasp is 0: the scorer's word, judge or operator, is final); a failure
  after a grasp (grasped_then_dropped, wrong_placement) is 1, 2 once the cube was lifted, 3 once it was
  released with the cube (simulated arm) or the grasp point (real arm) over the bowl's footprint. The facts
  come from the judge on the simulated arm (`progress_from_judge`) and from the operator's label plus the
  anatomy on a real arm (`progress_from_anatomy`); `progress` is the one rule both feed.
* `time_to_success`: the episode time at which a successful attempt released the cube (the judge's last
  release, or the anatomy's on a real arm; the episode's length where neither was seen), a failure censored at
  the episode limit. As a bounded score, ``1 - t / limit`` (0 for every failure): the share of the episode a
  success left unused.

Both are scaled to [0, 1] (`GradedOutcome.score`) for the paired betting test (`harness.stats.betting`). What
was locked (`GradedOutcome`: the outcome, its definition in words, its source and the geometry it reads) is
stored in the comparison's locked block, so a report and a resume score every attempt as the lock said.
"""

from __future__ import annotations

import math
from enum import IntEnum, StrEnum

from pydantic import BaseModel, ConfigDict

from harness.models.anatomy import TrialAnatomy
from harness.models.taxonomy import Label
from harness.models.verdict import EventKind, JudgeVerdict


class PrimaryOutcome(StrEnum):
    """What a comparison's test decides on (declared in the stopping rule, locked with it)."""

    SUCCESS = Label.SUCCESS.value          # success or failure: the discordant-pair test (`stats.sequential`)
    PROGRESS = "progress"                  # how far the attempt got, 0-4 (`Progress`)
    TIME_TO_SUCCESS = "time_to_success"    # when it succeeded; failures censored at the episode limit

    @property
    def graded(self) -> bool:
        return self is not PrimaryOutcome.SUCCESS


class Progress(IntEnum):
    """How far an attempt got: the ordinal score, each level implying the ones below."""

    NO_GRASP = 0
    GRASPED = 1
    LIFTED = 2
    CARRIED = 3     # carried over the bowl: released with the cube over its footprint
    PLACED = 4      # a success

    @property
    def words(self) -> str:
        return _PROGRESS_WORDS[self]


_PROGRESS_WORDS = {Progress.NO_GRASP: "no grasp", Progress.GRASPED: "grasped", Progress.LIFTED: "lifted",
                   Progress.CARRIED: "carried over the bowl", Progress.PLACED: "placed"}
TOP = Progress.PLACED


class OutcomeSource(StrEnum):
    """Where the graded facts come from."""

    JUDGE = "judge"                          # the simulator's judge, from the true state
    OPERATOR_ANATOMY = "operator+anatomy"    # the operator's label, the anatomy for the steps before it


PROGRESS_DEFINITION = ("progress 0-4: 4 placed (success), 0 no grasp (label no_grasp); any other failure 1 grasped, "
                       "2 once lifted, 3 once released over the bowl's footprint")
TIME_DEFINITION = ("time to success: episode time of the successful release (the episode's length where none was "
                   "seen); failures censored at the episode limit; scored 1 - t / limit")
SUCCESS_DEFINITION = "success 1, any failure 0"


def progress(label: Label, lifted: bool, over_bowl: bool) -> Progress:
    """The one rule: the label decides the ends, the facts the steps between."""
    if label is Label.SUCCESS:
        return Progress.PLACED
    if label is Label.NO_GRASP:
        return Progress.NO_GRASP
    if not label.is_failure:
        raise ValueError(f"no progress for a {label.value} attempt")
    if lifted and over_bowl:
        return Progress.CARRIED
    return Progress.LIFTED if lifted else Progress.GRASPED


def _within(point_cm: tuple[float, float], centre_cm: tuple[float, float], radius_cm: float) -> bool:
    return math.hypot(point_cm[0] - centre_cm[0], point_cm[1] - centre_cm[1]) <= radius_cm


class GradedOutcome(BaseModel):
    """The primary outcome as locked: its definition in words, its source and the scene it reads (table cm,
    robot base frame); `score` is then a pure function of an attempt's stored record."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: PrimaryOutcome
    definition: str
    source: OutcomeSource
    bowl_xy_cm: tuple[float, float]
    bowl_radius_cm: float
    trained_cube_xy_cm: tuple[float, float]
    episode_limit_s: float

    @classmethod
    def declare(cls, kind: PrimaryOutcome, simulated: bool, bowl_xy_cm: tuple[float, float],
                bowl_diameter_cm: float, trained_cube_xy_cm: tuple[float, float],
                episode_limit_s: float) -> GradedOutcome:
        words = {PrimaryOutcome.SUCCESS: SUCCESS_DEFINITION, PrimaryOutcome.PROGRESS: PROGRESS_DEFINITION,
                 PrimaryOutcome.TIME_TO_SUCCESS: TIME_DEFINITION}[kind]
        return cls(kind=kind, definition=words, source=OutcomeSource.JUDGE if simulated else
                   OutcomeSource.OPERATOR_ANATOMY, bowl_xy_cm=bowl_xy_cm, bowl_radius_cm=bowl_diameter_cm / 2,
                   trained_cube_xy_cm=trained_cube_xy_cm, episode_limit_s=episode_limit_s)

    def progress_from_judge(self, label: Label, verdict: JudgeVerdict) -> Progress:
        """The simulated arm: lifted as the judge saw it; over the bowl where the cube was at a release."""
        over = any(_within((e.cube[0] * 100, e.cube[1] * 100), self.bowl_xy_cm, self.bowl_radius_cm)
                   for e in verdict.events if e.event is EventKind.RELEASE)
        return progress(label, verdict.lifted, over)

    def progress_from_anatomy(self, label: Label, anatomy: TrialAnatomy) -> Progress:
        """A real arm: the operator's label, the joint trace for lifted (holding, risen 2 cm) and over the bowl
        (the grasp point where the gripper opened; anatomy positions are relative to the trained spot)."""
        over = False
        if anatomy.release_point_cm is not None:
            point = (anatomy.release_point_cm[0] + self.trained_cube_xy_cm[0],
                     anatomy.release_point_cm[1] + self.trained_cube_xy_cm[1])
            over = _within(point, self.bowl_xy_cm, self.bowl_radius_cm)
        return progress(label, anatomy.holding and anatomy.lifted_at_s is not None, over)

    def progress_of(self, label: Label, verdict: JudgeVerdict | None, anatomy: TrialAnatomy | None) -> Progress:
        """From the locked source; a failure after a grasp without the facts to grade it counts as grasped
        (the least the label says)."""
        if self.source is OutcomeSource.JUDGE and verdict is not None:
            return self.progress_from_judge(label, verdict)
        if anatomy is not None:
            return self.progress_from_anatomy(label, anatomy)
        return progress(label, False, False)

    def time_to_success_s(self, label: Label, verdict: JudgeVerdict | None, anatomy: TrialAnatomy | None,
                          episode_s: float) -> float:
        """A success's release time (episode seconds, at most the limit); a failure: the limit (censored)."""
        if label is not Label.SUCCESS:
            return self.episode_limit_s
        released: float | None = None
        if self.source is OutcomeSource.JUDGE and verdict is not None:
            times = [e.t for e in verdict.events if e.event is EventKind.RELEASE]
            released = times[-1] if times else None
        elif anatomy is not None:
            released = anatomy.released_at_s
        seen = released if released is not None else episode_s
        return min(max(seen, 0.0), self.episode_limit_s)

    def describe(self, label: Label, verdict: JudgeVerdict | None, anatomy: TrialAnatomy | None,
                 episode_s: float) -> str:
        """One line for the operator's tally: the attempt on the locked primary outcome, in plain words."""
        if self.kind is PrimaryOutcome.PROGRESS:
            level = self.progress_of(label, verdict, anatomy)
            return f"progress: got to {level.words} ({int(level)} of 4)"
        if self.kind is PrimaryOutcome.TIME_TO_SUCCESS:
            if label is not Label.SUCCESS:
                return f"time to success: none (counted as the whole {self.episode_limit_s:g} s)"
            return (f"time to success: {self.time_to_success_s(label, verdict, anatomy, episode_s):.1f} s of "
                    f"{self.episode_limit_s:g} s")
        return f"success: {'yes' if label is Label.SUCCESS else 'no'}"

    def score(self, label: Label, verdict: JudgeVerdict | None, anatomy: TrialAnatomy | None,
              episode_s: float) -> float:
        """The primary outcome on [0, 1], higher is better: what the paired test compares."""
        if self.kind is PrimaryOutcome.PROGRESS:
            return self.progress_of(label, verdict, anatomy) / TOP
        if self.kind is PrimaryOutcome.TIME_TO_SUCCESS:
            return 1.0 - self.time_to_success_s(label, verdict, anatomy, episode_s) / self.episode_limit_s
        return 1.0 if label is Label.SUCCESS else 0.0
