"""The operator TUI for a prepared run: the check screen's measurements and the app itself."""

from __future__ import annotations

import time

from harness.app.build import RunSetup
from harness.models.taxonomy import Label
from harness.policies.background import BackgroundPolicy
from harness.tui.observer import TuiObserver
from harness.tui.run_app import RunApp
from harness.tui.screens import CheckReport
from harness.tui.state import RunState, Tally


def check_report(setup: RunSetup) -> CheckReport:
    """What the TUI's check screen shows, measured now: nothing here moves the arm, nor waits for a policy still
    loading in the background (the screen shows its progress; the first trial waits). The simulator's GL contexts
    this thread makes (the cameras' rate, the policy's warm-up observation) are freed here, on this thread: the
    engine draws from its own (`sim.world`)."""
    world = setup.robot.world
    try:
        return _measured_check(setup)
    finally:
        if world is not None:
            world.release_renderers()


def _measured_check(setup: RunSetup) -> CheckReport:
    robot, policy, sheet = setup.robot, setup.policy, setup.sheet
    cameras: list[tuple[str, float | None]] = []
    world = robot.world
    if world is not None:
        for cam in ("top", "wrist"):
            world.render(cam, 640, 480)
            t0 = time.perf_counter()
            for _ in range(5):
                world.render(cam, 640, 480)
            cameras.append((cam, 5 / (time.perf_counter() - t0)))
    else:
        for name, camera in getattr(robot.robot, "cameras", {}).items():
            t0, frames = time.perf_counter(), 0
            try:
                for _ in range(10):
                    camera.async_read()
                    frames += 1
            except Exception:  # a camera that fails here is shown as "no frames": the check's whole point
                pass
            cameras.append((name, frames / (time.perf_counter() - t0) if frames else None))
    loading = policy if isinstance(policy, BackgroundPolicy) else None
    warm = None
    if loading is not None:   # warmed up on its loading thread once loaded, with this observation
        loading.warm_up_when_loaded(robot.get_observation())
    elif hasattr(policy, "warm_up"):
        warm = policy.warm_up(robot.get_observation())
    label = f"{sheet.locked.robot} ({'simulated SO-101' if world is not None else 'SO-101 follower'})"
    return CheckReport(robot=label, cameras=cameras, policy=policy.name, policy_warmup_ms=warm,
                       locked=sheet.locked, scored=len(sheet.scored_attempts()), warnings=robot.connect_warnings,
                       voids=sum(1 for a in sheet.attempts if a.label is Label.VOID), scoresheet=str(sheet.path),
                       loading=loading)


def make_app(setup: RunSetup, undo_s: float = 3.0) -> RunApp:
    """The operator TUI over this run's engine (the engine itself is the same as headless).

    `setup` must have been prepared with `FrontEnd.TUI`, so its engine already reports to a
    `TuiObserver`; the app receives that same observer.
    """
    if not isinstance(setup.observer, TuiObserver):
        raise TypeError("make_app needs a run prepared with FrontEnd.TUI")
    sheet, protocol = setup.sheet, setup.protocol
    tally = Tally()
    for attempt in sheet.attempts:
        tally = tally.add(attempt.label)
    config = getattr(setup.robot.robot, "config", None)
    pace = "" if setup.robot.world is None else "real-time" if getattr(config, "realtime", False) else "lock-step"
    state = RunState(protocol_name=protocol.name, policy=sheet.locked.policy.ref, robot=sheet.locked.robot,
                     pace=pace,
                     total=sheet.locked.trial_count, fps=protocol.fps, time_limit_s=protocol.episode_time_limit_s,
                     trained_xy_cm=protocol.scene.trained_cube_xy_cm, bowl_xy_cm=protocol.scene.bowl_xy_cm,
                     bowl_diameter_cm=protocol.scene.bowl_diameter_cm, tally=tally,
                     timing_withheld=sheet.still_blind)
    return RunApp(setup.engine, setup.observer, setup.robot, check_report(setup), state, undo_s=undo_s)
