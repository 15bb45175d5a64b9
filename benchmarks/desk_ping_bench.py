"""How long an emulated desk's servos take to answer a ping while other emulated desks run beside it.

Why: the real-time tests (the serial pass) fail beside other work when a servo's reply misses LeRobot's window
(about 35 ms for a ping, no retry at its handshake), and two rehearsed arms at once were seen to starve each
other. Each desk here is what `harness rehearse` runs: the arm's own process (`open_rig_process`: the servos on a
pseudo-terminal, the simulated arm, and its camera render process), with both cameras read at 640x480, 30 fps,
through LeRobot's camera API (`HarnessSimCamera`, whose reader thread runs at the cameras' real-time priority),
as a run reads them. The pings go to the first desk from a thread at the control loop's real-time priority
(`realtime.LOOP_PRIORITY`, above the cameras), so the reader's own waits for a core are not what is measured.

`--hogs N` adds N busy loops at normal priority (what a test suite's other workers are to the desk).

Run: .venv/bin/python benchmarks/desk_ping_bench.py [--desks 1 2 3] [--hogs 0 2] [--seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serial

from harness.bus.remote_rig import open_rig_process
from harness.bus.wire import Wire
from harness.realtime import LOOP_PRIORITY, realtime_thread
from harness.sim.config_sim_camera import HarnessSimCameraConfig
from harness.sim.sim_camera import HarnessSimCamera

LEROBOT_PING_WINDOW_MS = 34.0   # scservo_sdk: two 16 ms latency timers and 2 ms, for a ping's few bytes


def ping_latencies_ms(port: str, seconds: float) -> list[float]:
    """Ping servo 1 every 5 ms for `seconds`; each round trip in ms (inf: no answer within 2 s)."""
    with realtime_thread(priority=LOOP_PRIORITY), serial.Serial(port, 1_000_000, timeout=0) as ser:
        wire = Wire(ser, reply_window_s=2.0)
        latencies = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            asked = time.monotonic()
            answer = wire.ping(1)
            latencies.append((time.monotonic() - asked) * 1000 if answer.state == "ok" else math.inf)
            time.sleep(0.005)
    return sorted(latencies)


def measure(desks: int, hogs: int, seconds: float, folder: Path) -> list[float]:
    with contextlib.ExitStack() as stack:
        for _ in range(hogs):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            stack.callback(hog.wait)
            stack.callback(hog.kill)
        rigs = [stack.enter_context(open_rig_process(folder / f"cams{i}.sock")) for i in range(desks)]
        for i in range(desks):
            for camera in ("top", "wrist"):   # LeRobot's camera API, as a run reads them
                reader = HarnessSimCamera(HarnessSimCameraConfig(camera=camera, width=640, height=480, fps=30,
                                                                 socket_path=str(folder / f"cams{i}.sock")))
                reader.connect()
                stack.callback(reader.disconnect)
        time.sleep(3.0)   # every camera streaming before the first ping
        return ping_latencies_ms(rigs[0].port, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--desks", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(f"| desks | hogs | pings | p50 ms | p99 ms | max ms | over {LEROBOT_PING_WINDOW_MS:.0f} ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for desks, hogs in ((d, h) for h in args.hogs for d in args.desks):
        with tempfile.TemporaryDirectory(prefix="desk-ping-") as folder:
            latencies = measure(desks, hogs, args.seconds, Path(folder))
        count = len(latencies)
        late = sum(latency > LEROBOT_PING_WINDOW_MS for latency in latencies)
        print(f"| {desks} | {hogs} | {count} | {latencies[count // 2]:.2f} | {latencies[int(count * 0.99)]:.2f} | "
              f"{latencies[-1]:.1f} | {late} |", flush=True)


if __name__ == "__main__":
    main()
