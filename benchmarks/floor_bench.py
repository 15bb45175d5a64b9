"""A learned policy's trial against its floor, measured in one run (issue 42).

The harness's trials: `harness run PROTOCOL --policy CKPT --headless` in a child process, its wall and CPU
(the child and every process it waited for) and the scoresheet's per-trial loop statistics. The floor: the
same trials (same cube, same seeds, as many control steps as the harness ran) in this process with nothing
but, per control step, physics (`mj_step` for one control period), rendering exactly the cameras the policy
consumes at its size, and the policy's own inference (LeRobot's engine behind `select_action`). What the
harness spends beyond that (judge, evidence, start pose, scoring, scoresheet, start-up) is the rest.

Run with the code to measure first on the path (before/after: `PYTHONPATH=/path/to/checkout`):
  .venv/bin/python benchmarks/floor_bench.py --policy CKPT --protocol P.yaml --trials 2 [--profile sized-v1]
Prints a Markdown table; `--json OUT` also writes the figures.
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness.sim

# isort: split
import mujoco
import numpy as np

from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.policies.base import TrialContext
from harness.run.stages import SimStage
from harness.sim.units import from_sim, to_sim
from harness.sim.world import SimWorld


class Meter:
    """Wall and CPU seconds of one component, summed over calls."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> Meter:
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c


def cpu_tree() -> float:
    """CPU seconds of this process, its waited-for children and its live ones (the evidence writer's lanes)."""
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


def harness_trials(protocol: Path, policy: str, trials: int, work: Path, profile: str | None,
                   extra: list[str], where: int = 0) -> dict:
    """`harness run` as a user runs it (its own parser, `run_from_args`), in this process, with an observer
    that notes wall and CPU (this process and its children) when each trial starts and is recorded."""
    from harness.app.parts import Parts
    from harness.app.run_command import run_from_args
    from harness.cli import build_parser
    from harness.models.scoresheet import load_scoresheet
    from harness.run.terminal import TerminalObserver

    marks: list[tuple[str, float, float]] = []

    class TimedObserver(TerminalObserver):
        def trial_started(self, *a, **k) -> None:
            marks.append(("start", time.perf_counter(), cpu_tree()))
            super().trial_started(*a, **k)

        def trial_scored(self, attempt) -> None:
            super().trial_scored(attempt)
            marks.append(("scored", time.perf_counter(), cpu_tree()))

    sheet = work / "sheet.yaml"
    argv = ["run", str(protocol), "--policy", policy, "--headless", "--scoresheet", str(sheet),
            "--runs-dir", str(work / "runs"), "--max-trials", str(trials), "--device", "cpu", *extra]
    if profile:
        argv += ["--render-profile", profile]
    args = build_parser().parse_args(argv)
    profiler = None
    if where:   # this process's CPU by function (the evidence writer's lanes are processes of their own)
        import cProfile

        profiler = cProfile.Profile(timer=time.process_time)
        profiler.enable()
    cpu0, t0 = cpu_tree(), time.perf_counter()
    code = run_from_args(args, Parts(observer=lambda front, scores: TimedObserver(scores, out=io.StringIO())))
    wall, cpu = time.perf_counter() - t0, cpu_tree() - cpu0
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(where)
    if code != 0:
        sys.exit(f"harness run exited {code}")
    locked = load_scoresheet(sheet).locked
    profile_locked = getattr(locked, "render_profile", None)
    starts = [m for m in marks if m[0] == "start"]
    scored = [m for m in marks if m[0] == "scored"]
    rows = []
    for a, s0, s1 in zip(load_scoresheet(sheet).attempts, starts, scored, strict=True):
        loop = a.loop
        loop_s = loop.steps / loop.achieved_fps if loop.achieved_fps else float("nan")
        label = str(a.failure_mode or a.outcome.value)
        rows.append({"trial": a.trial_index, "label": label, "steps": loop.steps, "duration_s": a.duration_s,
                     "wall_s": s1[1] - s0[1], "cpu_s": s1[2] - s0[2], "loop_s": loop_s,
                     "policy_ms_p50": loop.policy_latency_ms_p50, "io_ms_p50": loop.robot_io_ms_p50,
                     "inference_ms_p50": loop.inference_ms_p50})
    return {"wall_s": wall, "cpu_s": cpu, "attempts": rows,
            "profile": profile_locked.value if profile_locked is not None else None}


def reads_frames(policy) -> bool:
    """Whether the policy's next call looks at the frames. Code before issue 42's held frames has no
    `reads_frames_next`: the floor is the policy's, not the harness's, so it is read off ACT's own queue there."""
    reads = getattr(policy, "reads_frames_next", None)
    if reads is not None:
        return reads()
    queue = getattr(policy._policy, "_action_queue", None)
    return queue is None or len(queue) == 0


def floor_trials(protocol_path: Path, policy_ref: str, attempts: list[dict], profile: str | None) -> dict:
    """The same trials with physics, the policy's cameras (on the steps it reads them) and its inference only."""
    from harness.policies.lerobot_policy import LeRobotPolicy
    from harness.sim.scene import SceneGeometry

    protocol = load_protocol(protocol_path)
    policy = LeRobotPolicy(policy_ref, task=protocol.task, device="cpu")
    width, height = policy.image_size or (640, 480)
    scene = protocol.scene
    geometry = SceneGeometry(bowl_xy=(scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100),
                             bowl_rim_diameter=scene.bowl_diameter_cm / 100, cube_edge=scene.cube_edge_cm / 100)
    kwargs = {}
    if profile and "render_profile" in inspect.signature(SimWorld).parameters:
        kwargs["render_profile"] = profile
    world = SimWorld(geometry, control_fps=protocol.fps, **kwargs)
    by_index = {t.index: t for t in protocol.trials}
    physics, render, inference = Meter(), Meter(), Meter()
    per_cam = {cam: Meter() for cam in policy.camera_keys}
    steps_total = 0
    qpos_samples: list[np.ndarray] = []
    last: dict[str, np.ndarray] = {}
    for a in attempts:
        trial = by_index[a["trial"]]
        world.set_arm(protocol.start_pose)
        SimStage(world, protocol).place_cube(trial, attempt=1)
        policy.reset(TrialContext(protocol, trial, world))
        for step in range(a["steps"]):
            obs = {f"{n}.pos": from_sim(n, float(v)) for n, v in zip(JOINT_NAMES, world.joint_positions_rad(),
                                                                      strict=True)}
            if reads_frames(policy):   # the frames the policy consumes; popping a queued action, it reads none
                with render:
                    for cam in policy.camera_keys:
                        with per_cam[cam]:
                            last[cam] = world.render(cam, width, height)
            obs.update(last)
            with inference:
                action = policy.select_action(obs)
            targets = np.array([to_sim(n, action[f"{n}.pos"]) for n in JOINT_NAMES])
            with physics:
                world.data.ctrl[:] = targets
                for _ in range(world.substeps):
                    mujoco.mj_step(world.model, world.data)
            if step % 60 == 0:
                qpos_samples.append(world.data.qpos.copy())
        steps_total += a["steps"]
    policy.close()
    world.close()
    n = max(steps_total, 1)
    per_step = {name: {"wall_ms": 1000 * m.wall / n, "cpu_ms": 1000 * m.cpu / n}
                for name, m in (("physics", physics), ("render", render), ("inference", inference))}
    cams = {cam: {"wall_ms": 1000 * m.wall / n, "cpu_ms": 1000 * m.cpu / n} for cam, m in per_cam.items()}
    return {"steps": steps_total, "size": f"{width}x{height}", "per_step": per_step, "cameras": cams,
            "qpos_samples": qpos_samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--protocol", required=True, type=Path)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--profile", default=None, help="--render-profile for both (absent: the code's default)")
    parser.add_argument("--label", default="")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--extra", default="", help="more `harness run` arguments, space-separated")
    parser.add_argument("--where", type=int, default=0, help="print the N functions the run spent most CPU in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        run = harness_trials(args.protocol, args.policy, args.trials, Path(tmp), args.profile, args.extra.split(),
                             args.where)
    floor = floor_trials(args.protocol, args.policy, run["attempts"], run["profile"])
    steps = sum(a["steps"] for a in run["attempts"])
    floor_ms = sum(v["wall_ms"] for v in floor["per_step"].values())
    floor_cpu = sum(v["cpu_ms"] for v in floor["per_step"].values())
    trial_ms = 1000 * sum(a["wall_s"] for a in run["attempts"]) / steps
    trial_cpu = 1000 * sum(a["cpu_s"] for a in run["attempts"]) / steps
    loop_ms = 1000 * sum(a["loop_s"] for a in run["attempts"]) / steps
    run_ms = 1000 * run["wall_s"] / steps
    load = os.getloadavg()[0]
    print(f"\n{args.label} policy {args.policy} at {floor['size']}, render profile {run['profile'] or 'none (main)'}, "
          f"{len(run['attempts'])} trials, {steps} steps, "
          f"load {load:.1f}, code {harness.__file__}")
    print("| per control step | wall ms | CPU ms |\n|---|---:|---:|")
    for name, v in floor["per_step"].items():
        print(f"| floor: {name} | {v['wall_ms']:.1f} | {v['cpu_ms']:.1f} |")
    for cam, v in floor["cameras"].items():
        print(f"| floor: render {cam} {floor['size']} | {v['wall_ms']:.1f} | {v['cpu_ms']:.1f} |")
    print(f"| **floor** | **{floor_ms:.1f}** | **{floor_cpu:.1f}** |")
    print(f"| harness: the control loop (steps / achieved fps) | {loop_ms:.1f} | |")
    print(f"| harness: trial, start to recorded (incl. start pose, evidence, scoring) | {trial_ms:.1f} | "
          f"{trial_cpu:.1f} |")
    print(f"| harness: whole `harness run` incl. start-up and policy load | {run_ms:.1f} | "
          f"{1000 * run['cpu_s'] / steps:.1f} |")
    print(f"| **trial / floor** | **{trial_ms / floor_ms:.2f}x** | **{trial_cpu / floor_cpu:.2f}x** |")
    ppol = statistics.median(a["policy_ms_p50"] for a in run["attempts"])
    pio = statistics.median(a["io_ms_p50"] for a in run["attempts"])
    print(f"(harness loop p50s: policy {ppol:.1f} ms, robot I/O {pio:.1f} ms; labels "
          f"{[a['label'] for a in run['attempts']]})")
    if args.json:
        out = {"label": args.label, "load": load, "run": run, "floor": {k: v for k, v in floor.items()
                                                                        if k != "qpos_samples"},
               "trial_ms": trial_ms, "trial_cpu_ms": trial_cpu, "loop_ms": loop_ms, "floor_ms": floor_ms,
               "floor_cpu_ms": floor_cpu}
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
