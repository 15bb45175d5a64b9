"""Dataset validation: throughput against plain PyAV decoding of the same files, and what
`harness dataset validate` and `lerobot-doctor check` each catch on the same defect set.

Run: .venv/bin/pip install --no-deps lerobot-doctor==0.2.0   (benchmark only)
     .venv/bin/python benchmarks/dataset_bench.py [--episodes 20 --frames 150]
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import av

from harness.data.validate import validate_dataset
from tests.generators.defects import DEFECTS
from tests.generators.synthetic import make_dataset


def plain_decode(path: str) -> int:
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        return sum(1 for _ in container.decode(stream))


def doctor(root: Path) -> tuple[set[str], float]:
    t0 = time.perf_counter()
    out = subprocess.run([str(Path(sys.executable).with_name("lerobot-doctor")), "check", str(root), "--json"],
                         capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - t0
    try:
        checks = json.loads(out.stdout)["checks"]
    except (json.JSONDecodeError, KeyError):
        return {"(crashed)"}, elapsed
    flagged = {f"{c['name']}: {m['message'][:60]}" for c in checks for m in c["messages"]
               if m["severity"] in ("FAIL", "ERROR")}
    return flagged, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--frames", type=int, default=150)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    clean = make_dataset(work / "clean", episodes=args.episodes, frames_per_episode=args.frames, size=(320, 240))
    videos = sorted(str(p) for p in clean.root.glob("videos/*/*/*.mp4"))

    print(f"{args.episodes} episodes x {args.frames} frames, 2 cameras 320x240 H.264, {len(videos)} video files\n")
    print("| decoder | camera-frames/s |\n|---|---|")
    t0 = time.perf_counter()
    frames = sum(plain_decode(v) for v in videos)
    plain1 = frames / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        frames = sum(pool.map(plain_decode, videos))
    plain2 = frames / (time.perf_counter() - t0)
    report = validate_dataset(clean.root, processes=2)
    ours = report.camera_frames_decoded / report.seconds
    print(f"| plain PyAV, 1 process | {plain1:.0f} |")
    print(f"| plain PyAV, 2 processes | {plain2:.0f} |")
    print(f"| harness dataset validate (all checks), 2 processes | {ours:.0f} ({100 * ours / plain2:.0f}% of plain) |")

    clean_flags, _ = doctor(clean.root)
    print("\n| defect | harness codes | harness s | lerobot-doctor FAIL messages (beyond the clean run) | doctor s |")
    print("|---|---|---|---|---|")
    for name, (damage, _) in DEFECTS.items():
        root = work / name
        shutil.copytree(clean.root, root)
        damage(root)
        t0 = time.perf_counter()
        codes = sorted({p.code for p in validate_dataset(root, processes=2).problems})
        ours_s = time.perf_counter() - t0
        flags, doctor_s = doctor(root)
        new = sorted(flags - clean_flags)
        print(f"| {name} | {', '.join(codes) or 'none'} | {ours_s:.2f} | {'; '.join(new) or 'nothing'} | "
              f"{doctor_s:.2f} |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
