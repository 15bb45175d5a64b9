"""A declared reality gap: the named ways a rehearsed "real" arm differs from the simulated twin.

No real arm is here, so the twin's fidelity is proven against the emulated arm (`harness rehearse`), made to
differ from the twin in known ways. Each knob has the twin's value as its default; a rehearsal records the
knobs it changed in its scoresheet's locked `rehearsal` block, so a sheet says what it is (a rehearsal on the
emulated arm with this gap), never a real arm.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessInputError


class GapKnob(StrEnum):
    """The knobs, by the name `--gap NAME=VALUE` takes."""

    CUBE_FRICTION = "cube_friction"          # sliding friction coefficient of the cube (twin: 1.0)
    CUBE_MASS_G = "cube_mass_g"              # grams (twin: 30)
    SERVO_GAIN = "servo_gain"                # the servos' position gain and torque limit, times the twin's (1.0)
    SERVO_BACKLASH_DEG = "servo_backlash_deg"   # play in every joint's gears, degrees either way (twin: 0)
    CAMERA_TILT_DEG = "camera_tilt_deg"      # the top camera tilted toward +x, degrees (twin: 0)
    EXPOSURE = "exposure"                    # every light times this (twin: 1.0): a brighter or darker image
    TABLE_HEIGHT_MM = "table_height_mm"      # the table (cube and bowl on it) raised above the arm's base (twin: 0)


# (lowest, highest) a knob accepts: outside it the emulated arm is no longer an SO-101 on a table.
LIMITS: dict[GapKnob, tuple[float, float]] = {
    GapKnob.CUBE_FRICTION: (0.05, 3.0),
    GapKnob.CUBE_MASS_G: (5.0, 500.0),
    GapKnob.SERVO_GAIN: (0.1, 3.0),
    GapKnob.SERVO_BACKLASH_DEG: (0.0, 10.0),
    GapKnob.CAMERA_TILT_DEG: (-15.0, 15.0),
    GapKnob.EXPOSURE: (0.2, 3.0),
    # Lower: the arm on a riser, as on a desk where it is clamped to a block. Higher than 20 mm the table would
    # cut the shoulder's collision box (its lowest corner is about 24 mm above the base).
    GapKnob.TABLE_HEIGHT_MM: (-40.0, 20.0),
}


class RealityGap(BaseModel):
    """The knobs' values; defaults are the twin's (no gap)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cube_friction: float = Field(default=1.0, ge=LIMITS[GapKnob.CUBE_FRICTION][0],
                                 le=LIMITS[GapKnob.CUBE_FRICTION][1])
    cube_mass_g: float = Field(default=30.0, ge=LIMITS[GapKnob.CUBE_MASS_G][0], le=LIMITS[GapKnob.CUBE_MASS_G][1])
    servo_gain: float = Field(default=1.0, ge=LIMITS[GapKnob.SERVO_GAIN][0], le=LIMITS[GapKnob.SERVO_GAIN][1])
    servo_backlash_deg: float = Field(default=0.0, ge=LIMITS[GapKnob.SERVO_BACKLASH_DEG][0],
                                      le=LIMITS[GapKnob.SERVO_BACKLASH_DEG][1])
    camera_tilt_deg: float = Field(default=0.0, ge=LIMITS[GapKnob.CAMERA_TILT_DEG][0],
                                   le=LIMITS[GapKnob.CAMERA_TILT_DEG][1])
    exposure: float = Field(default=1.0, ge=LIMITS[GapKnob.EXPOSURE][0], le=LIMITS[GapKnob.EXPOSURE][1])
    table_height_mm: float = Field(default=0.0, ge=LIMITS[GapKnob.TABLE_HEIGHT_MM][0],
                                   le=LIMITS[GapKnob.TABLE_HEIGHT_MM][1])

    def declared(self) -> dict[str, float]:
        """The knobs set away from the twin's value, by name (what a sheet records)."""
        return {k: v for k, v in self.model_dump().items() if v != RealityGap.model_fields[k].default}

    @property
    def none(self) -> bool:
        return not self.declared()

    def describe(self) -> str:
        declared = self.declared()
        return ", ".join(f"{k}={v:g}" for k, v in declared.items()) if declared else "no gap"

    def slug(self) -> str:
        """For file names: `cube_friction0.3-exposure1.5`."""
        return "-".join(f"{k}{v:g}" for k, v in self.declared().items())


def parse_gap(items: list[str] | None) -> RealityGap:
    """`--gap NAME=VALUE` (repeatable) into a gap; bad input is one line naming the flag and the knob."""
    values: dict[str, Any] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep:
            raise HarnessInputError(None, "--gap", f"'{item}' is not NAME=VALUE (names: {', '.join(GapKnob)})")
        try:
            knob = GapKnob(name.strip())
        except ValueError:
            raise HarnessInputError(None, "--gap", f"'{name}' is not a gap knob (names: {', '.join(GapKnob)})") \
                from None
        try:
            value = float(text)
        except ValueError:
            raise HarnessInputError(None, f"--gap {knob}", f"'{text}' is not a number") from None
        low, high = LIMITS[knob]
        if not (math.isfinite(value) and low <= value <= high):
            raise HarnessInputError(None, f"--gap {knob}", f"{text}: must be within {low:g}..{high:g}")
        if knob.value in values:
            raise HarnessInputError(None, f"--gap {knob}", "given twice")
        values[knob.value] = value
    return RealityGap(**values)
