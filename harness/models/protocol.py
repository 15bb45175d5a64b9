"""Pre-registered evaluation protocols: what will be run, decided before any trial.

A protocol is a YAML file validated strictly (unknown keys are errors) so that a
typo cannot silently change what gets measured.
"""

from __future__ import annotations

import hashlib
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    ValidationError,
    model_serializer,
    model_validator,
)

from harness.errors import HarnessInputError
from harness.models.graded import PrimaryOutcome
from harness.models.run_settings import RobotKind
from harness.models.taxonomy import TAXONOMY, taxonomy_version
from harness.stats.sequential import MAX_PAIRS_SEARCHED
from harness.storage.safe_yaml import decode_text, load_yaml_text, read_limited

JOINT_NAMES: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
    "gripper",
)



# Sane ranges: far beyond any SO-101 table top, yet small enough that a typo (1e308, 100k trials)
# is refused by `protocol check` instead of failing, or silently succeeding, mid-run.
MAX_TRIALS = 10_000
PROTOCOL_MAX_BYTES = 8 * 1024 * 1024
MAX_TABLE_CM = 200.0
MAX_TRIAL_INDEX = 1_000_000
# Numbers as the file wrote them: pydantic's lax mode reads `true` as 1 and "20" as twenty, so a slip in a
# protocol (`max_trials_per_arm: true`) would lock a different experiment than was meant; a whole number still
# stands for a real one.
Real = Annotated[float, Strict()]
Whole = Annotated[int, Strict()]
Cm = Annotated[Real, Field(ge=-MAX_TABLE_CM, le=MAX_TABLE_CM)]
PositiveCm = Annotated[Real, Field(gt=0, le=MAX_TABLE_CM)]
# LeRobot so101_follower units: degrees for the body joints, 0..100 for the gripper.
JointValue = Annotated[Real, Field(ge=-360.0, le=360.0)]


class _Strict(BaseModel):
    """Unknown keys, NaN and infinity are errors: a typo must not change what gets measured."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Workspace(_Strict):
    """Where the cube may be put: an annulus in front of the arm, clear of the bowl."""

    min_reach_cm: PositiveCm = 14.0
    max_reach_cm: PositiveCm = 30.0
    max_pan_deg: Annotated[Real, Field(gt=0, le=110)] = 60.0
    bowl_clearance_cm: Annotated[Real, Field(ge=0, le=MAX_TABLE_CM)] = 1.5

    @model_validator(mode="after")
    def _check(self) -> Workspace:
        if self.min_reach_cm >= self.max_reach_cm:
            raise ValueError("workspace: min_reach_cm must be less than max_reach_cm")
        return self


class Scene(_Strict):
    """Table-top layout in the robot base frame (x forward, y to the arm's left), in cm."""

    bowl_diameter_cm: PositiveCm = 11.5
    cube_edge_cm: PositiveCm = 3.0
    trained_cube_xy_cm: tuple[Cm, Cm] = (22.0, -5.0)
    bowl_xy_cm: tuple[Cm, Cm] = (18.0, 14.0)
    workspace: Workspace = Workspace()


class Trial(_Strict):
    index: Annotated[Whole, Field(ge=1, le=MAX_TRIAL_INDEX)]
    dx_cm: Cm
    dy_cm: Cm
    yaw_deg: Annotated[Real, Field(ge=-180.0, le=180.0)] = 0.0


class Generator(_Strict):
    """How a randomized trial list was made, so anyone can regenerate it."""

    kind: Literal["randomized", "fixed"]
    n: Annotated[Whole, Field(ge=1, le=MAX_TRIALS)]
    radius_cm: Annotated[Real, Field(ge=0, le=MAX_TABLE_CM)] = 0.0
    min_spacing_cm: Annotated[Real, Field(ge=0, le=MAX_TABLE_CM)] = 0.0
    seed: Annotated[Whole, Field(ge=0, lt=2**63)] = 0
    max_yaw_deg: Annotated[Real, Field(ge=0, le=180.0)] = 0.0


SEQUENTIAL_FIELDS = ("alpha", "power", "min_difference", "max_trials_per_arm", "comparisons", "secondary",
                     "primary_outcome")


class SecondaryOutcome(StrEnum):
    """An outcome a comparison pre-declares and reports per arm, which never drives its stopping."""

    PLACEMENT_ERROR_CM = "placement_error_cm"   # how far from the bowl's centre a successful placement landed


ArmCode = Annotated[str, Field(pattern=r"^[A-J]$")]


class StoppingRule(_Strict):
    """Decided before the run: when it may stop early. `fixed` runs every trial; `sequential` is a blind
    comparison's anytime-valid test (`harness.stats.sequential`, docs/comparisons.md)."""

    kind: Literal["fixed", "wilson_width", "sequential"] = "fixed"
    max_width: Annotated[Real, Field(gt=0, lt=1)] | None = None   # stop once the 95% interval is this narrow
    min_trials: Annotated[Whole, Field(ge=1)] = 20
    # sequential: error rates, the smallest difference in success rate worth detecting, the cap, and the
    # comparisons declared up front (pairs of arm codes; default every pair)
    alpha: Annotated[Real, Field(gt=0, le=0.5)] = 0.05
    power: Annotated[Real, Field(ge=0.5, lt=1)] = 0.8
    min_difference: Annotated[Real, Field(gt=0, lt=1)] | None = None
    max_trials_per_arm: Annotated[Whole, Field(ge=1, le=MAX_PAIRS_SEARCHED)] | None = None   # the checked limit
    comparisons: list[tuple[ArmCode, ArmCode]] | None = None
    # sequential: outcomes reported per arm (mean and interval), declared before the run; never a stop
    secondary: list[SecondaryOutcome] | None = None
    # sequential: what the test decides on, declared before the run (`harness.models.graded`): success (the
    # discordant-pair test), progress (0-4: how far each attempt got) or time_to_success (failures censored)
    primary_outcome: PrimaryOutcome = PrimaryOutcome.SUCCESS

    @model_validator(mode="after")
    def _check(self) -> StoppingRule:
        if self.kind == "wilson_width" and self.max_width is None:
            raise ValueError("stopping_rule.max_width: required for kind wilson_width")
        if self.kind == "sequential":
            for name in ("min_difference", "max_trials_per_arm"):
                if getattr(self, name) is None:
                    raise ValueError(f"stopping_rule.{name}: required for kind sequential")
            if self.comparisons == []:   # not "every pair", which is what leaving it out says
                raise ValueError("stopping_rule.comparisons: empty; list the pairs to compare, or leave it out to "
                                 "compare every pair of arms")
            declared: set[frozenset[str]] = set()
            for first, second in self.comparisons or []:
                if first == second:
                    raise ValueError(f"stopping_rule.comparisons: {first} against itself")
                if frozenset((first, second)) in declared:   # counted twice, it would spend alpha twice
                    raise ValueError(f"stopping_rule.comparisons: {first} against {second} is declared twice (in "
                                     "either order it is one comparison)")
                declared.add(frozenset((first, second)))
            if self.secondary is not None and len(set(self.secondary)) != len(self.secondary):
                raise ValueError("stopping_rule.secondary: an outcome is declared twice")
        elif any(name in self.model_fields_set for name in SEQUENTIAL_FIELDS):
            raise ValueError("stopping_rule: alpha, power, min_difference, max_trials_per_arm, comparisons, "
                             "secondary and primary_outcome are for kind sequential")
        return self

    @model_serializer(mode="wrap")
    def _omit_sequential(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A non-sequential rule stores, and hashes, exactly as before the sequential fields existed."""
        data = handler(self)
        if self.kind != "sequential":
            for name in SEQUENTIAL_FIELDS:
                data.pop(name, None)
        else:   # a comparison without them stores, and hashes, as before the fields existed
            if self.secondary is None:
                data.pop("secondary", None)
            if self.primary_outcome is PrimaryOutcome.SUCCESS:
                data.pop("primary_outcome", None)
        return data


class RunDefaults(_Strict):
    """Which robot, policy and cameras a plain `harness run PROTOCOL` uses; flags override."""

    robot: RobotKind | None = None
    policy: str | None = None
    policies: list[str] | None = None   # a blind comparison's policies, in arm order (two or more)

    @model_serializer(mode="wrap")
    def _omit_policies(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without a comparison's policies, the section writes exactly as before they existed."""
        data = handler(self)
        if data.get("policies") is None:
            data.pop("policies", None)
        return data
    port: str | None = None
    cameras: dict[str, str] = Field(default_factory=dict)
    rename_map: dict[str, str] = Field(default_factory=dict)


class Protocol(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    task: Annotated[str, Field(min_length=1, max_length=10_000)]
    scene: Scene = Scene()
    start_pose: dict[str, JointValue]
    fps: Annotated[Whole, Field(ge=1, le=200)] = 30
    episode_time_limit_s: Annotated[Real, Field(gt=0, le=3600)] = 20.0
    # a trial whose arm has not moved by then is flagged as stalled (the seed saw 11-51 s stalls)
    stall_limit_s: Annotated[Real, Field(gt=0, le=3600)] = 5.0
    success_definition: Annotated[str, Field(min_length=1, max_length=10_000)]
    failure_taxonomy: list[str] = Field(default_factory=lambda: list(TAXONOMY))
    generator: Generator | None = None
    stopping_rule: StoppingRule = StoppingRule()
    run: RunDefaults = RunDefaults()
    trials: Annotated[list[Trial], Field(min_length=1, max_length=MAX_TRIALS)]

    @property
    def taxonomy_version(self) -> int:
        """The version of the failure taxonomy this protocol pre-registered (`models.taxonomy`)."""
        return taxonomy_version(self.failure_taxonomy)

    @model_validator(mode="after")
    def _check(self) -> Protocol:
        if "gripper" in self.start_pose and not 0 <= self.start_pose["gripper"] <= 100:
            raise ValueError("start_pose.gripper: must be within 0..100 (percent open)")
        taxonomy_version(self.failure_taxonomy)   # a list some version of the harness wrote, or refused
        if set(self.start_pose) != set(JOINT_NAMES):
            missing = sorted(set(JOINT_NAMES) - set(self.start_pose))
            extra = sorted(set(self.start_pose) - set(JOINT_NAMES))
            raise ValueError(f"start_pose: missing joints {missing}, unknown joints {extra}")
        seen: set[int] = set()
        for position, trial in enumerate(self.trials):
            if trial.index in seen:
                raise ValueError(f"trials[{position}].index: duplicate trial index {trial.index}")
            seen.add(trial.index)
            problem = workspace_problem(self.scene, trial.dx_cm, trial.dy_cm)
            if problem:
                raise ValueError(f"trials[{position}]: offset ({trial.dx_cm}, {trial.dy_cm}) cm {problem}")
        return self

    def trial(self, index: int) -> Trial:
        for trial in self.trials:
            if trial.index == index:
                return trial
        raise KeyError(index)


def workspace_problem(scene: Scene, dx_cm: float, dy_cm: float) -> str | None:
    """Why a cube offset is not placeable, or None when it is."""
    x = scene.trained_cube_xy_cm[0] + dx_cm
    y = scene.trained_cube_xy_cm[1] + dy_cm
    ws = scene.workspace
    reach = math.hypot(x, y)
    if reach < ws.min_reach_cm or reach > ws.max_reach_cm:
        return f"puts the cube {reach:.1f} cm from the arm base, outside {ws.min_reach_cm}..{ws.max_reach_cm} cm"
    if abs(math.degrees(math.atan2(y, x))) > ws.max_pan_deg:
        return f"puts the cube beyond the +-{ws.max_pan_deg} deg pan range"
    to_bowl = math.hypot(x - scene.bowl_xy_cm[0], y - scene.bowl_xy_cm[1])
    keep_out = scene.bowl_diameter_cm / 2 + scene.cube_edge_cm * math.sqrt(0.5) + ws.bowl_clearance_cm
    if to_bowl < keep_out:
        return f"puts the cube {to_bowl:.1f} cm from the bowl centre (must be at least {keep_out:.1f})"
    return None


def _first_error_line(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in first["loc"]).replace(".[", "[")
    message = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    if first["type"] != "value_error" and isinstance(given, (bool, int, float, str)) and "input" in first:
        message += f" (given {given!r})"   # pydantic's type messages do not say what the file held
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    if loc and message.startswith((f"{loc}.", f"{loc}:")):   # a model validator's message names its own field
        loc = ""
    return f"{loc + ': ' if loc else ''}{message}{more}"


def parse_protocol(text: str, source: str | Path = "<protocol>") -> Protocol:
    data = load_yaml_text(text, source)
    if not isinstance(data, dict):
        raise HarnessInputError(source, None, "a protocol must be a YAML mapping")
    try:
        return Protocol.model_validate(data)
    except ValidationError as err:
        raise HarnessInputError(source, None, _first_error_line(Path(source), err)) from None


def load_protocol(path: str | Path) -> Protocol:
    path = Path(path)
    return parse_protocol(decode_text(read_limited(path, PROTOCOL_MAX_BYTES, what="protocol"), path), path)


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_generator_inputs(n: int, radius_cm: float, min_spacing_cm: float, seed: int, max_yaw_deg: float) -> None:
    """Flags of `protocol new`, refused by name before any drawing (a NaN radius would draw NaN offsets)."""
    if not 1 <= n <= MAX_TRIALS:
        raise HarnessInputError(None, "--n", f"{n} trials: must be 1..{MAX_TRIALS}")
    flags = (("--radius-cm", radius_cm, MAX_TABLE_CM), ("--min-spacing-cm", min_spacing_cm, MAX_TABLE_CM),
             ("--max-yaw-deg", max_yaw_deg, 180.0))
    for flag, value, high in flags:
        if not (math.isfinite(value) and 0 <= value <= high):
            raise HarnessInputError(None, flag, f"{value}: must be a number within 0..{high:g}")
    if not 0 <= seed < 2**63:
        raise HarnessInputError(None, "--seed", f"{seed}: must be within 0..2^63-1")


def generate_randomized_trials(
    scene: Scene, n: int, radius_cm: float, min_spacing_cm: float, seed: int, max_yaw_deg: float = 0.0
) -> list[Trial]:
    """Draw n offsets uniformly over a disc, rejecting unreachable or crowded ones.

    Rejection sampling with a seeded generator keeps the list reproducible and
    every offset inside the workspace; it fails loudly rather than silently
    returning fewer trials when the constraints cannot be met.
    """
    check_generator_inputs(n, radius_cm, min_spacing_cm, seed, max_yaw_deg)
    rng = np.random.default_rng(seed)
    chosen: list[tuple[float, float]] = []
    attempts = 0
    while len(chosen) < n:
        attempts += 1
        if attempts > 200_000:
            raise HarnessInputError(
                None, "--min-spacing-cm", f"cannot fit {n} offsets {min_spacing_cm} cm apart within {radius_cm} cm"
            )
        r = radius_cm * math.sqrt(rng.uniform())
        theta = rng.uniform(0, 2 * math.pi)
        dx, dy = round(r * math.cos(theta), 1), round(r * math.sin(theta), 1)
        if workspace_problem(scene, dx, dy):
            continue
        if any(math.hypot(dx - ox, dy - oy) < min_spacing_cm for ox, oy in chosen):
            continue
        chosen.append((dx, dy))
    yaws = rng.uniform(-max_yaw_deg, max_yaw_deg, size=n) if max_yaw_deg > 0 else np.zeros(n)
    return [
        Trial(index=i + 1, dx_cm=dx, dy_cm=dy, yaw_deg=round(float(yaw), 1))
        for i, ((dx, dy), yaw) in enumerate(zip(chosen, yaws, strict=True))
    ]


def protocol_to_yaml(protocol: Protocol) -> str:
    data = protocol.model_dump(mode="json", exclude_defaults=False)
    data["trials"] = [
        {"index": t.index, "dx_cm": t.dx_cm, "dy_cm": t.dy_cm, "yaw_deg": t.yaw_deg} for t in protocol.trials
    ]
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110)
