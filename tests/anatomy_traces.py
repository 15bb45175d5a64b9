"""The committed learned-policy attempts (`tests/data/anatomy/*.npz`): joint traces with the judge's verdict.

Written by `benchmarks/anatomy_agreement.py --export` from real simulated runs of ACT and SmolVLA checkpoints
(issue 37). Each attempt is what a real arm's proposer would see of it (the joint positions each control
step, LeRobot units, and the gripper servo's load) beside the simulator judge's verdict, which is the truth
the proposal is held to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.models.protocol import JOINT_NAMES
from harness.sim.units import GRIPPER_LOAD_KEY

LOAD_COLUMN = f"obs.{GRIPPER_LOAD_KEY}"
GRIPPER_COMMAND_COLUMN = "action.gripper.pos"

FOLDER = Path(__file__).parent / "data" / "anatomy"


@dataclass(frozen=True)
class Attempt:
    policy: str                   # the file's stem: checkpoint and protocol (e.g. heldout-smolvla-3000)
    trial: int
    judge: dict[str, Any]         # the judge's verdict as recorded (label, true_placement_error_cm, ...)
    joints: list[dict[str, float]]
    loads: list[float] | None = None   # the gripper servo's load each step (None: the export lacks it)
    cube_start_cm: tuple[float, float] = (0.0, 0.0)   # the trial's planned offset from the trained spot
    gripper_commands: list[float] | None = None       # the gripper's command each step (the policy's action)

    @property
    def label(self) -> str:
        return str(self.judge["label"])


def attempts(policy: str | None = None, folder: Path = FOLDER) -> Iterator[Attempt]:
    """Every committed attempt, policy by policy (or one policy's); `folder`: another export's (the held-out
    runs `scripts/proposal_heldout` writes)."""
    for path in sorted(folder.glob("*.npz")):
        if policy is not None and path.stem != policy:
            continue
        data = np.load(path)
        columns = [str(c) for c in data["columns"]]
        index = [columns.index(f"obs.{name}.pos") for name in JOINT_NAMES]
        load = columns.index(LOAD_COLUMN) if LOAD_COLUMN in columns else None
        command = columns.index(GRIPPER_COMMAND_COLUMN)
        for entry in json.loads(str(data["meta"]))["attempts"]:
            rows = data[f"trial{entry['trial']}"]
            joints = [{name: float(row[i]) for name, i in zip(JOINT_NAMES, index, strict=True)} for row in rows]
            loads = [float(row[load]) for row in rows] if load is not None else None
            dx, dy = entry["cube_start_cm"]
            yield Attempt(path.stem, int(entry["trial"]), entry["judge"], joints, loads, (float(dx), float(dy)),
                          [float(row[command]) for row in rows])
