"""Guided placement in the operator TUI: from the cube landing on its target to the trial starting.

The simulated table stands in for the real one. For each placement the cube first lies 2 cm off its
target while the `PlacementGuide` polls the top camera (real clock, 0.1 s poll, two steady frames); at a
random moment 0.4-0.9 s in, the operator's hands put it on the target (it lands just before the next
frame is grabbed, so the wait for that frame counts). Measured, placements alternating between the two
front ends in one process so load affects both alike:

- plain: the guide with an operator that only reads (the terminal mode's cost without a terminal);
- TUI: the same guide on the engine's thread, reporting to `TuiObserver`, with `RunApp` headless under
  Textual drawing the run screen (live camera in half blocks, footprint, reading) on the UI thread.

Rows: landed -> the guide returns (the trial may start), and in the TUI landed -> the screen first shows
the cube within tolerance. Then the cost of drawing one camera view (56 x 25 cells) two ways: Rich text
with a style string per cell (how `FramePreview` draws its still frame) and `HalfBlocks` (segments with
cached colours), CPU time per frame.

Run: .venv/bin/python benchmarks/placement_bench.py [--placements 12] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from rich.console import Console
from rich.text import Text

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.models.locked import LockedBlock
from harness.models.protocol import Scene, Trial, generate_randomized_trials
from harness.run.clock import MonotonicClock
from harness.run.operator_trial import PlacementGuide
from harness.run.placement_guide import Tolerance, TopView
from harness.sim.world import SimWorld
from harness.tui.observer import TuiObserver
from harness.tui.placement import HalfBlocks, camera_pixels
from harness.tui.run_app import RunApp
from harness.tui.screens import CheckReport
from harness.tui.state import LivePlacement, RunState

OFF_CM = 2.0


@dataclass
class Table:
    """The simulated table and the operator's hands: the cube is moved onto the target at `move_at`."""

    world: SimWorld
    scene: Scene
    lock: threading.Lock = field(default_factory=threading.Lock)
    move_at: float = math.inf
    landed: float | None = None
    landed_cpu: float = 0.0
    trial: Trial | None = None

    def put(self, trial: Trial, off_cm: float) -> None:
        x, y = self.scene.trained_cube_xy_cm
        self.world.place_cube(((x + trial.dx_cm + off_cm) / 100, (y + trial.dy_cm) / 100),
                              math.radians(trial.yaw_deg))

    def start(self, trial: Trial, delay_s: float) -> None:
        self.trial, self.landed = trial, None
        self.put(trial, OFF_CM)
        self.move_at = time.perf_counter() + delay_s

    def grab(self) -> np.ndarray:
        with self.lock:
            if self.landed is None and time.perf_counter() >= self.move_at and self.trial is not None:
                self.put(self.trial, 0.0)
                self.landed = self.move_at     # it landed then; this frame is the first to see it
                self.landed_cpu = time.process_time()
            return self.world.render("top", 640, 480)


def _stuck(table: Table, reading, counter: list[int]) -> str | None:
    """A person's override: the cube is on its target, yet ten frames later the guide still has not started the
    trial (the arm at its start pose hides part of it, or the reading flickers across the tolerance's edge)."""
    counter[0] = counter[0] + 1 if table.landed is not None else 0   # frames since it landed, within or not
    return "on target, but not read within tolerance (hidden under the arm?)" if counter[0] >= 10 else None


class Reader:
    """An operator who only watches (plain mode without a terminal)."""

    def __init__(self, table: Table) -> None:
        self.table, self.count = table, [0]

    def placement(self, trial, reading, frame):
        return _stuck(self.table, reading, self.count)

    def unexpected(self, trial, objects, frame):
        return "bench"

    def clear_for_reference(self) -> None:
        return None


class HidingAware(TuiObserver):
    """The TUI observer, plus the same override as `Reader` (a person would type it)."""

    def __init__(self, table: Table) -> None:
        super().__init__()
        self.table, self.count = table, [0]

    def placement(self, trial, reading, frame):
        return super().placement(trial, reading, frame) or _stuck(self.table, reading, self.count)


@dataclass
class Result:
    landed_to_start: list[float] = field(default_factory=list)
    landed_to_green: list[float] = field(default_factory=list)
    frames: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)   # this process's CPU (every thread) from landing to start
    hidden: int = 0


def _placements(view: TopView, table: Table, references: list[np.ndarray], operator, trials: list[Trial],
                delays: list[float], result: Result, on_place=None) -> None:
    guide = PlacementGuide(view, table.grab, references, operator, MonotonicClock())
    for trial, delay in zip(trials, delays, strict=True):
        if hasattr(operator, "count"):
            operator.count[0] = 0
        if on_place is not None:
            on_place(trial)
        table.start(trial, delay)
        outcome = guide.place(trial)
        done = time.perf_counter()
        if outcome.override_reason or table.landed is None:
            result.hidden += 1
            continue
        result.landed_to_start.append(done - table.landed)
        result.cpu_s.append(time.process_time() - table.landed_cpu)
        result.frames.append(outcome.frames)


CHECK = CheckReport(robot="so101 (bench)", cameras=[("top", 30.0)], policy="-", policy_warmup_ms=None, scored=0,
                    voids=0, scoresheet="-", locked=LockedBlock.model_validate({
                        "task": "-", "success_definition": "-", "taxonomy": ["success", "void"], "trial_count": 0,
                        "protocol_file": "-", "protocol_sha256": "-", "policy": {"ref": "-", "fingerprint": "-"},
                        "trials": [], "robot": "so101", "stopping_rule": {"kind": "fixed"}}))


class BenchApp(RunApp):
    """`RunApp` whose 'engine' runs the guided placements on the engine thread (Enter on the check screen starts)."""

    def __init__(self, job, observer: TuiObserver, table: Table, result: Result) -> None:
        engine = SimpleNamespace(run=job, sheet=SimpleNamespace(path="bench"))
        guard = SimpleNamespace(world=None, stopped=False, emergency_stop=lambda: None)
        state = RunState(protocol_name="bench", policy="-", robot="so101", total=0, fps=30, time_limit_s=20.0)
        super().__init__(engine, observer, guard, CHECK, state)
        self.table, self.result = table, result
        self.green_seen = False

    def update_state(self, **changes) -> None:
        super().update_state(**changes)
        live: LivePlacement | None = self.state.placement
        landed = self.table.landed
        if (live is not None and live.reading is not None and live.reading.within and landed is not None
                and not self.green_seen):
            self.green_seen = True
            self.result.landed_to_green.append(time.perf_counter() - landed)


def tui_placements(view, table, references, trials, delays, result) -> None:
    observer = HidingAware(table)
    app: BenchApp | None = None

    def job() -> None:
        def reset(trial: Trial) -> None:
            app.green_seen = False
            observer.phase("placing cube")
            observer.trial_started(trial, 1, 0, len(trials))

        try:
            _placements(view, table, references, observer, trials, delays, result, on_place=reset)
        finally:
            table.world.release_renderers()   # GL contexts belong to the thread that made them

    app = BenchApp(job, observer, table, result)

    async def drive() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("enter")
            while not app.finished:
                await pilot.pause(0.05)

    asyncio.run(drive())


def top_view(world: SimWorld, scene: Scene) -> TopView:
    from proposal_bench import top_view as view_of  # the same check-time frames as the proposal bench

    return view_of(world, scene)


def latency(count: int, seed: int) -> None:
    scene = Scene()
    world = SimWorld(control_fps=30)
    view = top_view(world, scene)
    world.place_cube((0.60, 0.40), 0.0)
    references = [world.render("top", 640, 480)]
    world.release_renderers()
    table = Table(world, scene)
    rng = random.Random(seed)
    trials = generate_randomized_trials(scene, count, radius_cm=6.0, min_spacing_cm=0.5, seed=seed, max_yaw_deg=30)
    plain, tui = Result(), Result()
    t0 = time.perf_counter()
    for k, trial in enumerate(trials):   # alternate, one placement at a time, so load hits both alike
        delay = rng.uniform(0.4, 0.9)
        if k % 2 == 0:
            _placements(view, table, references, Reader(table), [trial], [delay], plain)
            world.release_renderers()
        else:
            tui_placements(view, table, references, [trial], [delay], tui)
        print(f"placement {k + 1}/{count} ({'plain' if k % 2 == 0 else 'TUI'})", flush=True)
    world.close()
    print(f"\nCube landed on its target -> trial may start ({count} placements alternating, "
          f"{time.perf_counter() - t0:.0f} s; on target but overridden after 10 frames: plain {plain.hidden}, "
          f"TUI {tui.hidden})\n")
    print("| front end | placements | landed -> start median (s) | p90 | max "
          "| landed -> screen shows it within, median (s) | frames looked at per placement "
          "| CPU s landed -> start, median |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in (("plain", plain), ("TUI", tui)):
        if not r.landed_to_start:
            print(f"| {name} | 0 | - | - | - | - | - | - |")
            continue
        s = np.array(r.landed_to_start)
        green = f"{np.median(r.landed_to_green):.2f}" if r.landed_to_green else "-"
        print(f"| {name} | {len(s)} | {np.median(s):.2f} | {np.percentile(s, 90):.2f} | {s.max():.2f} | {green} | "
              f"{np.median(r.frames):.0f} | {np.median(r.cpu_s):.2f} |")


def _styled_text(pixels: np.ndarray) -> Text:
    """The still-frame preview's way: one style string per cell, parsed by Rich."""
    text = Text()
    for row in range(pixels.shape[0] // 2):
        for col in range(pixels.shape[1]):
            top, bottom = pixels[2 * row, col], pixels[2 * row + 1, col]
            text.append("▀", style=f"rgb({top[0]},{top[1]},{top[2]}) on rgb({bottom[0]},{bottom[1]},{bottom[2]})")
        text.append("\n")
    return text


def drawing(repeats: int) -> None:
    world = SimWorld(control_fps=30)
    scene = Scene()
    view = top_view(world, scene)
    trial = Trial(index=1, dx_cm=3.0, dy_cm=-2.0, yaw_deg=20.0)
    frames = []
    for k in range(repeats):   # a moving cube: different colours each frame, as on a live camera
        world.place_cube(((scene.trained_cube_xy_cm[0] + 3.0 + 0.1 * k) / 100, (scene.trained_cube_xy_cm[1] - 2) / 100),
                         math.radians(20 + k))
        frame = world.render("top", 640, 480)
        frames.append(LivePlacement(frame, view.reading(frame, trial, Tolerance())))
    world.close()
    console = Console(width=120, color_system="truecolor", file=open("/dev/null", "w"))   # noqa: SIM115
    rows = {}
    for name, make in (("Rich text, a style string per cell (before)", _styled_text),
                       ("HalfBlocks segments, cached colours (after)", HalfBlocks)):
        t0 = time.process_time()
        for live in frames:
            pixels = camera_pixels(live, 56, 25)
            list(console.render(make(pixels)))
        rows[name] = 1000 * (time.process_time() - t0) / len(frames)
    print(f"\nDrawing one live camera view, 56 x 25 cells, crop + scale + footprint + render ({repeats} frames, "
          "CPU ms per frame)\n")
    print("| renderer | CPU ms per frame |\n|---|---:|")
    for name, ms in rows.items():
        print(f"| {name} | {ms:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=12)
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.draws:
        drawing(args.draws)
    if args.placements:
        latency(args.placements, args.seed)


if __name__ == "__main__":
    main()
