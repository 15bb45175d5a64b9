"""Control-loop overhead at 30 Hz: harness's run engine vs LeRobot's own `lerobot-rollout`
(base strategy), both driving the same simulated SO-101 and the same fixed-cost policy.

Overhead = step busy time minus the policy's and the robot's own time. Jitter = deviation of
each step's start from the ideal 1/30 s grid. The policy is a tiny ACT checkpoint whose
`select_action` is replaced by a 10 ms busy-wait, so both loops see the same cost.

Run: .venv/bin/python benchmarks/loop_bench.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harness.sim  # noqa: E402, F401  (selects the GL backend before lerobot or mujoco load)

# isort: split
from lerobot.policies.act.modeling_act import ACTPolicy  # noqa: E402

from harness.models.protocol import load_protocol  # noqa: E402
from tests.tiny_policy import save_tiny_act  # noqa: E402

POLICY_COST_S = 0.005
FPS = 30


class Probe:
    """Timestamps of every robot and policy call, taken by wrapping the methods."""

    def __init__(self) -> None:
        self.obs_start: list[float] = []
        self.robot_s: list[float] = []
        self.policy_s: list[float] = []
        self.slept: dict[int, float] = {}

    def sleeping(self, sleep):
        """Wrap a sleep function so each step's actual sleep is known (busy = period - sleep)."""
        def timed_sleep(seconds: float) -> None:
            t0 = time.perf_counter()
            sleep(seconds)
            step = len(self.obs_start) - 1
            self.slept[step] = self.slept.get(step, 0.0) + time.perf_counter() - t0
        return timed_sleep

    def wrap_robot(self, robot) -> None:
        get_obs, send = robot.get_observation, robot.send_action

        def timed_obs():
            t0 = time.perf_counter()
            self.obs_start.append(t0)
            out = get_obs()
            self.robot_s.append(time.perf_counter() - t0)
            return out

        def timed_send(action):
            t0 = time.perf_counter()
            out = send(action)
            self.robot_s[-1] += time.perf_counter() - t0
            return out

        robot.get_observation, robot.send_action = timed_obs, timed_send

    def table_row(self, name: str, first: int = 0) -> str:
        """Statistics over steps first+1 .. n-1 (the first step warms caches; the last has no successor)."""
        starts = np.array(self.obs_start)
        steps = range(first + 1, min(len(starts) - 1, first + len(self.policy_s)))
        periods = np.array([starts[i + 1] - starts[i] for i in steps])
        busy = periods - np.array([self.slept.get(i, 0.0) for i in steps])
        policy = np.array([self.policy_s[i - first] for i in steps])
        robot = np.array([self.robot_s[i] for i in steps])
        overhead_ms = 1000 * (busy - policy - robot)
        jitter_ms = 1000 * np.abs(periods - 1 / FPS)
        missed = int(np.sum(busy > 1 / FPS))
        n = len(periods)
        print(f"<!-- {name}: median policy {1000 * np.median(policy):.1f} ms, robot {1000 * np.median(robot):.1f} ms, "
              f"busy {1000 * np.median(busy):.1f} ms, period {1000 * np.median(periods):.1f} ms -->")
        return (f"| {name} | {n} | {np.median(overhead_ms):.3f} | {np.percentile(overhead_ms, 99):.3f} | "
                f"{np.median(jitter_ms):.3f} | {np.percentile(jitter_ms, 99):.3f} | {missed} |")


def fixed_cost_select_action(probe: Probe):
    def select_action(self, batch):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < POLICY_COST_S:
            pass
        probe.policy_s.append(time.perf_counter() - t0)
        return torch.zeros((1, 6))
    return select_action


def timed_select_action(probe: Probe):
    """The real ACT forward pass, timed (the policy's own cost, for the overhead subtraction)."""
    real = ACTPolicy.select_action

    def select_action(self, batch):
        t0 = time.perf_counter()
        out = real(self, batch)
        probe.policy_s.append(time.perf_counter() - t0)
        return out
    return select_action


def bench_lerobot(ckpt: Path, seconds: float) -> str:
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.rollout import RolloutConfig, build_rollout_context, create_strategy
    from lerobot.rollout.strategies import base as base_strategy

    from harness.sim.config_sim_so101 import SimSO101Config

    probe = Probe()
    ACTPolicy.select_action = fixed_cost_select_action(probe)
    real_sleep = base_strategy.precise_sleep
    base_strategy.precise_sleep = probe.sleeping(real_sleep)
    policy_cfg = PreTrainedConfig.from_pretrained(ckpt)
    policy_cfg.pretrained_path = ckpt
    cfg = RolloutConfig(robot=SimSO101Config(render_cameras=["top"], camera_width=128, camera_height=96),
                        policy=policy_cfg, fps=FPS, duration=seconds, device="cpu", task="bench",
                        play_sounds=False, return_to_initial_position=False)
    ctx = build_rollout_context(cfg, threading.Event())
    probe.wrap_robot(ctx.hardware.robot_wrapper)
    strategy = create_strategy(cfg.strategy)
    strategy.setup(ctx)
    try:
        strategy.run(ctx)
    finally:
        strategy.teardown(ctx)
        base_strategy.precise_sleep = real_sleep
    return probe.table_row("lerobot-rollout (base strategy)")


def bench_harness(ckpt: Path, seconds: float, video: bool, real_inference: bool = False,
                  torch_threads: int | None = None) -> str:
    from harness.models.scoresheet import build_locked, lock_scoresheet
    from harness.policies.lerobot_policy import LeRobotPolicy, ThreadPolicy
    from harness.run.clock import MonotonicClock
    from harness.run.engine import RunEngine, RunOptions
    from harness.run.safety import GuardedRobot
    from harness.run.stages import SimStage
    from harness.run.terminal import TerminalObserver
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.sim_so101 import SimSO101

    probe = Probe()
    ACTPolicy.select_action = timed_select_action(probe) if real_inference else fixed_cost_select_action(probe)
    work = Path(tempfile.mkdtemp())
    protocol_path = work / "p.yaml"
    text = (REPO / "tests" / "data" / "small.yaml").read_text()
    protocol_path.write_text(text.replace("episode_time_limit_s: 12.0", f"episode_time_limit_s: {seconds}"))
    protocol = load_protocol(protocol_path)
    sheet = lock_scoresheet(work / "sheet.yaml", build_locked(protocol, protocol_path, str(ckpt), "sim"), {})
    threads = ThreadPolicy.for_cores(torch_threads or os.cpu_count() or 1, reserved=0)
    policy = LeRobotPolicy(ckpt, task="bench", device="cpu", threads=threads)
    robot = SimSO101(SimSO101Config(render_cameras=["top"], camera_width=128, camera_height=96))
    robot.connect()
    probe.wrap_robot(robot)

    clock = MonotonicClock()
    clock.sleep = probe.sleeping(clock.sleep)
    writer = None
    if video:
        from harness.run.evidence_writer import EvidenceWriter

        writer = EvidenceWriter(robot.world.geometry, control_fps=FPS)
        time.sleep(3.0)  # let the writer process start and import before the loop is timed
    options = RunOptions(runs_dir=work / "runs", paced=True, video=video, start_pose_s=0.0,
                         max_attempts=1, after_verdict_s=0.0, evidence_writer=writer)
    guarded = GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    try:
        with open(os.devnull, "w") as quiet:
            engine = RunEngine(protocol, sheet, guarded, policy, SimStage(robot.world, protocol),
                               TerminalObserver(operator_scores=False, out=quiet), clock, options)
            engine.run()
    finally:
        if writer is not None:
            writer.close()
    robot.disconnect()
    # move_to's get_observation comes before the episode: the episode starts one call later
    label = "harness run engine" + (" + evidence video 10 fps, both cameras" if video else " (trajectory only)")
    if real_inference:
        label = f"harness run engine, tiny ACT inference, torch threads {threads.torch_threads}"
    return probe.table_row(label, first=len(probe.obs_start) - len(probe.policy_s))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", action="store_true",
                        help="also: the tiny ACT's real inference with torch's default threads vs the thread policy")
    args = parser.parse_args()
    ckpt = save_tiny_act(Path(tempfile.mkdtemp()) / "tiny_act")
    print(f"30 Hz loop, fixed {POLICY_COST_S * 1000:.0f} ms policy, simulated SO-101 with a 128x96 top camera, "
          f"{args.seconds:.0f} s each\n")
    print("| loop | steps | overhead ms p50 | overhead ms p99 | jitter ms p50 | jitter ms p99 | missed deadlines |")
    print("|---|---|---|---|---|---|---|")
    print(bench_lerobot(ckpt, args.seconds), flush=True)
    print(bench_harness(ckpt, args.seconds, video=False), flush=True)
    print(bench_harness(ckpt, args.seconds, video=True), flush=True)
    if args.threads:
        cores = os.cpu_count() or 1
        print(bench_harness(ckpt, args.seconds, video=False, real_inference=True, torch_threads=cores), flush=True)
        print(bench_harness(ckpt, args.seconds, video=False, real_inference=True, torch_threads=max(1, cores - 1)),
              flush=True)


if __name__ == "__main__":
    main()
