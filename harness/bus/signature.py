"""A servo known by its EEPROM: the registers LeRobot's calibration writes into each joint's servo.

An ID says only what a servo was told to answer to, and a servo connected at the wrong prompt can
follow a turned joint as well as the right one. LeRobot's calibration writes each joint's range and
homing offset into its servo's EEPROM (Min/Max_Position_Limit, Homing_Offset), so a calibrated
arm's servos carry their joint with them. `fix-ids` reads these registers before it writes an ID
and compares them with what the arm's calibration file says each joint should hold: a servo whose
registers are another joint's is not programmed, and the final check proves each ID holds the
servo of its joint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import HarnessInputError

ADDR_MIN_LIMIT, ADDR_HOMING_OFFSET = 9, 31      # Min_Position_Limit (9-10), Max (11-12); Homing_Offset (31-32)
SPAN = ADDR_HOMING_OFFSET + 2 - ADDR_MIN_LIMIT  # one read covers all three
HOMING_SIGN_BIT = 11                             # sign-magnitude, as LeRobot's Feetech encoding table says


@dataclass(frozen=True)
class Signature:
    """What a calibrated servo's EEPROM says about the joint it sits in."""

    min_limit: int
    max_limit: int
    homing_offset: int

    def describe(self) -> str:
        return f"limits {self.min_limit}-{self.max_limit}, homing offset {self.homing_offset}"

    @classmethod
    def from_registers(cls, block: bytes) -> Signature:
        """From the bytes of registers 9-32 (one read)."""
        def word(address: int) -> int:
            return int.from_bytes(block[address - ADDR_MIN_LIMIT:address - ADDR_MIN_LIMIT + 2], "little")

        raw = word(ADDR_HOMING_OFFSET)
        magnitude = raw & ((1 << HOMING_SIGN_BIT) - 1)
        return cls(word(ADDR_MIN_LIMIT), word(ADDR_MIN_LIMIT + 2),
                   -magnitude if raw >> HOMING_SIGN_BIT & 1 else magnitude)


class _JointCalibration(BaseModel):
    """One joint of a LeRobot calibration file (`lerobot-calibrate` writes `id`, `drive_mode` too)."""

    model_config = ConfigDict(extra="allow")
    homing_offset: int
    range_min: int
    range_max: int


@dataclass(frozen=True)
class Expected:
    """Each joint's signature as the arm's calibration file says, and where that file is."""

    source: Path
    joints: dict[str, Signature]

    def looks_like(self, signature: Signature) -> tuple[str, ...]:
        """The joints whose calibration this signature is."""
        return tuple(name for name, expected in self.joints.items() if expected == signature)


def load_expected(path: str | Path) -> Expected:
    """A LeRobot calibration file as signatures; a file that is not one is one line (HarnessInputError)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read the calibration file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise HarnessInputError(path, None, f"not JSON ({exc})") from None
    if not isinstance(raw, dict) or not raw:
        raise HarnessInputError(path, None, "not a LeRobot calibration file (expected one object per joint)")
    joints = {}
    for name, entry in raw.items():
        try:
            joint = _JointCalibration.model_validate(entry)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join([name, *(str(x) for x in first["loc"])])
            raise HarnessInputError(path, field, first["msg"]) from None
        joints[name] = Signature(joint.range_min, joint.range_max, joint.homing_offset)
    return Expected(path, joints)


class Verdict(StrEnum):
    """What a servo's EEPROM says about whether it is the joint asked for."""

    THIS_JOINT = "this_joint"        # it holds this joint's calibration (and no other's alone)
    OTHER_JOINT = "other_joint"      # it holds another joint's calibration, not this one's: the wrong servo
    UNCALIBRATED = "uncalibrated"    # it holds no joint's calibration (a new servo, or the file is stale)
    NO_CALIBRATION = "no_calibration"  # no calibration file to compare with, or the registers were unreadable


@dataclass(frozen=True)
class Identity:
    verdict: Verdict
    joint: str
    signature: Signature | None
    expected: Signature | None = None
    looks_like: tuple[str, ...] = ()     # the other joints whose calibration it holds

    @property
    def refused(self) -> bool:
        return self.verdict is Verdict.OTHER_JOINT

    def describe(self, source: Path | None = None) -> str:
        """One line: what its EEPROM holds and what that makes it."""
        if self.signature is None:
            return "Its EEPROM could not be read: identified by movement only."
        held = f"its EEPROM holds {self.signature.describe()}"
        if self.verdict is Verdict.NO_CALIBRATION:
            return (f"Its EEPROM holds {self.signature.describe()} (no calibration file to compare with: identified "
                    "by movement only).")
        where = f" in {source}" if source else ""
        if self.verdict is Verdict.THIS_JOINT:
            return f"Signature match: {held}, as the {self.joint}'s calibration{where} says."
        if self.verdict is Verdict.UNCALIBRATED:
            return (f"{held[0].upper()}{held[1:]}, which is no joint's calibration{where} (a new or uncalibrated "
                    "servo: run lerobot-calibrate after fix-ids).")
        looks = " or ".join(self.looks_like)
        theirs = self.expected.describe() if self.expected else "not in the file"
        return (f"it looks like the {looks}: {held}, the {looks}'s calibration{where}, not the {self.joint}'s "
                f"({theirs}).")


def identify(signature: Signature | None, joint: str, expected: Expected | None,
             candidates: tuple[str, ...] = ()) -> Identity:
    """Is a servo with this signature the `joint`'s? `candidates` (joints the diagnosis says it could be)
    narrow the name given when it holds several joints' calibration (five full-turn joints look alike)."""
    if signature is None or expected is None:
        return Identity(Verdict.NO_CALIBRATION, joint, signature)
    own = expected.joints.get(joint)
    matches = expected.looks_like(signature)
    if own is not None and own == signature:
        return Identity(Verdict.THIS_JOINT, joint, signature, own)
    others = tuple(name for name in matches if name != joint)
    if not others:
        return Identity(Verdict.UNCALIBRATED, joint, signature, own)
    narrowed = tuple(name for name in others if name in candidates) or others
    return Identity(Verdict.OTHER_JOINT, joint, signature, own, narrowed)
