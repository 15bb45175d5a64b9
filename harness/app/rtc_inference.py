"""`harness run --inference rtc`: LeRobot's Real-Time Chunking, its settings checked before anything is locked,
locked with the run, and held to on `--resume`.

The locked `inference` block then reads `{"engine": "rtc", "execution_horizon", "max_guidance_weight",
"attention_schedule", "queue_threshold"}`; the run's settings carry the same values for the policy factory, and
on a resume the locked ones replace them. Defaults are LeRobot's, capped for the policy's chunk size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessInputError, StaleRunError
from harness.models.run_request import FLAG_OF_FIELD
from harness.models.run_settings import InferenceEngine, RobotKind
from harness.policies.hub import checkpoint_folder

if TYPE_CHECKING:
    from harness.models.run_request import RunRequest
    from harness.models.scoresheet import Scoresheet

# `InferenceRequest` field (and argparse destination) -> flag
RTC_FLAGS = {name: FLAG_OF_FIELD[f"inference.{name}"]
             for name in ("execution_horizon", "max_guidance_weight", "attention_schedule", "queue_threshold")}


def _given(request: RunRequest) -> dict[str, Any]:
    asked = request.inference
    return {name: getattr(asked, name) for name in RTC_FLAGS if getattr(asked, name) is not None}


def _chunk_size(policy_ref: str) -> int | None:
    try:
        value = json.loads((Path(checkpoint_folder(policy_ref)) / "config.json").read_text()).get("chunk_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def rtc_record(request: RunRequest, engine: InferenceEngine, policy_ref: str,
               robot: RobotKind) -> dict[str, Any] | None:
    """RTC's settings for a new sheet run with `--inference rtc` (None for another engine), on either arm: the
    simulated one replays RTC's engine in simulated time, a real one runs it beside the paced loop in wall time
    (`policies.inference.rtc_wall`). Bad input is one line (exit 2). A policy without chunks or RTC support is
    refused when it loads, also before the lock."""
    given = _given(request)
    if engine is not InferenceEngine.RTC:
        if given:
            raise HarnessInputError(None, RTC_FLAGS[next(iter(given))], "only with --inference rtc")
        return None
    from harness.policies.inference.rtc_policy import RtcSettings

    chunk = _chunk_size(policy_ref)
    if chunk is None:   # no chunk_size: not a chunked policy; the loader names what it lacks
        return None
    settings = RtcSettings(**{**RtcSettings.defaults(chunk).record(), **given})
    settings.check(chunk)
    return settings.record()


def hold_to_locked_rtc(sheet: Scoresheet, request: RunRequest) -> None:
    """On a resume: asking for another RTC setting is refused (not asking keeps the locked ones: the policy is
    built from the locked block, `Scoresheet.inference`)."""
    locked = sheet.locked.inference
    given = _given(request)
    if locked is None or locked.engine is not InferenceEngine.RTC:
        if given:
            raise StaleRunError(sheet.path, "locked.inference", f"this run's inference engine is "
                                                                f"{sheet.inference_engine}, not rtc; start a new "
                                                                "scoresheet")
        return
    for name, value in given.items():
        if value != getattr(locked, name):
            raise StaleRunError(sheet.path, "locked.inference", f"this run's {RTC_FLAGS[name]} is "
                                                                f"{getattr(locked, name)}, not {value}; start a new "
                                                                "scoresheet to change it")
