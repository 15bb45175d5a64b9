"""The files a collected dataset carries besides LeRobot's own: `meta/splits.json`,
`meta/selection.json` and `meta/provenance.json`. All are derived from the collection journal,
so they always agree with the episodes present."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.data.collector import CollectSettings
from harness.models.protocol import JOINT_NAMES
from harness.models.protocol import Protocol as EvalProtocol
from harness.storage.atomic import write_text_atomic

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BIN_CM = 2.0
HOLD_OUT_EVERY = 10


def start_bin(dx_cm: float, dy_cm: float, bin_cm: float = BIN_CM) -> str:
    """The grid cell (bin_cm square, centred on the trained position) a start offset falls in."""
    return f"{math.floor(dx_cm / bin_cm + 0.5):+d},{math.floor(dy_cm / bin_cm + 0.5):+d}"


def stratified_split(accepted: list[dict[str, Any]], every: int = HOLD_OUT_EVERY,
                     bin_cm: float = BIN_CM) -> dict[str, Any]:
    """Every tenth episode held out, counted in start-position order.

    Episodes are sorted by start bin and then by index, and every tenth of that order (the 1st,
    11th, ...) is validation: the held-out set spreads over the workspace the way the data do,
    instead of being the last tenth LeRobot's `--dataset.eval_split` would take.
    """
    ordered = sorted(accepted, key=lambda a: (start_bin(a["dx_cm"], a["dy_cm"], bin_cm), a["episode_index"]))
    val = sorted(a["episode_index"] for i, a in enumerate(ordered) if i % every == 0)
    train = sorted(a["episode_index"] for a in accepted if a["episode_index"] not in set(val))
    return {
        "train": train,
        "val": val,
        "method": f"every {every}th episode in (start-position bin, episode index) order; bins {bin_cm} cm",
        "bin_cm": bin_cm,
        "bins": {str(a["episode_index"]): start_bin(a["dx_cm"], a["dy_cm"], bin_cm) for a in accepted},
    }


def selection_record(summary: dict[str, Any], settings: CollectSettings) -> dict[str, Any]:
    accepted, rejected = summary["accepted"], summary["rejected"]
    decided = len(accepted) + len(rejected)
    return {
        "accept": settings.accept.value,
        "accepted": [{k: a[k] for k in ("episode_index", "attempt", "trial_index", "seed", "dx_cm", "dy_cm",
                                        "yaw_deg", "placement_error_cm", "frames")} for a in accepted],
        "rejected": [{k: a[k] for k in ("attempt", "trial_index", "seed", "dx_cm", "dy_cm", "yaw_deg", "reason",
                                        "label", "events")} for a in rejected],
        "interrupted_attempts": summary["interrupted_attempts"],
        "totals": {
            "attempts": summary["attempts_total"],
            "accepted": len(accepted),
            "rejected": len(rejected),
            "interrupted": len(summary["interrupted_attempts"]),
            "rejected_by_reason": summary["rejected_by_reason"],
            "acceptance_rate": round(len(accepted) / decided, 4) if decided else None,
        },
    }


def units_mapping() -> dict[str, Any]:
    from harness.sim.units import GRIPPER_CLOSED_RAD, GRIPPER_OPEN_RAD, JOINT_LIMITS

    joints = {}
    for name in JOINT_NAMES:
        low, high = JOINT_LIMITS[name]
        if name == "gripper":
            joints[name] = {"dataset_unit": "percent of the calibrated range, 0 = closed, 100 = open",
                            "sim": f"joint angle rad = {GRIPPER_CLOSED_RAD} + value/100 * "
                                   f"({GRIPPER_OPEN_RAD} - ({GRIPPER_CLOSED_RAD}))",
                            "limits": [low, high]}
        else:
            joints[name] = {"dataset_unit": "degrees, 0 at the middle of the calibrated range",
                            "sim": "joint angle rad = radians(value); the model's zero is mid-range",
                            "limits": [low, high]}
    return {"convention": "LeRobot so101_follower with use_degrees=True", "joints": joints,
            "verified_on_hardware": False}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance_record(protocol: EvalProtocol, protocol_path: Path, settings: CollectSettings, world: Any,
                      policy_code: Path | None) -> dict[str, Any]:
    from harness.sim.scene import PHYSICS_DT

    policy: dict[str, Any] = {"ref": settings.policy_ref, "fingerprint": settings.policy_fingerprint}
    if policy_code is not None:
        policy["code_sha256"] = hashlib.sha256(policy_code.read_bytes()).hexdigest()
        policy["code"] = str(policy_code.relative_to(PACKAGE_ROOT.parent))
    return {
        "protocol": {
            "name": protocol.name, "file": str(protocol_path), "sha256": settings.protocol_sha256,
            "control_fps": protocol.fps, "episode_time_limit_s": protocol.episode_time_limit_s,
            "task": protocol.task, "start_pose": protocol.start_pose,
            "scene": protocol.scene.model_dump(mode="json"),
            "generator": protocol.generator.model_dump(mode="json") if protocol.generator else None,
            "start_positions": len(protocol.trials),
        },
        "seeds": {"base": settings.seed, "per_attempt": "seed * 1000003 + attempt (see selection.json)"},
        "policy": policy,
        "acceptance": {"mode": settings.accept.value, "after_verdict_s": settings.after_verdict_s},
        "judge_thresholds": asdict(world.judge.t),
        "units": units_mapping(),
        "recording": {"cameras": list(settings.cameras), "image_size_wh": list(settings.image_size),
                      "render_profile": settings.render_profile.value,
                      "meshes": settings.render_profile.detail_for(*settings.image_size).value,
                      "control_fps": settings.fps, "action": "joint targets sent to the arm (after clamping)",
                      "action_hold": f"each action is held for {world.substeps} physics steps of "
                                     f"{PHYSICS_DT:.6f} s ({round(1 / PHYSICS_DT)} physics steps per second)"},
        "simulator": {"mujoco": _version("mujoco"), "physics_dt_s": PHYSICS_DT, "substeps_per_action": world.substeps,
                      "arm_model": f"MuJoCo Menagerie robotstudio_so101 via so101-nexus {_version('so101-nexus')}",
                      "geometry": asdict(world.geometry)},
        "software": {"harness": _version("harness"), "harness_commit": _git_commit(),
                     "lerobot": _version("lerobot"), "torch": _version("torch")},
    }


def write_meta(root: Path, name: str, record: dict[str, Any]) -> Path:
    path = root / "meta" / name
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def write_collection_files(root: Path, summary: dict[str, Any], settings: CollectSettings,
                           provenance: dict[str, Any]) -> dict[str, Any]:
    """splits.json, selection.json, provenance.json and the README.md card, from the journal's
    summary of a finalized collection."""
    from harness.data.dataset_card import write_card

    splits = stratified_split(summary["accepted"])
    selection = selection_record(summary, settings)
    write_meta(root, "splits.json", splits)
    write_meta(root, "selection.json", selection)
    write_meta(root, "provenance.json", provenance)
    write_card(root, splits, selection, provenance)
    return {"splits": splits, "selection": selection}
