"""The tiny SmolVLA (`harness smolvla-backbone`) on CPU: per-inference latency, synchronous and with RTC's
guided inpainting, then 10 s of control at 30 Hz under a fixed latency, LeRobot's sync engine (the arm holds
while each chunk is computed: ceil(latency / period) held steps per chunk) against LeRobot's RTC replayed in
simulated time (`rtc_policy.SimTimeRtc`). Prints a Markdown table.

    PYTHONPATH=$PWD python benchmarks/smolvla_bench.py [--steps 300] [--latency-ms 100 251]

Last, the same steps paced in wall time with RTC on its inference thread (`rtc_wall.WallClockRtc`, as on a real
arm) at the tiny SmolVLA's own latency, against sync at that latency.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ["HF_HUB_OFFLINE"] = "1"


def main() -> None:
    from harness.models.defaults import DEFAULT_TASK
    from harness.models.protocol import JOINT_NAMES
    from harness.models.run_settings import InferenceEngine
    from harness.policies.lerobot_policy import LeRobotPolicy
    from harness.policies.smolvla_backbone import build_backbone, build_tiny_smolvla_base

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[100.0, 251.0])
    args = parser.parse_args()
    fps = 30
    with tempfile.TemporaryDirectory() as tmp:
        vlm = build_backbone(Path(tmp) / "vlm", [DEFAULT_TASK])
        base = build_tiny_smolvla_base(Path(tmp) / "base", vlm, camera_size=(128, 96))
        observation = {**{f"{n}.pos": 0.0 for n in JOINT_NAMES},
                       **{cam: np.zeros((96, 128, 3), dtype=np.uint8) for cam in ("camera1", "camera2", "camera3")}}
        sync = LeRobotPolicy(base, task=DEFAULT_TASK, device="cpu")
        times = []
        for _ in range(20):
            sync.reset(None)
            t0 = time.perf_counter()
            sync.select_action(observation)
            times.append(1000 * (time.perf_counter() - t0))
        rtc = LeRobotPolicy(base, task=DEFAULT_TASK, device="cpu", engine=InferenceEngine.RTC, fps=fps, latency_ms=None)
        engine = rtc._rtc
        assert engine is not None
        original, _ = engine.infer(observation, 0, None)
        guided = []
        for _ in range(20):
            t0 = time.perf_counter()
            engine.infer(observation, 3, original[5:])
            guided.append(1000 * (time.perf_counter() - t0))
        print(f"torch threads {sync.threads.torch_threads}; chunk 10, 4 denoising steps\n")
        print("| inference | p50 ms | max ms |\n|---|---|---|")
        print(f"| sync (new chunk) | {statistics.median(times):.1f} | {max(times):.1f} |")
        print(f"| RTC (guided by the previous chunk) | {statistics.median(guided):.1f} | {max(guided):.1f} |")
        sync.close()
        rtc.close()
        print(f"\n{args.steps} steps at {fps} Hz:\n")
        print("| latency ms | engine | chunk switches | underruns (arm held) | RTC delay told (max) |")
        print("|---|---|---|---|---|")
        for latency in args.latency_ms:
            held = math.ceil(latency / 1000 * fps - 1e-9)
            chunks = math.ceil(args.steps / (10 + held))
            print(f"| {latency:g} | sync | {chunks} | {chunks * held} | - |")
            policy = LeRobotPolicy(base, task=DEFAULT_TASK, device="cpu", engine=InferenceEngine.RTC, fps=fps,
                                   latency_ms=latency)
            policy.reset(None)
            for _ in range(args.steps):
                policy.select_action(observation)
            stats = policy.inference_stats()
            print(f"| {latency:g} | rtc | {stats.chunk_switches} | {stats.queue_underruns} | "
                  f"{max(stats.rtc_inference_delays or (0,))} |")
            policy.close()
        wall_rtc(base, observation, args.steps, fps)


def wall_rtc(base: Path, observation: dict, steps: int, fps: int) -> None:
    """RTC beside a loop paced at `fps` in wall time (`rtc_wall.WallClockRtc`, as on a real arm): the latency is
    the tiny SmolVLA's own; sync at the same (median) latency for comparison, as above."""
    from harness.models.defaults import DEFAULT_TASK
    from harness.models.run_settings import InferenceEngine
    from harness.policies.lerobot_policy import LeRobotPolicy

    policy = LeRobotPolicy(base, task=DEFAULT_TASK, device="cpu", engine=InferenceEngine.RTC, fps=fps,
                           wall_clock=time.perf_counter)
    policy.reset(None)
    late = 0
    next_at = time.perf_counter()
    for _ in range(steps):
        policy.select_action(observation)
        next_at += 1 / fps
        pause = next_at - time.perf_counter()
        late += pause < 0
        time.sleep(max(0.0, pause))   # the paced loop's period: this is the behaviour measured
    policy.end_episode()
    stats = policy.inference_stats()
    trips = list(stats.round_trips_ms or [0.0])
    delays = list(stats.rtc_inference_delays or [0])
    median = statistics.median(trips)
    held = math.ceil(median / 1000 * fps - 1e-9)
    chunks = math.ceil(steps / (10 + held))
    print(f"\n{steps} steps paced at {fps} Hz in wall time, RTC on its inference thread "
          f"({late} steps started late):\n")
    print("| latency ms (obs to action) p50 / max | engine | chunk switches | underruns (arm held) | "
          "RTC delay told p50 / max |\n|---|---|---|---|---|")
    print(f"| {median:.0f} / {max(trips):.0f} | rtc (wall) | {stats.chunk_switches} | {stats.queue_underruns} | "
          f"{sorted(delays)[len(delays) // 2]} / {max(delays)} |")
    print(f"| {median:.0f} (fixed) | sync | {chunks} | {chunks * held} | - |")
    policy.close()


if __name__ == "__main__":
    main()
