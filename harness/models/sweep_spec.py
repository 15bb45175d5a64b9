"""A sweep: every checkpoint x protocol x condition, each cell an ordinary locked scoresheet.

The sweep file is read strictly (unknown keys refused) and expanded into cells before anything
runs, so a typo in the 40th checkpoint path is reported before the first cell takes an hour.
A `checkpoints` entry may be a LeRobot training output folder (`lerobot-train --output_dir`): it
stands for every `checkpoints/<step>/pretrained_model` inside it, in step order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import HarnessInputError
from harness.models.checkpoint import CHECKPOINTS_DIR, PRETRAINED_DIR, checkpoint_labels, hub_ref
from harness.models.protocol import Whole
from harness.models.run_request import RUN_FLAGS
from harness.models.run_settings import BuiltinPolicy
from harness.storage.safe_yaml import decode_text, load_yaml_text, read_limited

SWEEP_MAX_BYTES = 256 * 1024
# What the sweep itself decides for every cell: which protocol, checkpoint, robot and scoresheet, and where the
# trials run. Every other `harness run` setting (`models.run_request.RUN_FLAGS`, by its argparse destination:
# `latency_ms` is --latency-ms) a condition may vary, so a flag added to `harness run` is a condition at once.
# `latency: measured` is the policy's own measured time; `inference: rtc` LeRobot's Real-Time Chunking (a
# checkpoint without RTC support: the cell is not applicable); `policy_server: local` LeRobot's policy server,
# started by the sweep on loopback for the cell (or HOST:PORT of one you run).
SWEEP_OWNS = ("protocol", "policy", "robot", "scoresheet", "runs_dir", "resume", "headless", "workers",
              "no_driver_worker", "address", "ray_dashboard", "no_blind")
CONDITION_KEYS = tuple(dest for dest in RUN_FLAGS if dest not in SWEEP_OWNS)
LOCAL_SERVER = "local"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class OfflineEvalSpec(BaseModel):
    """Held-out episodes of a dataset on which every checkpoint's offline action accuracy is measured."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    episodes: list[Whole] | None = None       # default: every tenth episode
    frames: Whole = Field(default=200, ge=1, le=100_000)


def _one_empty_condition() -> list[dict[str, Any]]:
    """No conditions given: one cell per checkpoint and protocol, with the run's defaults."""
    return [{}]


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    checkpoints: list[str] = Field(min_length=1, max_length=1000)
    protocols: list[str] = Field(min_length=1, max_length=100)
    conditions: list[dict[str, Any]] = Field(default_factory=_one_empty_condition, min_length=1, max_length=100)
    baseline: str | None = None              # a checkpoint label; default the first checkpoint
    workers: Whole = Field(default=1, ge=1, le=256)
    offline_eval: OfflineEvalSpec | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be letters, digits, '-', '_' or '.', at most 64, not starting with a symbol")
        return value

    @field_validator("conditions")
    @classmethod
    def _known_settings(cls, conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for condition in conditions:
            unknown = sorted(set(condition) - set(CONDITION_KEYS))
            if unknown:
                raise ValueError(f"unknown setting {unknown[0]!r} (a condition may set {', '.join(CONDITION_KEYS)})")
            for key, value in condition.items():
                if isinstance(value, float) and value != value:
                    raise ValueError(f"{key}: NaN is not a setting")
            if "latency" in condition and condition["latency"] != "measured":
                raise ValueError(f"latency: {condition['latency']!r} is not 'measured' (latency_ms: N for a fixed one)")
            if "inference" in condition and condition["inference"] not in ("sync", "rtc"):
                raise ValueError(f"inference: {condition['inference']!r} is not sync or rtc")
            if "policy_server" in condition and not isinstance(condition["policy_server"], str):
                raise ValueError("policy_server: 'local' or HOST:PORT")
            for key, value in condition.items():
                _check_yaml_type(key, value)
        return conditions


def _check_yaml_type(key: str, value: Any) -> None:
    """A condition's value has the YAML type its flag's field has: a yes/no flag true or false, a number a
    number, anything else text (a list of text for a repeated flag, a mapping for a JSON one). Why: the flags'
    parsers read command-line text, so `no_video: "yes"` or `latency_ms: "50"` would pass as if a person typed
    them, and `workers: true` as 1; a sweep file says what it means, as a protocol does (strict numbers)."""
    if value is None:
        return
    spec = RUN_FLAGS[key]
    if spec.switch:
        ok, wanted = isinstance(value, bool), "true or false"
    elif spec.type is int:
        ok, wanted = isinstance(value, int) and not isinstance(value, bool), "a whole number"
    elif spec.type is float:
        ok, wanted = isinstance(value, int | float) and not isinstance(value, bool), "a number"
    elif spec.repeat:
        items = value if isinstance(value, list) else [value]
        ok, wanted = all(isinstance(v, str) for v in items), "text or a list of text"
    else:   # text as on the command line; a mapping where the flag takes JSON (`rename_map`)
        ok, wanted = isinstance(value, str | dict), "text"
    if not ok:
        raise ValueError(f"{key}: {value!r} is not {wanted}")


class NotApplicable(StrEnum):
    """Why a condition does not apply to a checkpoint: its cell is reported so, not run, not an error."""

    NO_RTC = "no Real-Time Chunking in this policy (LeRobot's supports_rtc() is False)"
    BUILT_IN = "a built-in policy runs in the harness: no LeRobot inference engine or policy server"


@dataclass(frozen=True)
class Checkpoint:
    ref: str          # what `harness run --policy` gets
    label: str        # the training run and step (or the built-in's name)


@dataclass(frozen=True)
class Cell:
    checkpoint: Checkpoint
    protocol: Path
    condition: dict[str, Any]
    condition_label: str

    @property
    def local_server(self) -> bool:
        """The sweep starts LeRobot's policy server for this cell."""
        return self.condition.get("policy_server") == LOCAL_SERVER

    @property
    def key(self) -> str:
        """The scoresheet's file stem: protocol, checkpoint and condition, in file-name characters."""
        raw = f"{self.protocol.stem}-{self.checkpoint.label}" + (f"-{self.condition_label}"
                                                                  if self.condition_label != "default" else "")
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in raw)


def condition_label(condition: dict[str, Any]) -> str:
    if not condition:
        return "default"
    return ",".join(f"{key}={value}" for key, value in sorted(condition.items()))


def condition_settings(condition: dict[str, Any], server: str | None = None) -> dict[str, Any]:
    """The `harness run` settings a condition stands for, by flag destination (`RunRequest.with_flags` takes
    them); `server`: the address of the policy server the sweep started for a `policy_server: local` cell."""
    settings = dict(condition)
    if settings.get("policy_server") == LOCAL_SERVER:
        if server is None:
            del settings["policy_server"]
        else:
            settings["policy_server"] = server
    return settings


def expand_checkpoints(entries: list[str], base: Path) -> list[Checkpoint]:
    """Built-ins as they are; a training output folder as all its checkpoints; a policy folder as itself."""
    refs: list[str] = []
    for entry in entries:
        path = (base / entry) if not Path(entry).is_absolute() else Path(entry)
        if BuiltinPolicy.named(entry) is not None or (not path.exists() and hub_ref(entry) is not None):
            refs.append(entry)   # a built-in, or a Hub id (ORG/NAME[@REVISION]) resolved when its cell runs
            continue
        if (path / CHECKPOINTS_DIR).is_dir():
            steps = sorted(p for p in (path / CHECKPOINTS_DIR).iterdir()
                           if p.name.isdigit() and (p / PRETRAINED_DIR).is_dir())
            if not steps:
                raise HarnessInputError(path, "checkpoints", "a training folder with no checkpoints/<step>/"
                                                             "pretrained_model inside")
            refs += [str(step / PRETRAINED_DIR) for step in steps]
        elif (path / "config.json").is_file():
            refs.append(str(path))
        else:
            raise HarnessInputError(path, "checkpoints", "neither a built-in policy, a LeRobot pretrained folder "
                                                         "(config.json), a training output folder (checkpoints/) "
                                                         "nor a Hub id (ORG/NAME[@REVISION])")
    if len(set(refs)) != len(refs):
        raise HarnessInputError(None, "checkpoints", "a checkpoint is named twice")
    labels = checkpoint_labels(refs)
    return [Checkpoint(ref, label) for ref, label in zip(refs, labels, strict=True)]


@dataclass(frozen=True)
class Sweep:
    spec: SweepSpec
    path: Path
    checkpoints: list[Checkpoint]
    cells: list[Cell]
    scoresheets_dir: Path = Path("scoresheets")

    @property
    def folder(self) -> Path:
        return self.scoresheets_dir / self.spec.name

    @property
    def baseline(self) -> Checkpoint:
        wanted = self.spec.baseline
        for checkpoint in self.checkpoints:
            if wanted in (None, checkpoint.label, checkpoint.ref):
                return checkpoint
        raise HarnessInputError(self.path, "baseline", f"'{wanted}' is not one of the checkpoints "
                                                       f"({', '.join(c.label for c in self.checkpoints)})")


def load_sweep(path: str | Path, scoresheets_dir: Path = Path("scoresheets")) -> Sweep:
    """Read, validate and expand a sweep file; every path is checked here, before anything runs."""
    path = Path(path)
    data = load_yaml_text(decode_text(read_limited(path, SWEEP_MAX_BYTES, what="sweep file"), path), path)
    if not isinstance(data, dict):
        raise HarnessInputError(path, None, "a sweep must be a YAML mapping")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HarnessInputError(path, where or None, first["msg"].removeprefix("Value error, ")) from None
    base = path.parent
    checkpoints = expand_checkpoints(spec.checkpoints, base)
    protocols = []
    for entry in spec.protocols:
        protocol = base / entry if not Path(entry).is_absolute() else Path(entry)
        if not protocol.is_file():
            raise HarnessInputError(path, "protocols", f"{protocol}: no such file")
        protocols.append(protocol)
    if len({p.stem for p in protocols}) != len(protocols):
        raise HarnessInputError(path, "protocols", "two protocols share a file name; scoresheets are named by it")
    cells = [Cell(checkpoint, protocol, condition, condition_label(condition))
             for protocol in protocols for condition in spec.conditions for checkpoint in checkpoints]
    sweep = Sweep(spec, path, checkpoints, cells, scoresheets_dir)
    _ = sweep.baseline   # an unknown baseline is refused now, not after the sweep
    return sweep
