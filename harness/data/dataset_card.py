"""The dataset card (`README.md`) of a collected dataset: what is in it, in which units, how the
simulator maps to a real arm and what nobody has checked, what is missing, and the exact command
that trains on its train split."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.models.atomic import write_text_atomic

FEATURE_UNITS = {
    "observation.state": "joint positions: body joints in degrees (0 = mid-range), gripper 0..100 (0 = closed)",
    "action": "joint targets sent to the arm, same units as observation.state, clamped to joint limits",
    "observation.images.top": "RGB, fixed camera 0.75 m above the table looking down",
    "observation.images.wrist": "RGB, camera on the gripper (wrist_cam of the Menagerie model)",
    "timestamp": "seconds from the episode start (frame_index / fps)",
}
SMOLVLA_CAMERAS = ("camera1", "camera2", "camera3")


def rename_map_for_smolvla(video_keys: list[str]) -> dict[str, str]:
    """SmolVLA's base checkpoint expects camera1..camera3; map ours onto the first ones in order
    (top first, wrist second)."""
    order = sorted(video_keys, key=lambda k: (not k.endswith(".top"), k))
    return {key: f"observation.images.{cam}" for key, cam in zip(order, SMOLVLA_CAMERAS, strict=False)}


def train_commands(root: Path, train: list[int], video_keys: list[str]) -> dict[str, str]:
    """Copy-paste `lerobot-train` commands for the train split (local files, no hub)."""
    name = root.name
    common = [
        f"--dataset.repo_id=local/{name}",
        f"--dataset.root={root.resolve()}",
        f"--dataset.episodes={json.dumps(train, separators=(',', ':'))}",
        "--policy.push_to_hub=false",
        "--wandb.enable=false",
    ]
    act = ["lerobot-train", "--policy.type=act", *common, "--batch_size=8", "--steps=100000",
           f"--output_dir=outputs/train/{name}-act"]
    rename = rename_map_for_smolvla(video_keys)
    missing = len(SMOLVLA_CAMERAS) - len(rename)
    smolvla = ["lerobot-train", "--policy.path=lerobot/smolvla_base", *common,
               f"--rename_map={json.dumps(rename)}", *([f"--policy.empty_cameras={missing}"] if missing else []),
               "--batch_size=64", "--steps=20000", f"--output_dir=outputs/train/{name}-smolvla"]

    def fmt(args: list[str]) -> str:
        return " \\\n  ".join(shlex.quote(a) if any(c in a for c in "[]{}\" ") else a for a in args)

    return {"act": fmt(act), "smolvla": fmt(smolvla)}


def _features_table(info: dict[str, Any]) -> list[str]:
    rows = ["| feature | dtype | shape | meaning and units |", "|---|---|---|---|"]
    for key, ft in info["features"].items():
        if key in ("frame_index", "episode_index", "index", "task_index"):
            continue
        shape = "x".join(str(v) for v in ft["shape"])
        meaning = FEATURE_UNITS.get(key, "")
        if ft.get("names") and key in ("observation.state", "action"):
            meaning += f" ({', '.join(ft['names'])})"
        rows.append(f"| `{key}` | {ft['dtype']} | {shape} | {meaning} |")
    return rows


def render_card(root: Path, info: dict[str, Any], splits: dict[str, Any], selection: dict[str, Any],
                provenance: dict[str, Any]) -> str:
    totals = selection["totals"]
    proto = provenance["protocol"]
    video_keys = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    commands = train_commands(root, splits["train"], video_keys)
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(totals["rejected_by_reason"].items())) or "none"
    generator = proto["generator"] or {}
    positions = (f"{proto['start_positions']} start positions of protocol `{proto['name']}` "
                 f"({generator.get('kind', 'listed')}"
                 + (f", radius {generator['radius_cm']} cm, seed {generator['seed']}" if generator.get("kind") ==
                    "randomized" else "") + ")")
    bins = len(set(splits["bins"].values()))
    rate = totals["acceptance_rate"]
    lines = [
        f"# {root.name}",
        "",
        f"Simulated SO-101 pick-and-place demonstrations (\"{proto['task']}\"), LeRobot v3.0, "
        f"{info['total_episodes']} episodes, {info['total_frames']} frames at {info['fps']} Hz. "
        "Written by `harness collect` through LeRobot's own `LeRobotDataset` writer.",
        "",
        "## Contents",
        "",
        *_features_table(info),
        "",
        f"Every episode starts the arm at the protocol's start pose with the cube at one of {positions}; "
        f"the episodes cover {bins} start-position cells of {splits['bin_cm']} cm. "
        f"Policy: `{provenance['policy']['ref']}` ({provenance['policy']['fingerprint']}). "
        f"Each action is held for {provenance['simulator']['substeps_per_action']} physics steps "
        f"of {provenance['simulator']['physics_dt_s']:.6f} s.",
        "",
        "## Selection",
        "",
        f"{totals['attempts']} attempts, {totals['accepted']} accepted"
        + (f" ({100 * rate:.1f}%)" if rate is not None else "")
        + f", {totals['rejected']} rejected ({reasons}), {totals['interrupted']} lost to interruptions and redone. "
        f"Acceptance mode `{selection['accept']}`: the simulator judge's strict sequence (sustained two-jaw "
        "grasp, lift, release over the bowl, withdrawal, cube settled inside)"
        + (", and a clean release (no renewed jaw contact or closing after letting go)"
           if selection["accept"] == "clean-release" else "")
        + ". Thresholds are in `meta/provenance.json`; every attempt with its reason is in `meta/selection.json`.",
        "",
        "## Splits",
        "",
        f"`meta/splits.json`: {len(splits['train'])} train, {len(splits['val'])} validation episodes; "
        f"{splits['method']}. LeRobot's own `--dataset.eval_split` would hold out the *last* episodes "
        "instead; use `--dataset.episodes` as below.",
        "",
        "## Train",
        "",
        "ACT (local files, nothing pushed):",
        "",
        "```bash",
        commands["act"],
        "```",
        "",
        "SmolVLA's base checkpoint takes three cameras named `camera1..camera3`: the rename map feeds ours "
        "to the first ones and `--policy.empty_cameras` pads the rest with blank images:",
        "",
        "```bash",
        commands["smolvla"],
        "```",
        "",
        "Check the data first: `harness dataset validate " + str(root) + "`; where the cube starts in each "
        "episode: `harness dataset coverage " + str(root) + " --px-per-cm ...` (or `--calibration`).",
        "",
        "## Simulator to real arm",
        "",
        "- Joint units follow LeRobot's `so101_follower` with `use_degrees=True`: the body joints in degrees "
        "with 0 at the middle of the calibrated range (where the Menagerie model has its joint zero), the "
        "gripper 0..100 over the model's joint range. The mapping per joint is in `meta/provenance.json`.",
        "- **Unverified:** joint signs and the gripper's 0..100 range against a calibrated physical arm "
        "(the signs follow the so101-nexus adapter); camera intrinsics and poses (top camera at 0.75 m, "
        "wrist fovy 48.5 deg) against the real cameras; actuator gains, the gripper's 2.94 N m force cap, "
        "cube mass and friction.",
        "",
        "## Known gaps",
        "",
        "- Simulation only: rendered images (decimated meshes, no shadows, flat lighting, no motion blur, "
        "one cube colour, one table) will look different from a real camera.",
        f"- Scripted motions (`{provenance['policy']['ref']}`): one smooth, fast, collision-free plan per "
        "position, no hesitation, no recovery from a failed grasp, no human variability.",
        "- Fixed lighting and a fixed camera pose; one bowl position; cube yaw only as the protocol drew it.",
        "- Judge verdicts come from the true physical state, which a real recording never has.",
        "",
        "## Files",
        "",
        "- `meta/splits.json`: train and validation episode indices, with each episode's start-position cell.",
        "- `meta/selection.json`: accepted episodes (attempt, seed, start offset), rejected attempts with reasons, "
        "totals.",
        "- `meta/provenance.json`: protocol and its hash, seeds, policy fingerprint, judge thresholds, units, "
        "simulator and software versions.",
        "",
    ]
    return "\n".join(lines)


def write_card(root: Path, splits: dict[str, Any], selection: dict[str, Any], provenance: dict[str, Any]) -> Path:
    info = json.loads((root / "meta" / "info.json").read_text())
    path = root / "README.md"
    write_text_atomic(path, render_card(root, info, splits, selection, provenance))
    return path
