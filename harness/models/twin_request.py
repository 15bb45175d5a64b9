"""`TwinRequest`: everything one `harness twin` asks for, typed and frozen.

`harness twin`'s handler builds it once from its command line (`from_flags`); `app.twin` plans and runs the twin
from it, and reads no parsed arguments. Its checks (a sheet that exists, `--extra` within range, the twin's own
`harness run` flags as `harness run` reads them) are `app.twin`'s, each one line naming the flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class TwinRequest(BaseModel):
    """One `harness twin`: the real sheet, where the twin's files go, and the run flags it passes on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    real_sheet: Path
    scoresheet: Path | None = None        # None: beside the real sheet, <name>-twin.yaml
    runs_dir: Path = Path("runs")
    twins_dir: Path = Path("twins")       # where the twin's protocol is written
    resume: bool = False
    # passed on to the twin's `harness run` as given, and read there as `harness run` reads them
    workers: int | Literal["auto"] = 1
    device: str | None = None
    max_trials: int | None = None
    extra: int | None = None              # trials at the protocol's own starts (the twin-assisted estimate)

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> TwinRequest:
        """From `harness twin`'s parsed values by argparse destination (`vars(args)`); keys that are not the
        command's own (the CLI's `command`, `func`, `verbose`) are left out."""
        return cls.model_validate({dest: value for dest, value in flags.items() if dest in cls.model_fields})
