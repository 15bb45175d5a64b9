"""Whether a trial's anatomy saw what the simulator's judge saw: the grasp and the release, each present or
absent alike and, when both saw it, at the same time within one control step.

Why: the anatomy reads only what a real arm reports (positions, commands, the gripper's load); on the
simulator the judge knows the contacts. This is the check that the first holds on the policies people
evaluate (issue 37), used by `benchmarks/anatomy_agreement.py` and the held-out test.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.models.anatomy import TrialAnatomy
from harness.models.verdict import EventKind, JudgeVerdict

SLACK_S = 1e-3    # the trace's times are rounded to the millisecond, the judge's to its physics step


@dataclass(frozen=True)
class EventAgreement:
    judge_s: float | None       # when the judge saw it (None: never)
    anatomy_s: float | None     # when the anatomy saw it (None: never)
    agrees: bool


@dataclass(frozen=True)
class TrialAgreement:
    grasp: EventAgreement
    release: EventAgreement
    lift: EventAgreement      # reported beside, not part of `agrees`: the judge lifts the cube, the anatomy the gripper

    @property
    def agrees(self) -> bool:
        return self.grasp.agrees and self.release.agrees

    def describe(self) -> str:
        def one(name: str, e: EventAgreement) -> str:
            def at(v: float | None) -> str:
                return "never" if v is None else f"{v:.3f} s"
            return f"{name}: judge {at(e.judge_s)}, anatomy {at(e.anatomy_s)}"
        return f"{one('grasp', self.grasp)}; {one('release', self.release)}"


def _event(judge_s: float | None, anatomy_s: float | None, period_s: float) -> EventAgreement:
    if judge_s is None or anatomy_s is None:
        return EventAgreement(judge_s, anatomy_s, judge_s is None and anatomy_s is None)
    return EventAgreement(judge_s, anatomy_s, abs(judge_s - anatomy_s) <= period_s + SLACK_S)


def trial_agreement(anatomy: TrialAnatomy, verdict: JudgeVerdict, period_s: float) -> TrialAgreement:
    """The anatomy's grasp (holding, confirmed at `closed_at_s`) and release against the judge's first
    `grasp` and `release` events; `period_s` is the control period."""
    def first(kind: EventKind) -> float | None:
        return next((e.t for e in verdict.events if e.event is kind), None)

    grasp_s = anatomy.closed_at_s if anatomy.holding else None
    return TrialAgreement(_event(first(EventKind.GRASP), grasp_s, period_s),
                          _event(first(EventKind.RELEASE), anatomy.released_at_s, period_s),
                          _event(first(EventKind.LIFT), anatomy.lifted_at_s, period_s))
