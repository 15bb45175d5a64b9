"""Simulated cameras on the rehearsed real-arm path: frame delivery and the 30 Hz loop's jitter.

The emulator (`open_rig(sim=True)`, what `harness emulate-bus --sim` runs) lives in its own
process, as it does for a user; this process is the client.

1. Delivery: two `HarnessSimCamera`s (top and wrist) at 30 fps, each read in its own thread with
   `async_read`; frames/s received per camera and latency from the end of rendering in the
   emulator to `async_read` returning here (CLOCK_MONOTONIC is shared between processes).
2. Loop: the robot `harness run --robot so101` drives (`make_so101_follower`) over the emulated bus
   with both cameras, paced at 30 Hz by `MonotonicClock`: `get_observation` (bus read + `read_latest`
   of each camera) then `send_action`. Late = how late each step starts against the ideal 1/30 s
   grid; busy = the step's own time; bus errors = replies that missed LeRobot's window. Rows: the
   loop thread at normal priority, under SCHED_FIFO as `harness run` runs a paced (real-arm) loop,
   and LeRobot's stock `SO101Follower` under SCHED_FIFO (its serial port is polled, not waited on).

Run: .venv/bin/python benchmarks/camera_bench.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError  # noqa: E402
from harness.realtime import realtime_thread  # noqa: E402
from harness.run.clock import MonotonicClock  # noqa: E402
from harness.sim.config_sim_camera import HarnessSimCameraConfig  # noqa: E402
from harness.sim.sim_camera import HarnessSimCamera  # noqa: E402

FPS = 30
SIZES = ((640, 480), (320, 240))


def serve(socket_path: str, port_file: str) -> None:
    """The emulator process: serve the bus and the cameras until stdin closes."""
    import harness.sim  # noqa: F401
    from harness.emulator.scenario import default_scenario, open_rig

    with open_rig(default_scenario(), sim=True, camera_socket=socket_path) as rig:
        gc.freeze()   # as `harness emulate-bus` does once it is built
        Path(port_file).write_text(rig.port)
        sys.stdin.read()


def start_emulator(folder: Path) -> tuple[subprocess.Popen, str, str]:
    socket_path, port_file = str(folder / "cams.sock"), folder / "port"
    proc = subprocess.Popen([sys.executable, __file__, "--serve", socket_path, str(port_file)],
                            stdin=subprocess.PIPE, cwd=REPO)
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("emulator did not start")
        time.sleep(0.1)
    return proc, port_file.read_text(), socket_path


def stop_emulator(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def camera_configs(socket_path: str, width: int, height: int) -> dict[str, HarnessSimCameraConfig]:
    return {name: HarnessSimCameraConfig(camera=name, socket_path=socket_path, width=width, height=height, fps=FPS)
            for name in ("top", "wrist")}


def delivery(socket_path: str, width: int, height: int, seconds: float) -> dict[str, tuple[float, float, float]]:
    cameras = {name: HarnessSimCamera(cfg) for name, cfg in camera_configs(socket_path, width, height).items()}
    results: dict[str, tuple[float, float, float]] = {}

    def reader(name: str, camera: HarnessSimCamera) -> None:
        latencies, stamps = [], []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            try:
                camera.async_read(timeout_ms=1000)
            except TimeoutError:
                continue
            latencies.append(time.monotonic() - (camera.latest_rendered_at or 0.0))
            stamps.append(time.perf_counter())
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
        ms = np.array(latencies) * 1e3
        results[name] = (rate, float(np.percentile(ms, 50)), float(np.percentile(ms, 99)))

    for camera in cameras.values():
        camera.connect()
    threads = [threading.Thread(target=reader, args=item) for item in cameras.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for camera in cameras.values():
        camera.disconnect()
    return results


def loop_jitter(port: str, socket_path: str, size: tuple[int, int] | None, seconds: float,
                realtime: bool, robot_kind: str) -> tuple[float, ...]:
    """`robot_kind`: "harness" is what `harness run --robot so101` drives (its bus sleeps while a reply is
    on its way); "lerobot" is LeRobot's stock SO101Follower (its port is polled)."""
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    from harness.robots.so101 import REPO_CALIBRATION, make_so101_follower

    if robot_kind == "harness":
        sources = {name: f"sim:{socket_path}@{size[0]}x{size[1]}" for name in ("top", "wrist")} if size else {}
        robot = make_so101_follower(port, sources, fps=FPS, robot_id="emulated_follower")
    else:
        cameras = camera_configs(socket_path, *size) if size else {}
        robot = SO101Follower(SO101FollowerConfig(port=port, id="emulated_follower",
                                                  calibration_dir=REPO_CALIBRATION, cameras=cameras))
    robot.connect()
    clock, period = MonotonicClock(), 1.0 / FPS
    hold = {k: v for k, v in robot.get_observation().items() if k.endswith(".pos")}
    lateness, busy, failures = [], [], 0
    with realtime_thread(enabled=realtime) as priority:   # as the run engine does for a paced loop
        if realtime and not priority.realtime:
            raise SystemExit(f"real-time scheduling refused: {priority.why_not}")
        start = clock.now()
        for step in range(int(seconds * FPS)):
            due = start + step * period
            clock.sleep(due - clock.now())
            began = clock.now()
            lateness.append(began - due)
            try:
                robot.get_observation()
                robot.send_action(hold)
            except (ConnectionError, HarnessError):   # a reply missed its window ("There is no status packet")
                failures += 1
            busy.append(clock.now() - began)
    robot.disconnect()
    late_ms, busy_ms = np.array(lateness[1:]) * 1e3, np.array(busy[1:]) * 1e3
    return (float(np.percentile(late_ms, 50)), float(np.percentile(late_ms, 99)), float(late_ms.max()),
            float(np.percentile(busy_ms, 50)), float(np.percentile(busy_ms, 99)), float(busy_ms.max()), failures)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--serve", nargs=2, metavar=("SOCKET", "PORT_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    print(f"# simulated cameras, {os.cpu_count()} CPUs, {args.seconds:.0f} s per row")
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, socket_path = start_emulator(Path(tmp))
        try:
            print("\n| cameras | camera | frames/s (asked 30) | render->async_read p50 ms | p99 ms |")
            print("|---|---|---|---|---|")
            for width, height in SIZES:
                for name, (rate, p50, p99) in delivery(socket_path, width, height, args.seconds).items():
                    print(f"| 2 x {width}x{height} | {name} | {rate:.1f} | {p50:.1f} | {p99:.1f} |")
            print("\n| 30 Hz loop over the emulator | robot | loop thread | late p50 ms | late p99 ms | late max ms "
                  "| busy p50 ms | busy p99 ms | busy max ms | bus errors |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            rows = (("harness", False), ("harness", True), ("lerobot", True))
            for size in (None, *SIZES):
                label = f"2 cameras {size[0]}x{size[1]}" if size else "no cameras"
                for robot_kind, realtime in rows:
                    *row, failures = loop_jitter(port, socket_path, size, args.seconds, realtime, robot_kind)
                    thread = "SCHED_FIFO" if realtime else "normal"
                    robot = "harness run (BusCheckedSO101Follower)" if robot_kind == "harness" else "SO101Follower"
                    print(f"| {label} | {robot} | {thread} | " + " | ".join(f"{v:.2f}" for v in row)
                          + f" | {failures} |")
        finally:
            stop_emulator(proc)


if __name__ == "__main__":
    main()
