"""How long an emulated desk's servos take to answer a ping while other emulated desks run beside it.

Why: the real-time tests (the serial pass) fail beside other work when a servo's reply misses LeRobot's window
(about 35 ms for a ping, no retry at its handshake), and two rehearsed arms at once were seen to starve each
other. Each desk here is what `harness rehearse` runs: the arm's own process (`open_rig_process`: the servos on a
pseudo-terminal, the simulated arm, and its camera render process), with both cameras read at 640x480, 30 fps,
through LeRobot's camera API (`HarnessSimCamera`, whose reader thread runs at the cameras' real-time priority),
as a run reads them. The pings go to the first desk from a thread at the control loop's real-time priority
(`realtime.LOOP_PRIORITY`, above the cameras), so the reader's own waits for a core are not what is measured.

`--hogs N` adds N busy loops at normal priority (what a test suite's other workers are to the desk);
`--hog-kind realtime` runs them under SCHED_FIFO at the simulated cameras' priority (what another desk's camera
rendering is), `--hog-kind favoured` at nice -20 (normal scheduling, the largest share of the cores).
`--pinger lerobot` pings as LeRobot's handshake does instead: scservo_sdk's own port handler, which polls the
port until its window closes, from a thread at normal priority; a reply later than the window is a lost ping.
`--pinger harness` pings the same way through the harness's port handler (`WaitingPortHandler`: it sleeps until
the port is readable), as `harness run` and `harness rehearse` read a real arm.

Run: .venv/bin/python benchmarks/desk_ping_bench.py [--desks 1 2 3] [--hogs 0 2] [--seconds 20] [--pinger lerobot]
                                                    [--hog-kind normal realtime favoured]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serial

from harness.bus.wire import Wire
from harness.emulator.remote_rig import open_rig_process
from harness.realtime import CAMERA_PRIORITY, LOOP_PRIORITY, realtime_thread
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


def lerobot_ping_latencies_ms(port: str, seconds: float, waiting: bool = False) -> list[float]:
    """Ping servo 1 every 5 ms as LeRobot's handshake does (scservo_sdk, its ~34 ms window, no retry); each round
    trip in ms, inf for a ping that got no answer in its window. `waiting`: through the harness's port handler."""
    import scservo_sdk as scs

    from harness.bus.lerobot_private import patch_setPacketTimeout
    from harness.bus.waiting_port import WaitingPortHandler

    handler = WaitingPortHandler(port) if waiting else scs.PortHandler(port)
    handler.setPacketTimeout = patch_setPacketTimeout.__get__(handler)   # LeRobot's fix, as FeetechMotorsBus has it
    handler.openPort()
    handler.setBaudRate(1_000_000)
    packets = scs.PacketHandler(0)
    latencies = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            asked = time.monotonic()
            try:
                _, result, _ = packets.ping(handler, 1)
            except IndexError:   # the SDK's ping indexes an empty reply when its second question goes unanswered
                result = scs.COMM_RX_TIMEOUT
            latencies.append((time.monotonic() - asked) * 1000 if result == scs.COMM_SUCCESS else math.inf)
            time.sleep(0.005)
    finally:
        handler.closePort()
    return sorted(latencies)


PINGERS = {"realtime": ping_latencies_ms, "lerobot": lerobot_ping_latencies_ms,
           "harness": lambda port, seconds: lerobot_ping_latencies_ms(port, seconds, waiting=True)}
# A busy loop ends when its standard input closes: when this script ends, however it ends (a real-time loop left
# spinning would hold a core at 95 % until someone finds it).
HOG = ("import os, sys, threading\n"
       "threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()\n"
       "{set_up}while True: pass\n")
HOG_SET_UP = {   # what a busy loop does to its own scheduling before it spins
    "normal": "",
    "realtime": f"import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({CAMERA_PRIORITY}))\n",
    "favoured": "import os; os.nice(-20)\n",
}


def measure(desks: int, hogs: int, seconds: float, folder: Path, pinger: str = "realtime",
            hog_kind: str = "normal") -> list[float]:
    with contextlib.ExitStack() as stack:
        for _ in range(hogs):
            hog = subprocess.Popen([sys.executable, "-c", HOG.format(set_up=HOG_SET_UP[hog_kind])],
                                   stdin=subprocess.PIPE)
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
        return PINGERS[pinger](rigs[0].port, seconds)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # unwinds: the desks close, the loops are stopped
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--desks", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pinger", choices=sorted(PINGERS), default="realtime")
    parser.add_argument("--hog-kind", choices=list(HOG_SET_UP), nargs="+", default=["normal"])
    args = parser.parse_args()
    if "realtime" in args.hog_kind and max(args.hogs) >= (os.cpu_count() or 1):
        parser.error("as many real-time busy loops as cores would leave this machine 5 % of its time: use fewer")
    print(f"| desks | hogs | pings | p50 ms | p99 ms | max ms | over {LEROBOT_PING_WINDOW_MS:.0f} ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    runs = dict.fromkeys((d, h, k if h else "normal") for k in args.hog_kind for h in args.hogs for d in args.desks)
    for desks, hogs, kind in runs:
        with tempfile.TemporaryDirectory(prefix="desk-ping-") as folder:
            latencies = measure(desks, hogs, args.seconds, Path(folder), args.pinger, kind)
        count = len(latencies)
        late = sum(latency > LEROBOT_PING_WINDOW_MS for latency in latencies)
        hogs_text = f"{hogs} {kind}" if hogs else "0"
        print(f"| {desks} | {hogs_text} | {count} | {latencies[count // 2]:.2f} | {latencies[int(count * 0.99)]:.2f} | "
              f"{latencies[-1]:.1f} | {late} |", flush=True)


if __name__ == "__main__":
    main()
