"""The dataset card (`README.md`) of a collected dataset: what is in it, in which units, how the
simulator maps to a real arm and what nobody has checked, what is missing, and the exact command
that trains on its train split."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from harness.storage.atomic import write_text_atomic

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


# The CPU recipe (scripts/train_reference, measured in docs/results.md): a small ACT at the size a
# 2-core machine trains in about two hours. A GPU takes LeRobot's default ACT size.
ACT_CPU_SIZE = ("--policy.dim_model=256", "--policy.n_heads=8", "--policy.dim_feedforward=1024",
                "--policy.n_encoder_layers=2", "--policy.n_decoder_layers=1", "--policy.n_vae_encoder_layers=2",
                "--policy.chunk_size=30", "--policy.n_action_steps=10", "--policy.optimizer_lr=1e-4",
                "--policy.optimizer_lr_backbone=1e-4")
IMAGENET_RESNET18 = "ResNet18_Weights.IMAGENET1K_V1"
RESNET18_FILE = "resnet18-f37072fd.pth"  # torchvision's file name for IMAGENET1K_V1


def lerobot_train_path() -> str:
    """`lerobot-train` beside the Python running harness (the same virtual environment), so the
    card's command works without activating it; the bare name where there is none."""
    beside = Path(sys.executable).with_name("lerobot-train")
    return str(beside) if beside.is_file() else "lerobot-train"


def imagenet_weights_cached() -> Path | None:
    """Where torchvision keeps the ImageNet ResNet18 weights, if they are there: ACT downloads them
    at start otherwise, which fails on a machine without network."""
    import torch.hub

    path = Path(torch.hub.get_dir()) / "checkpoints" / RESNET18_FILE
    return path if path.is_file() else None


def train_commands(root: Path, train: list[int], video_keys: list[str], *, trainer: str = "lerobot-train",
                   imagenet_cached: bool = False) -> dict[str, str]:
    """Copy-paste `lerobot-train` commands for the train split (local files, no hub, no download
    unless the backbone weights are cached): ACT on a CPU (one torch thread per process: torch's
    default oversubscribes a small machine and made a step 3x slower), ACT on a GPU, SmolVLA."""
    name = root.name
    common = [
        f"--dataset.repo_id=local/{name}",
        f"--dataset.root={root.resolve()}",
        f"--dataset.episodes={json.dumps(train, separators=(',', ':'))}",
        "--dataset.video_backend=pyav",
        "--policy.push_to_hub=false",
        "--wandb.enable=false",
    ]
    backbone = f"--policy.pretrained_backbone_weights={IMAGENET_RESNET18 if imagenet_cached else 'null'}"
    act_cpu = [trainer, "--policy.type=act", *common,
               "--policy.device=cpu", backbone, *ACT_CPU_SIZE, "--batch_size=8", "--steps=10000",
               "--save_freq=500", "--log_freq=25", "--num_workers=1", "--seed=1000",
               f"--output_dir=outputs/train/{name}-act"]
    act_gpu = [trainer, "--policy.type=act", *common, "--policy.device=cuda", backbone,
               "--policy.chunk_size=30", "--policy.n_action_steps=10", "--batch_size=32", "--steps=20000",
               "--save_freq=2000", "--num_workers=4", "--seed=1000", f"--output_dir=outputs/train/{name}-act-gpu"]
    rename = rename_map_for_smolvla(video_keys)
    missing = len(SMOLVLA_CAMERAS) - len(rename)
    smolvla = [trainer, "--policy.path=lerobot/smolvla_base", *common, "--policy.device=cuda",
               f"--rename_map={json.dumps(rename)}", *([f"--policy.empty_cameras={missing}"] if missing else []),
               "--batch_size=64", "--steps=20000", f"--output_dir=outputs/train/{name}-smolvla"]

    def fmt(args: list[str]) -> str:
        return " \\\n  ".join(shlex.quote(a) if any(c in a for c in "[]{}\" ") else a for a in args)

    return {"act": "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 " + fmt(act_cpu), "act_gpu": fmt(act_gpu),
            "smolvla": fmt(smolvla)}


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
    trainer = lerobot_train_path()
    cached = imagenet_weights_cached()
    commands = train_commands(root, splits["train"], video_keys, trainer=trainer, imagenet_cached=cached is not None)
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
        "Local files, nothing pushed, nothing downloaded"
        + (" (the ImageNet ResNet18 weights are cached here)" if cached else "") + ". `lerobot-train` is "
        + ("the one in the virtual environment that wrote this card" if trainer != "lerobot-train" else
           "LeRobot's, in the virtual environment that has harness (activate it first)")
        + "; the video decoder is pyav, which reads what the writer wrote without torchcodec's FFmpeg libraries.",
        "",
        "ACT on a CPU, the recipe sized for two cores (`scripts/train_reference`; seconds per step and "
        "success per checkpoint in the repository's docs/results.md): a small ACT, one torch thread per "
        "process, checkpoints every 500 steps to score with `harness sweep`:",
        "",
        "```bash",
        commands["act"],
        "```",
        "",
        "ACT on a GPU (LeRobot's default model size):",
        "",
        "```bash",
        commands["act_gpu"],
        "```",
        "",
        ("The backbone starts from the cached ImageNet weights (" + str(cached) + ")."
         if cached else
         "The backbone starts from random weights (`--policy.pretrained_backbone_weights=null`): the ImageNet "
         "ones are not cached here and a machine without network cannot download them. Where they are cached "
         f"(torchvision keeps them as `{RESNET18_FILE}` under `$TORCH_HOME/hub/checkpoints`, default "
         "`~/.cache/torch`; one run with network fetches them), use "
         f"`--policy.pretrained_backbone_weights={IMAGENET_RESNET18}`."),
        "",
        "SmolVLA (a GPU; `lerobot/smolvla_base` comes from the hub unless it is in the Hugging Face cache) "
        "takes three cameras named `camera1..camera3`: the rename map feeds ours "
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
        f"- Render profile `{_profile(provenance)}`: the frames were drawn from the "
        f"{provenance['recording'].get('meshes', 'full')} visual meshes. `harness run` states it when a policy "
        "trained here is evaluated with another profile (`--render-profile`).",
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


def _profile(provenance: dict[str, Any]) -> str:
    return provenance.get("recording", {}).get("render_profile", "full-v1")


def write_card(root: Path, splits: dict[str, Any], selection: dict[str, Any], provenance: dict[str, Any]) -> Path:
    info = json.loads((root / "meta" / "info.json").read_text())
    path = root / "README.md"
    write_text_atomic(path, render_card(root, info, splits, selection, provenance))
    return path
