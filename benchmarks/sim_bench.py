"""Simulator speed and the built-in policies' success over the randomized protocol.

Run: .venv/bin/python benchmarks/sim_bench.py [--quick]
Prints Markdown tables (paste into docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import harness.sim  # noqa: F401  (selects the GL backend; must precede mujoco)

# isort: split
import mujoco
import numpy as np

from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.policies.base import TrialContext
from harness.policies.scripted import ExpertPolicy, ReplayPolicy
from harness.run.stages import SimStage
from harness.sim.scene import build_model
from harness.sim.units import to_sim
from harness.sim.world import SimWorld

REPO = Path(__file__).resolve().parents[1]


def physics_steps_per_s(model: mujoco.MjModel, seconds: float = 2.0) -> float:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        mujoco.mj_step(model, data)
        n += 1
    return n / (time.perf_counter() - t0)


def ms_per_frame(model: mujoco.MjModel, camera: str, width: int, height: int, frames: int = 20) -> float:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, height, width)
    renderer.update_scene(data, camera=camera)
    renderer.render()
    t0 = time.perf_counter()
    for _ in range(frames):
        renderer.update_scene(data, camera=camera)
        renderer.render()
    elapsed = (time.perf_counter() - t0) / frames * 1000
    renderer.close()
    return elapsed


def run_trial(world: SimWorld, protocol, policy, trial, cameras: tuple[str, ...] = ()) -> tuple[dict, int]:
    world.set_arm(protocol.start_pose)
    SimStage(world, protocol).place_cube(trial, attempt=1)
    policy.reset(TrialContext(protocol, trial, world))
    steps = 0
    for _ in range(round(protocol.episode_time_limit_s * protocol.fps)):
        for cam in cameras:
            world.render(cam, 640, 480)
        action = policy.select_action({})
        world.step_control(np.array([to_sim(n, action[f"{n}.pos"]) for n in JOINT_NAMES]))
        steps += 1
        if world.judge.finished:
            break
    return world.judge.verdict(world.data), steps


class _TimedObserver:
    """A silent observer that notes when each trial starts and when its attempt is recorded, and the CPU
    seconds the loop process and the evidence writer's processes have used by then."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.scored: list[float] = []
        self.labels: list[str] = []
        self.writer_pids: list[int] = []
        self.cpu_at_scored: list[list[float]] = []   # [loop, each writer process] CPU s when each attempt was recorded

    def trial_started(self, trial, attempt, done, total) -> None:
        self.started.append(time.perf_counter())

    def phase(self, name) -> None:
        return None

    def step(self, step, timing) -> None:
        return None

    def warn(self, message) -> None:
        return None

    def score(self, trial, verdict, void_reason):
        from harness.run.engine import ScoreDecision

        return ScoreDecision("void", void_reason=void_reason) if void_reason else ScoreDecision(_label(verdict))

    def trial_scored(self, attempt) -> None:
        self.scored.append(time.perf_counter())
        self.cpu_at_scored.append([time.process_time(), *(_proc_cpu_s(pid) for pid in self.writer_pids)])
        self.labels.append(attempt.label)

    def steady_cpu(self) -> tuple[float, list[float]]:
        """Median CPU s per trial of the loop and of each writer process, from one recorded attempt to the
        next: the first trial, which also pays for start-up (imports, GL contexts, the writer's own world),
        is left out."""
        pairs = zip(self.cpu_at_scored, self.cpu_at_scored[1:], strict=False)
        steps = [[after - before for before, after in zip(a, b, strict=True)] for a, b in pairs]
        if not steps:
            return float("nan"), []
        medians = [statistics.median(column) for column in zip(*steps, strict=True)]
        return medians[0], medians[1:]

    def stop_requested(self) -> bool:
        return False

    def wait_if_paused(self) -> bool:
        return True


def engine_trials(protocol_path: Path, n: int, video: bool | str, work: Path, lanes: int | None = None) -> EngineTrials:
    """Seconds per trial through the run engine (start pose, cube, loop, scoring, evidence, scoresheet)."""
    from harness.models.scoresheet import build_locked, lock_scoresheet
    from harness.run.clock import MonotonicClock
    from harness.run.engine import RunEngine, RunOptions

    protocol = load_protocol(protocol_path)
    sheet = lock_scoresheet(work / f"sheet-{video}.yaml", build_locked(protocol, protocol_path, "expert", "sim"), {})
    world = SimWorld(control_fps=protocol.fps)
    robot = _sim_robot(world, protocol.fps)
    observer = _TimedObserver()
    writer = None
    extra = {}
    # as `harness run` builds it: the writer draws a simulated run's frames, with or without video
    # (before issue 18 there was none; until the watch moved there, none without video)
    if importlib.util.find_spec("harness.run.evidence_writer") and (video or _writer_watches()):
        from harness.run.evidence_writer import EvidenceWriter

        writer = EvidenceWriter(world.geometry, control_fps=protocol.fps, **({"lanes": lanes} if lanes else {}))
        extra["evidence_writer"] = writer
        observer.writer_pids = list(getattr(writer, "pids", None) or [writer._process.pid])  # one process before
    if isinstance(video, str):
        from harness.run.evidence import VideoMode

        video = VideoMode(video)
    options = RunOptions(runs_dir=work / f"runs-{video}", video=video, max_attempts=n, **extra)
    cpu_before = _cpu_s()
    try:
        RunEngine(protocol, sheet, _guarded(robot), ExpertPolicy(), SimStage(world, protocol), observer,
                  MonotonicClock(), options).run()
    finally:
        if writer is not None:
            writer.close()
    cpu = (_cpu_s() - cpu_before) / max(1, len(observer.scored))
    robot.disconnect()
    walls = [b - a for a, b in zip(observer.started, observer.scored, strict=True)]
    return EngineTrials(walls, observer.labels, cpu, *observer.steady_cpu())


@dataclass
class EngineTrials:
    walls: list[float]          # seconds from each trial's start to its recorded attempt
    labels: list[str]
    cpu_all: float              # CPU s per trial of every process, start-up included
    loop_cpu: float             # steady CPU s per trial of the loop process
    writer_cpu: list[float]     # ... and of each of the evidence writer's processes (none without one)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    def idle_wall(self, cores: int = 2) -> float:
        """A lower bound on the wall time per trial on `cores` idle cores, from the steady CPU: no process
        finishes its share faster than it computes it, nor all of them faster than the cores compute."""
        return max(self.loop_cpu, *self.writer_cpu, (self.loop_cpu + sum(self.writer_cpu)) / cores)

    def row(self, name: str, floor: float) -> str:
        writer = " + ".join(f"{cpu:.2f}" for cpu in self.writer_cpu) or "0"
        bound = self.idle_wall()
        return (f"| {name} | {self.wall:.2f} | {self.wall / floor:.1f} | {self.loop_cpu:.2f} + ({writer}) "
                f"= {self.loop_cpu + sum(self.writer_cpu):.2f} | {bound:.2f} ({bound / floor:.1f}x) "
                f"| {self.cpu_all:.2f} |")


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds a live process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _has_video_modes() -> bool:
    """Whether this tree has `--video failures` (issue 30)."""
    import harness.run.evidence as evidence

    return hasattr(evidence, "VideoMode")


def _writer_watches() -> bool:
    """Whether this tree's recorder hands the dropout watch's frames to the writer."""
    from harness.run.evidence import EvidenceRecorder

    return hasattr(EvidenceRecorder, "watch")


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the evidence writer, once closed)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _label(verdict) -> str:
    """The verdict's label: a `JudgeVerdict` now, a dict in checkouts before it (this benchmark times both)."""
    return verdict["label"] if isinstance(verdict, dict) else verdict.label


def _guarded(robot):
    from harness.run.safety import GuardedRobot

    try:
        return GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    except TypeError:  # before the guard was told the simulated arm, or before the engine required a guard
        try:
            return GuardedRobot(robot, release=robot.disable_torque)
        except TypeError:
            return robot


def _sim_robot(world: SimWorld, fps: int):
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.sim_so101 import SimSO101

    robot = SimSO101(SimSO101Config(id="bench", render_cameras=[], fps=fps), world=world)
    robot.connect()
    return robot


def trial_floor(protocol, trial, steps: int) -> tuple[float, float]:
    """The floor of one expert trial: its physics steps alone plus the two 640x480 final frames."""
    world = SimWorld(control_fps=protocol.fps)
    world.set_arm(protocol.start_pose)
    SimStage(world, protocol).place_cube(trial, attempt=1)
    t0 = time.perf_counter()
    for _ in range(steps * world.substeps):
        mujoco.mj_step(world.model, world.data)
    physics = time.perf_counter() - t0
    world.render("top", 640, 480)
    world.render("wrist", 640, 480)  # first renders build the GL contexts: not part of the floor
    t0 = time.perf_counter()
    world.render("top", 640, 480)
    world.render("wrist", 640, 480)
    frames = time.perf_counter() - t0
    world.close()
    return physics, frames


def judge_cost(protocol, trial) -> tuple[float, float, float]:
    """Microseconds per physics step: mj_step alone, the judge alone, and the expert's planning (s)."""
    world = SimWorld(control_fps=protocol.fps)
    world.set_arm(protocol.start_pose)
    SimStage(world, protocol).place_cube(trial, attempt=1)
    policy = ExpertPolicy()
    t0 = time.perf_counter()
    policy.reset(TrialContext(protocol, trial, world))
    planning = time.perf_counter() - t0
    if hasattr(policy, "plans"):  # planning cost, not a cache hit
        from harness.policies.scripted import plan_pick_and_place

        t0 = time.perf_counter()
        start = np.array([to_sim(j, protocol.start_pose[j]) for j in JOINT_NAMES])
        plan_pick_and_place(world.model, protocol.fps, start, *world.cube_pose(), world.geometry.bowl_xy)
        planning = time.perf_counter() - t0
    step_s = judge_s = 0.0
    n = 0
    dt = world.model.opt.timestep
    for _ in range(round(protocol.episode_time_limit_s * protocol.fps)):
        action = policy.select_action({})
        world.data.ctrl[:] = np.array([to_sim(j, action[f"{j}.pos"]) for j in JOINT_NAMES])
        for _ in range(world.substeps):
            t0 = time.perf_counter()
            mujoco.mj_step(world.model, world.data)
            t1 = time.perf_counter()
            world.judge.observe(world.data, dt)
            judge_s += time.perf_counter() - t1
            step_s += t1 - t0
            n += 1
        if world.judge.finished:
            break
    world.close()
    return 1e6 * step_s / n, 1e6 * judge_s / n, planning


def png_cost(world: SimWorld, level: int | None) -> float:
    """Seconds to save one 640x480 top frame as PNG (None: PIL's default compression)."""
    from PIL import Image

    frame = world.render("top", 640, 480)
    out = Path(tempfile.mkdtemp()) / "f.png"
    t0 = time.perf_counter()
    for _ in range(5):
        Image.fromarray(frame).save(out, **({} if level is None else {"compress_level": level}))
    return (time.perf_counter() - t0) / 5


def render_parts(camera: str, width: int = 320, height: int = 240, frames: int = 20) -> tuple[float, float, float]:
    """CPU ms per frame: the whole scene, without the arm's visual meshes, and with no geometry at all
    (what the frame's cost is made of: llvmpipe is bound by geometry, not pixels)."""
    world = SimWorld()
    renderer = mujoco.Renderer(world.model, height, width)
    name = {"wrist": "wrist_cam"}.get(camera, camera)
    no_arm, nothing = mujoco.MjvOption(), mujoco.MjvOption()
    no_arm.geomgroup[2] = 0   # the arm's visual meshes
    nothing.geomgroup[:] = 0
    costs = []
    for option in (mujoco.MjvOption(), no_arm, nothing):
        renderer.update_scene(world.data, camera=name, scene_option=option)
        renderer.render()
        t0 = time.process_time()
        for _ in range(frames):
            renderer.update_scene(world.data, camera=name, scene_option=option)
            renderer.render()
        costs.append(1000 * (time.process_time() - t0) / frames)
    renderer.close()
    world.close()
    return costs[0], costs[1], costs[2]


def trials_section(n: int, lanes: int | None = None) -> None:
    protocol_path = REPO / "protocols" / "randomized.yaml"
    protocol = load_protocol(protocol_path)
    work = Path(tempfile.mkdtemp(prefix="sim_bench-"))
    physics_us, judge_us, planning = judge_cost(protocol, protocol.trials[0])
    print(f"| per physics step | mj_step {physics_us:.0f} us | judge {judge_us:.0f} us | "
          f"expert planning {planning:.2f} s |\n")
    for camera in ("top", "wrist"):
        whole, no_arm, nothing = render_parts(camera)
        print(f"| {camera} 320x240 frame, CPU ms | {whole:.1f} | arm's visual meshes {whole - no_arm:.1f} | "
              f"table, bowl, cube {no_arm - nothing:.1f} | empty frame {nothing:.1f} |")
    print()
    with_video = engine_trials(protocol_path, n, True, work, lanes)
    without = engine_trials(protocol_path, n, False, work, lanes)
    default = engine_trials(protocol_path, n, "failures", work, lanes) if _has_video_modes() else None
    physics, frames = trial_floor(protocol, protocol.trials[0], 254)
    floor = physics + frames
    world = SimWorld()
    png_default, png_fast = png_cost(world, None), png_cost(world, 1)
    world.close()
    load = os.getloadavg()[0]
    print(f"| expert trial ({n} trials, load {load:.1f} on {os.cpu_count()} CPUs) | wall s, median | x floor | "
          "CPU s per trial after the first: loop + (writer processes) | lower bound on 2 idle cores (x floor) | "
          "CPU s per trial, start-up included |\n|---|---|---|---|---|---|")
    print(f"| floor: physics of 254 control steps + two 640x480 final frames | {floor:.2f} "
          f"(physics {physics:.2f}, frames {frames:.2f}) | 1.0 | | | |")
    print(without.row("run engine, no video", floor))
    if default is not None:
        print(default.row("run engine, default evidence (--video failures: trajectory, final frames)", floor))
    print(with_video.row("run engine, evidence video (--video all)", floor))
    sizes = [p.stat().st_size for p in (work / "runs-failures").rglob("sim_state.npz")]
    if sizes:
        print(f"\ntrajectory (sim_state.npz) bytes per trial: median {statistics.median(sizes) / 1000:.0f} kB, "
              f"max {max(sizes) / 1000:.0f} kB over {len(sizes)} trials")
    print(f"\nsuccesses: {with_video.labels.count('success')}/{n} with video, "
          f"{without.labels.count('success')}/{n} without; "
          f"final PNG 640x480: {1000 * png_default:.0f} ms default, {1000 * png_fast:.0f} ms compress_level=1\n")


def latency_trial(protocol, trial, robot, plans) -> str:
    """One expert trial on the simulated robot under its latency model; the judge's label."""
    world = robot.world
    world.set_arm(protocol.start_pose)
    SimStage(world, protocol).place_cube(trial, attempt=1)
    policy = ExpertPolicy(plans=plans)
    policy.reset(TrialContext(protocol, trial, world))
    started = world.time
    while world.time - started < protocol.episode_time_limit_s and not world.judge.finished:
        robot.send_action(policy.select_action(robot.get_observation()))
    return world.judge.verdict(world.data).label.value


def latency_section(n: int) -> None:
    """Expert success against the latency of its actions (the latency model of the simulated arm)."""
    from harness.policies.scripted import PlanCache
    from harness.stats.estimates import wilson_interval

    protocol = load_protocol(REPO / "protocols" / "randomized.yaml")
    trials = protocol.trials[:n]
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.sim_so101 import SimSO101

    plans = PlanCache()
    world = SimWorld(control_fps=protocol.fps)
    print(f"| latency | expert success ({len(trials)} randomized trials) | 95% Wilson | seconds |\n|---|---|---|---|")
    for latency in (None, 0, 50, 100, 250, 500):
        t0 = time.perf_counter()
        robot = SimSO101(SimSO101Config(id="bench", render_cameras=[], fps=protocol.fps, latency_ms=latency),
                         world=world)
        robot.connect()
        labels = [latency_trial(protocol, trial, robot, plans) for trial in trials]
        robot.disconnect()
        k = labels.count("success")
        low, high = wilson_interval(k, len(labels))
        name = "lock-step" if latency is None else f"{latency} ms"
        print(f"| {name} | {k}/{len(labels)} | {100 * low:.0f}-{100 * high:.0f}% | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10 trials per policy instead of 50")
    parser.add_argument("--writer-lanes", type=int, default=0,
                        help="with --trials: the evidence writer's processes (default: one per core, at most two)")
    parser.add_argument("--trials", type=int, default=0,
                        help="only the per-trial section: this many engine trials with and without video")
    parser.add_argument("--latency-curve", type=int, default=0,
                        help="only the expert's success vs latency, over this many randomized trials")
    args = parser.parse_args()
    if args.latency_curve:
        latency_section(args.latency_curve)
        return
    if args.trials:
        trials_section(args.trials, args.writer_lanes)
        return
    protocol = load_protocol(REPO / "protocols" / "randomized.yaml")
    fast, default = build_model(fast_meshes=True), build_model(fast_meshes=False)
    print(f"MUJOCO_GL={os.environ['MUJOCO_GL']}, mujoco {mujoco.__version__}, {os.cpu_count()} CPUs\n")

    print("| physics (dt 1/300 s) | steps/s | real-time factor |\n|---|---|---|")
    rate = physics_steps_per_s(fast)
    print(f"| arm holding still | {rate:,.0f} | {rate / 300:.0f}x |")
    world = SimWorld()
    t0, steps = time.perf_counter(), 0
    verdict, steps = run_trial(world, protocol, ExpertPolicy(), protocol.trials[0])
    per_step = (time.perf_counter() - t0) / steps
    print(f"| expert pick-and-place (incl. planning, judge) | {world.substeps / per_step:,.0f} | "
          f"{1 / 30 / per_step:.0f}x |\n")

    print("| camera | resolution | ms/frame, shadows+MSAA off | ms/frame, + decimated meshes |\n|---|---|---|---|")
    for camera in ("top", "wrist_cam"):
        for width, height in ((640, 480), (320, 240)):
            print(f"| {camera} | {width}x{height} | {ms_per_frame(default, camera, width, height):.1f} | "
                  f"{ms_per_frame(fast, camera, width, height):.1f} |")

    t0 = time.perf_counter()
    _, steps = run_trial(world, protocol, ExpertPolicy(), protocol.trials[1], cameras=("top", "wrist"))
    rate = steps / (time.perf_counter() - t0)
    print(f"\nControl loop with both cameras at 640x480 (lock-step): {rate:.1f} steps/s "
          f"({rate / 30:.2f}x real time at 30 Hz)\n")

    trials = protocol.trials[:10] if args.quick else protocol.trials
    print("| policy | success over the randomized protocol | by distance from the trained position |\n|---|---|---|")
    for policy in (ExpertPolicy(), ReplayPolicy()):
        bins: dict[str, list[int]] = {"0-2 cm": [], "2-4 cm": [], "4-6 cm": []}
        t0 = time.perf_counter()
        for trial in trials:
            verdict, _ = run_trial(world, protocol, policy, trial)
            d = math.hypot(trial.dx_cm, trial.dy_cm)
            key = "0-2 cm" if d < 2 else "2-4 cm" if d < 4 else "4-6 cm"
            bins[key].append(_label(verdict) == "success")
        k = sum(sum(v) for v in bins.values())
        by = ", ".join(f"{b}: {sum(v)}/{len(v)}" for b, v in bins.items())
        print(f"| {policy.name} | {k}/{len(trials)} ({time.perf_counter() - t0:.0f} s) | {by} |")
    world.close()


if __name__ == "__main__":
    main()
