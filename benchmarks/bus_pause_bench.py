"""Rehearsals under load: how many pause on the emulated servo bus ("no status packet") or on a stale frame.

Why: the emulated arm's servos must answer whatever the host does, as a desk's do. With the emulator answering
from a thread of the rehearsal's own process, a policy thread holding Python's interpreter lock while it waits
for a core held the servos' replies up, and LeRobot reported a servo missing (docs/benchmarks.md, "Twin fidelity").

Each try is the user's command in its own process, in a fresh folder: `harness rehearse --operator scripted` of a
2-trial protocol at the trained spot with a random-weight ACT of the reference's size (docs/results.md: dim 256,
chunk 30, 10 action steps, top and wrist cameras trained at 96x72), its cameras at `--camera-size`. A try that
exits 3 paused; the line says why. The load average is read before and after each try.

    .venv/bin/python benchmarks/bus_pause_bench.py --tries 3
    .venv/bin/python benchmarks/bus_pause_bench.py --tries 3 --repo /tmp/before   # another tree's code, same bench
    .venv/bin/python benchmarks/bus_pause_bench.py --tries 3 --env LP_NUM_THREADS=0
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from twin_bench import PROTOCOL

REPO = Path(__file__).resolve().parents[1]
TRIALS = "\n".join(f"- {{index: {i}, dx_cm: 0.0, dy_cm: 0.0, yaw_deg: 0.0}}" for i in (1, 2))
PAUSE_LINES = ("no status packet", "paused", "camera dropout", "frame", "Failed to")


def reference_sized_act(folder: Path) -> Path:
    """A random-weight ACT of the reference's size (its inference costs what the trained one's does)."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    from harness.models.defaults import DEFAULT_START_POSE
    from harness.models.protocol import JOINT_NAMES

    torch.manual_seed(0)
    cameras = ("observation.images.top", "observation.images.wrist")
    config = ACTConfig(
        input_features={"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,)),
                        **{key: PolicyFeature(type=FeatureType.VISUAL, shape=(3, 72, 96)) for key in cameras}},
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
        pretrained_backbone_weights=None, dim_model=256, n_heads=8, dim_feedforward=1024, n_encoder_layers=2,
        n_decoder_layers=1, n_vae_encoder_layers=2, chunk_size=30, n_action_steps=10, device="cpu")
    pose = torch.tensor([DEFAULT_START_POSE[n] for n in JOINT_NAMES], dtype=torch.float32)
    stats = {"observation.state": {"mean": pose, "std": torch.full((6,), 20.0)},
             "action": {"mean": pose, "std": torch.full((6,), 1.0)},
             **{key: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)} for key in cameras}}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    folder.mkdir(parents=True, exist_ok=True)
    ACTPolicy(config).save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder


def load() -> float:
    return os.getloadavg()[0]


def one_try(folder: Path, repo: Path, policy: Path, size: str, env_extra: dict[str, str]) -> dict[str, object]:
    for made in ("scoresheets", "runs", "rehearsals"):
        shutil.rmtree(folder / made, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(repo), **env_extra}
    before = load()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-P", "-m", "harness.cli", "rehearse", "bench.yaml", "--policy", str(policy),
                           "--operator", "scripted", "--camera-size", size], cwd=folder, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    text = done.stdout + done.stderr
    why = next((line.strip() for line in text.splitlines() if "no status packet" in line), None) or next(
        (line.strip() for line in text.splitlines()
         if done.returncode != 0 and any(mark in line for mark in PAUSE_LINES)), "")
    return {"code": done.returncode, "why": why[:160], "load": (before, load()), "wall": wall,
            "fps": _achieved_fps(folder), "tail": text[-1500:]}


def _achieved_fps(folder: Path) -> list[float]:
    """Each scored trial's achieved rate, as its scoresheet recorded it."""
    from harness.models.scoresheet import load_scoresheet

    sheets = sorted((folder / "scoresheets").glob("*.yaml")) if (folder / "scoresheets").is_dir() else []
    return [a.loop.achieved_fps for a in load_scoresheet(sheets[0]).scored_attempts()] if sheets else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--episode-s", type=float, default=10.0)
    parser.add_argument("--camera-size", default="640x480")
    parser.add_argument("--repo", type=Path, default=REPO, help="the harness tree whose code runs (default: this one)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the rehearsal's environment")
    parser.add_argument("--keep", type=Path, help="work here (kept) instead of a temporary folder")
    args = parser.parse_args()
    env_extra = dict(item.split("=", 1) for item in args.env)
    work = args.keep or Path(tempfile.mkdtemp(prefix="pause-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        policy = reference_sized_act(work / "act")
        protocol = PROTOCOL.format(episode=args.episode_s, trials=TRIALS).replace("twin-bench", "pause-bench")
        (work / "bench.yaml").write_text(protocol)
        rows = []
        for i in range(args.tries):
            row = one_try(work, args.repo.resolve(), policy, args.camera_size, env_extra)
            rows.append(row)
            before, after = row["load"]   # type: ignore[misc]
            print(f"try {i + 1}: exit {row['code']} load {before:.1f}->{after:.1f} wall {row['wall']:.0f} s "
                  f"fps {row['fps']} {row['why']}", file=sys.stderr, flush=True)
            if row["code"] not in (0, 3):
                print(row["tail"], file=sys.stderr, flush=True)
        paused = sum(row["code"] == 3 for row in rows)
        print(f"\ncode {args.repo}, env {env_extra or 'as is'}, camera {args.camera_size}, "
              f"episodes {args.episode_s:g} s\n")
        print("| try | exit | load before-after | wall (s) | achieved fps per trial | why it paused |")
        print("|---:|---:|---|---:|---|---|")
        for i, row in enumerate(rows):
            before, after = row["load"]   # type: ignore[misc]
            print(f"| {i + 1} | {row['code']} | {before:.1f}-{after:.1f} | {row['wall']:.0f} | "
                  f"{', '.join(f'{v:g}' for v in row['fps']) or '-'} | {row['why'] or '-'} |")   # type: ignore[attr-defined]
        print(f"\n{paused} of {len(rows)} paused")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
