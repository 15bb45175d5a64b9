"""The simulator judge's verdict on one trial, as a typed record.

The judge lives with the simulator; its verdict travels further: the engine scores and stores it
with the attempt (`judge`), the TUI and the terminal offer it as the default label, demonstration
acceptance reads its events, reports read its true placement error. One model, so every reader
compares a `Label` and an `EventKind`, never a dictionary key or a string. Its JSON form is the
dictionary the judge has always written (attempts store it, `judge.json` holds it), so scoresheets
recorded before the model existed load and hash unchanged.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from harness.models.taxonomy import Label


class EventKind(StrEnum):
    """A step of the judge's strict sequence (and the one event that spoils a clean release)."""

    GRASP = "grasp"
    LIFT = "lift"
    RELEASE = "release"
    WITHDRAW = "withdraw"
    STABLE_IN_BOWL = "stable_in_bowl"
    RENEWED_CONTACT = "renewed_contact_or_closing"   # jaws touched or closed on the cube again after release


class JudgeEvent(BaseModel):
    """When (trial time, s) the judge saw a step, and where the cube's centre was (m, world frame)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    event: EventKind
    t: float
    cube: list[float]


class JudgeVerdict(BaseModel):
    """What the judge decided from the true physical state, and the facts it decided on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: Label
    detail: str                       # for people: never parsed
    true_placement_error_cm: float    # cube centre to bowl centre, horizontally
    cube_inside_bowl: bool
    clean_release: bool | None        # None: never released
    grasped: bool
    lifted: bool
    max_lift_cm: float
    events: list[JudgeEvent]
    thresholds: dict[str, float | int]   # the `JudgeThresholds` it judged with

    def saw(self, kind: EventKind) -> bool:
        return any(e.event is kind for e in self.events)

    def to_json(self) -> dict[str, object]:
        """The dictionary stored with an attempt and written as `judge.json`."""
        return self.model_dump(mode="json")
