"""Render cost per observation frame and structural similarity, full meshes against the sized profile (issue 42).

Per camera and size: CPU ms per frame (`time.process_time`, interleaved full/profile rounds, so a loaded
machine slows both alike) and wall ms; SSIM of the profile's frame against the full meshes' frame over arm
configurations of real trials (the expert on the randomized protocol, every 10th control step).
Run: .venv/bin/python benchmarks/render_profile_bench.py [--trials 3] [--frames 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import harness.sim  # noqa: F401  (selects the GL backend; must precede mujoco)

# isort: split
import numpy as np

from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.models.render_profile import MeshDetail, RenderProfile
from harness.policies.base import TrialContext
from harness.policies.scripted import ExpertPolicy
from harness.run.stages import SimStage
from harness.sim.render_check import ssim
from harness.sim.units import to_sim
from harness.sim.world import FrameRequest, SimWorld

REPO = Path(__file__).resolve().parents[1]
SIZES = ((96, 72), (128, 96), (160, 120), (320, 240), (640, 480))


def trial_poses(world: SimWorld, protocol_path: Path, trials: int, every: int = 10) -> list[np.ndarray]:
    protocol = load_protocol(protocol_path)
    policy = ExpertPolicy()
    poses = []
    for trial in protocol.trials[:trials]:
        world.set_arm(protocol.start_pose)
        SimStage(world, protocol).place_cube(trial, attempt=1)
        policy.reset(TrialContext(protocol, trial, world))
        for step in range(round(protocol.episode_time_limit_s * protocol.fps)):
            action = policy.select_action({})
            world.step_control(np.array([to_sim(n, action[f"{n}.pos"]) for n in JOINT_NAMES]))
            if step % every == 0:
                poses.append(world.posed_qpos.copy())
            if world.judge.finished:
                break
    return poses


def cost_ms(world: SimWorld, camera: str, size: tuple[int, int], detail: MeshDetail, poses: list[np.ndarray],
            frames: int) -> tuple[float, float]:
    requests = [FrameRequest(camera, *size, poses[i % len(poses)], 0, False, detail) for i in range(frames)]
    world.render_request(requests[0])   # the renderer made outside the timing
    c0, w0 = time.process_time(), time.perf_counter()
    for request in requests:
        world.render_request(request)
    return 1000 * (time.process_time() - c0) / frames, 1000 * (time.perf_counter() - w0) / frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", type=Path, default=REPO / "protocols" / "randomized.yaml")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    world = SimWorld()
    poses = trial_poses(world, args.protocol, args.trials)
    print(f"{len(poses)} arm configurations from {args.trials} expert trials; load {os.getloadavg()[0]:.1f}")
    print("| camera | size | meshes (sized-v1) | full CPU ms | sized CPU ms | CPU ratio | full wall ms | sized wall ms "
          "| SSIM min | SSIM mean |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for camera in ("top", "wrist"):
        for size in SIZES:
            detail = RenderProfile.SIZED.detail_for(*size)
            full_c, full_w, ours_c, ours_w = [], [], [], []
            for _ in range(args.rounds):   # interleaved: both see the same machine
                c, w = cost_ms(world, camera, size, MeshDetail.FULL, poses, args.frames)
                full_c.append(c)
                full_w.append(w)
                c, w = cost_ms(world, camera, size, detail, poses, args.frames)
                ours_c.append(c)
                ours_w.append(w)
            scores = [ssim(world.render_request(FrameRequest(camera, *size, q, 0, False, MeshDetail.FULL)),
                           world.render_request(FrameRequest(camera, *size, q, 0, False, detail))) for q in poses]
            fc, oc = statistics.median(full_c), statistics.median(ours_c)
            print(f"| {camera} | {size[0]}x{size[1]} | {detail.value} | {fc:.1f} | {oc:.1f} | {fc / oc:.2f}x | "
                  f"{statistics.median(full_w):.1f} | {statistics.median(ours_w):.1f} | {min(scores):.3f} | "
                  f"{statistics.mean(scores):.3f} |")
    world.close()


if __name__ == "__main__":
    main()
