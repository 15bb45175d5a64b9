"""Which collected attempts become training demonstrations.

A demonstration teaches whatever it contains: a cube nudged into the bowl teaches pushing, a
second grab after letting go teaches fumbling. So an attempt is kept only when the simulator
judge's strict sequence (grasp, lift, release over the bowl, withdraw, settle inside) says
success, and, in `clean-release` mode, when nothing touched or squeezed the cube again after the
release. Both read the judge's verdict and its event trace; the judge itself is not changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from harness.models.taxonomy import Label
from harness.models.verdict import EventKind, JudgeVerdict


class AcceptMode(StrEnum):
    STRICT = "strict"                # the judge's strict success
    CLEAN_RELEASE = "clean-release"  # strict success and a clean release


class RejectReason(StrEnum):
    """Why an attempt is not a demonstration. Stable names: they are written to selection.json."""

    NO_GRASP = "no_grasp"                    # the gripper never held the cube
    KNOCKED_IN = "knocked_in"                # the cube reached the bowl without a grasp and lift
    DROPPED = "dropped"                      # released in the air away from the bowl
    STILL_HOLDING = "still_holding"          # the time limit came with the cube in the gripper
    WRONG_PLACEMENT = "wrong_placement"      # released, but the cube did not settle in the bowl
    INCOMPLETE_SEQUENCE = "incomplete_sequence"  # in the bowl, but a step of the sequence is missing
    REGRASP_AFTER_RELEASE = "regrasp_after_release"  # jaws touched or closed on the cube again
    NO_VERDICT = "no_verdict"                # the attempt ended without a judge verdict


@dataclass(frozen=True)
class Decision:
    accepted: bool
    reason: RejectReason | None = None

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "reason": self.reason.value if self.reason else None}


def strict_reject_reason(verdict: JudgeVerdict) -> RejectReason | None:
    """None when the judge's strict sequence succeeded, else the reason it did not.

    Reads the verdict's label, facts and events (grasp, lift, release, withdraw, stable in the bowl),
    never its human-readable detail text.
    """
    label = verdict.label
    if label is Label.SUCCESS and verdict.saw(EventKind.STABLE_IN_BOWL):
        return None
    inside = verdict.cube_inside_bowl
    if label is Label.NO_GRASP:
        return RejectReason.KNOCKED_IN if inside else RejectReason.NO_GRASP
    if label is Label.GRASPED_THEN_DROPPED:
        return RejectReason.DROPPED
    if not verdict.saw(EventKind.RELEASE):
        return RejectReason.KNOCKED_IN if inside and not verdict.grasped else RejectReason.STILL_HOLDING
    if inside:
        return RejectReason.KNOCKED_IN if not verdict.lifted else RejectReason.INCOMPLETE_SEQUENCE
    return RejectReason.WRONG_PLACEMENT


def clean_release_reject_reason(verdict: JudgeVerdict) -> RejectReason | None:
    """None when nothing touched or re-closed on the cube after the release.

    The judge flags renewed jaw contact above its `clean_contact_n` or renewed closing beyond
    `clean_reclose_rad` after release (`clean_release` false, event `EventKind.RENEWED_CONTACT`).
    """
    if verdict.clean_release is False or verdict.saw(EventKind.RENEWED_CONTACT):
        return RejectReason.REGRASP_AFTER_RELEASE
    return None


def decide(verdict: JudgeVerdict | None, mode: AcceptMode) -> Decision:
    """Keep or reject one attempt. The strict reason wins: it is the more basic failure."""
    if verdict is None:
        return Decision(False, RejectReason.NO_VERDICT)
    reason = strict_reject_reason(verdict)
    if reason is None and mode is AcceptMode.CLEAN_RELEASE:
        reason = clean_release_reject_reason(verdict)
    return Decision(reason is None, reason)
