"""`MeasureRequest`: everything one `harness measure` asks for, typed and frozen.

`harness measure`'s handler builds it once from its command line (`from_flags`), and a rehearsal (or a
benchmark) that measures the desk's photos builds one directly, so no argument list is built and parsed again.
Ranges are checked by
`app.measure_command`, which names the flag in its one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# argparse destinations whose field has another name (`json` is a method of pydantic's BaseModel)
_RENAMED = {"json": "as_json"}


class MeasureRequest(BaseModel):
    """One `harness measure`: the images or run folders, the bowl's geometry, how the rim is found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inputs: tuple[str, ...] = Field(min_length=1)   # runs/<name> folders or image files
    bowl_cm: float                           # outer rim diameter
    auto: bool = False                       # find the rim automatically (and in every frame)
    clicks: str | None = None                # "x1,y1 x2,y2": two opposite rim points
    click: bool = False                      # click the two rim points in a window
    calibrate_on: Path | None = None         # the image to calibrate on (None: the first frame)
    calibration: Path = Path("calibration/bowl_top.yaml")
    cube_cm: float = 3.0
    bowl_height_cm: float = 4.2
    rim_width_cm: float = 0.6
    floor_cm: float = 7.3
    fovy_deg: float | None = None
    camera: Path | None = None               # the lens calibration (None: camera_top.yaml beside calibration)
    max_uncertainty_cm: float = 2.0
    as_json: bool = False                    # one JSON record per image on stdout

    @property
    def calibrates(self) -> bool:
        """Whether this measure finds the rim afresh (and writes the calibration) rather than loading it."""
        return self.auto or self.clicks is not None or self.click

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> MeasureRequest:
        """From `harness measure`'s parsed values by argparse destination (`vars(args)`); keys that are not
        the command's own (the CLI's `command`, `func`, `verbose`) are left out."""
        fields = cls.model_fields
        data = {_RENAMED.get(dest, dest): value for dest, value in flags.items() if _RENAMED.get(dest, dest) in fields}
        return cls.model_validate(data)
