"""The failure taxonomy and the kinds of void, defined once; every other module derives from these.

`Label` is what a scored attempt is called (success, one failure mode) plus `void`; each label
carries the key an operator presses, the colour the TUI draws it in and whether it counts as a
failure. `VoidKind` says why an attempt was voided and decides what the run does next, so no
caller ever inspects the text of a void reason.

The taxonomy a protocol pre-registers (`failure_taxonomy`) is versioned: `TAXONOMY_VERSIONS` keeps every list
the harness has written, and a new failure label is a new version that extends the last one (a `Label` member,
its key and colours, and the version's list). A protocol is checked against the version whose list it names, so
the protocols written before the label keep loading, are run and locked under their own version, and stay
comparable with each other; a new protocol (`harness protocol new`, a protocol without the field) registers the
latest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Label(StrEnum):
    """A taxonomy label; its value is what scoresheets store (`outcome`/`failure_mode`)."""

    SUCCESS = "success"
    NO_GRASP = "no_grasp"
    GRASPED_THEN_DROPPED = "grasped_then_dropped"
    WRONG_PLACEMENT = "wrong_placement"
    VOID = "void"

    @property
    def key(self) -> str:
        """The key an operator presses for this label (TUI and plain terminal alike)."""
        return _KEYS[self]

    @property
    def colour(self) -> str:
        """A Rich colour name, so every screen draws a label the same way."""
        return _COLOURS[self]

    @property
    def hex(self) -> str:
        """The same colour for figures and HTML (matplotlib, reports)."""
        return _HEX[self]

    @property
    def is_failure(self) -> bool:
        return self in (Label.NO_GRASP, Label.GRASPED_THEN_DROPPED, Label.WRONG_PLACEMENT)

    @property
    def display(self) -> str:
        """How people write it: `no-grasp` (not `title`, which would hide `str.title`)."""
        return self.value.replace("_", "-")

    @property
    def outcome(self) -> Outcome:
        """The attempt outcome this label is stored as (a failure mode is stored as `failure`)."""
        return Outcome.FAILURE if self.is_failure else Outcome(self.value)

    @classmethod
    def by_key(cls, key: str) -> Label | None:
        return next((label for label in cls if label.key == key), None)


_KEYS = {Label.SUCCESS: "s", Label.NO_GRASP: "n", Label.GRASPED_THEN_DROPPED: "d", Label.WRONG_PLACEMENT: "w",
         Label.VOID: "v"}
_COLOURS = {Label.SUCCESS: "green", Label.NO_GRASP: "red", Label.GRASPED_THEN_DROPPED: "dark_orange",
            Label.WRONG_PLACEMENT: "magenta", Label.VOID: "grey62"}
_HEX = {Label.SUCCESS: "#2e7d32", Label.NO_GRASP: "#c62828", Label.GRASPED_THEN_DROPPED: "#ef6c00",
        Label.WRONG_PLACEMENT: "#6a1b9a", Label.VOID: "#607d8b"}

class Outcome(StrEnum):
    """What an attempt's `outcome` field stores: the failure modes share one value, `failure`."""

    SUCCESS = Label.SUCCESS.value
    FAILURE = "failure"
    VOID = Label.VOID.value


FAILURE_LABELS: tuple[Label, ...] = tuple(label for label in Label if label.is_failure)
FAILURE_MODES: tuple[str, ...] = tuple(label.value for label in Label if label.is_failure)
# every taxonomy a protocol may pre-register, by version, each extending the one before (never edited once
# released: a protocol that names a list must keep loading); void is always allowed besides
TAXONOMY_VERSIONS: dict[int, tuple[str, ...]] = {
    1: (Label.SUCCESS.value, Label.NO_GRASP.value, Label.GRASPED_THEN_DROPPED.value, Label.WRONG_PLACEMENT.value),
}
TAXONOMY_VERSION = max(TAXONOMY_VERSIONS)
TAXONOMY: tuple[str, ...] = TAXONOMY_VERSIONS[TAXONOMY_VERSION]   # what a new protocol pre-registers
ALL_LABELS: tuple[str, ...] = (*TAXONOMY, Label.VOID.value)      # every label a scoresheet may hold
SCORE_KEYS: dict[str, Label] = {label.key: label for label in Label}


def taxonomy_version(labels: Sequence[str]) -> int:
    """The version whose list a protocol's `failure_taxonomy` is; ValueError naming the lists it may be. The
    table is read when called, so a version added is known at once."""
    for version, listed in TAXONOMY_VERSIONS.items():
        if list(labels) == list(listed):
            return version
    if len(TAXONOMY_VERSIONS) == 1:
        raise ValueError(f"failure_taxonomy: must be exactly {list(TAXONOMY)} (void is always allowed)")
    known = "; ".join(f"version {version}: {list(listed)}" for version, listed in TAXONOMY_VERSIONS.items())
    raise ValueError(f"failure_taxonomy: must be exactly one of the harness's taxonomies ({known}; void is always "
                     "allowed)")


def locked_labels(labels: Sequence[str]) -> list[str]:
    """What a scoresheet locks for a protocol's pre-registered labels: them and void."""
    return [*labels, Label.VOID.value]


class VoidKind(StrEnum):
    """Why an attempt was voided. The value is the text a void reason starts with on disk."""

    CAMERA_DROPOUT = "camera dropout"
    ROBOT_IO_ERROR = "robot I/O error"
    ARM_POWER_CYCLED = "arm power-cycled (servos reset, torque off)"
    ARM_NOT_AT_START_POSE = "arm not at its start pose"
    EMERGENCY_STOP = "emergency stop by operator"
    OPERATOR_ABORT = "aborted by operator"
    OPERATOR_VOID = "voided by operator"
    UI_CLOSED = "operator closed the TUI before scoring"
    DISK_FULL = "no room to record"   # the disk (or a quota, a file-size limit) refused the trial's evidence

    @property
    def pauses_run(self) -> bool:
        """A fault the operator must fix before the next trial: the run stops, resumable."""
        return self in (VoidKind.CAMERA_DROPOUT, VoidKind.ROBOT_IO_ERROR, VoidKind.ARM_POWER_CYCLED,
                        VoidKind.ARM_NOT_AT_START_POSE, VoidKind.EMERGENCY_STOP, VoidKind.OPERATOR_ABORT,
                        VoidKind.UI_CLOSED, VoidKind.DISK_FULL)


@dataclass(frozen=True)
class Void:
    """A void as the engine decides it: the kind (what happens next) and a detail for people."""

    kind: VoidKind
    detail: str | None = None

    @property
    def reason(self) -> str:
        """The text stored as the attempt's `void_reason`."""
        if self.kind is VoidKind.OPERATOR_VOID and self.detail:
            return self.detail  # the operator's own words
        return f"{self.kind.value}: {self.detail}" if self.detail else self.kind.value
