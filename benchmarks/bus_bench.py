"""Feetech bus speed through the emulator: sync read/write with wire timing at 1 Mbaud, stock LeRobot
bus vs the re-locking bus, fix-ids' diagnosis against LeRobot's scan_port on a collided chain, and
fix-ids' voting scan against the single-ping scan it replaced, on a clean and a noisy line; with `--imports`,
what importing the bus package costs a fresh process (issue 61: the servo emulator left `bus`, and MuJoCo with it).

Run: .venv/bin/python benchmarks/bus_bench.py [--noise-only] [--torque-check] [--imports]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import serial
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bus import packets as p
from harness.bus.diagnosis import diagnose
from harness.bus.relocking_bus import RelockingFeetechBus
from harness.bus.scan import SCAN_BAUDS, SO101_IDS, TARGET_BAUD, Details, Heard, Scan, Seen, quick_scan
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES
from harness.emulator.servos import Faults, Servo, ServoChain

ITERATIONS = 300


def chain(gripper_id: int = 6, faults: Faults | None = None) -> ServoChain:
    servos = [Servo(n, i + 1) for i, n in enumerate(SO101_NAMES)]
    servos[5].eeprom[p.ADDR_ID] = gripper_id
    servos[5].power_cycle()
    return ServoChain(servos, faults)


def motors() -> dict[str, Motor]:
    return {n: Motor(i + 1, "sts3215", MotorNormMode.DEGREES) for i, n in enumerate(SO101_NAMES)}


def time_calls(fn, n: int = ITERATIONS) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(1000 * (time.perf_counter() - t0))
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * len(samples)) - 1]


def sync_io() -> None:
    print("| bus | sync_read Present_Position, 6 servos: p50 / p99 ms | sync_write Goal_Position: p50 / p99 ms |")
    print("|---|---|---|")
    for cls in (FeetechMotorsBus, RelockingFeetechBus):
        with PtyBus(chain(), wire_timing=True) as emu:
            bus = cls(emu.port, motors())
            bus.connect()
            read = time_calls(lambda b=bus: b.sync_read("Present_Position", normalize=False))
            goal = dict.fromkeys(SO101_NAMES, 2048)
            write = time_calls(lambda b=bus, g=goal: b.sync_write("Goal_Position", g, normalize=False))
            bus.disconnect()
        print(f"| {cls.__name__} | {read[0]:.2f} / {read[1]:.2f} | {write[0]:.2f} / {write[1]:.2f} |")
    print("\nWire-time floor at 1 Mbaud: sync read of 6 x 2 bytes = 14 B out + 48 B back = 0.62 ms; "
          "sync write = 26 B = 0.26 ms.\n")


def diagnosis() -> None:
    print("| tool | chain with gripper and wrist_roll both at ID 5 | seconds | what it says |")
    print("|---|---|---|---|")
    with PtyBus(chain(gripper_id=5), wire_timing=True) as emu:
        with serial.Serial(emu.port, 1_000_000, timeout=0) as ser:
            t0 = time.perf_counter()
            findings = diagnose(quick_scan(Wire(ser)))
            elapsed = time.perf_counter() - t0
        kinds = ", ".join(f"{f.kind} {f.servo_id}" for f in findings)
        print(f"| harness fix-ids (diagnosis) | 8 baud rates, IDs 1-6 | {elapsed:.2f} | {kinds} |")
        t0 = time.perf_counter()
        found = FeetechMotorsBus.scan_port(emu.port)
        elapsed = time.perf_counter() - t0
        print(f"| LeRobot scan_port | broadcast ping at each baud rate | {elapsed:.2f} | found {found} |")


def single_ping_scan(wire: Wire) -> Scan:
    """The scan fix-ids used before issue 14: one ping per ID per baud rate, one read of model and Lock."""
    t0 = time.perf_counter()
    scan = Scan()
    state = {"ok": Heard.ANSWERS, "garbled": Heard.COLLIDES, "none": Heard.SILENT}
    for baud in SCAN_BAUDS:
        wire.set_baud(baud)
        for servo_id in SO101_IDS:
            heard = state[wire.ping(servo_id).state]
            if heard is Heard.SILENT:
                continue
            details = Details()
            if heard is Heard.ANSWERS:
                model, lock = wire.read(servo_id, p.ADDR_MODEL, 2), wire.read(servo_id, p.ADDR_LOCK, 1)
                details = Details(model=int.from_bytes(model.data, "little") if model.state == "ok" else None,
                                  lock=lock.data[0] if lock.state == "ok" and lock.data else None)
            scan.seen.append(Seen(baud, servo_id, heard, details=details))
    wire.set_baud(TARGET_BAUD)
    scan.seconds = time.perf_counter() - t0
    return scan


LINES = {"clean": (0.0, 0.0), "5% dropped + 5% corrupted": (0.05, 0.05), "10% dropped + 10% corrupted": (0.1, 0.1)}
ARMS = {"healthy": (6, set()), "gripper also at ID 5": (5, {("collision", 5), ("missing", 6)})}


def noisy_line(runs: int = 5) -> None:
    print("\n| line | arm | single ping (before): s, wrong | voting scan (after): s, wrong | after: how sure |")
    print("|---|---|---|---|---|")
    for line, (drop, corrupt) in LINES.items():
        for arm, (gripper_id, expected) in ARMS.items():
            cells, sure = [], []
            for scanner in (single_ping_scan, quick_scan):
                seconds, wrong = [], 0
                for seed in range(runs):
                    with PtyBus(chain(gripper_id, Faults(drop, corrupt, seed)), wire_timing=True) as emu, \
                            serial.Serial(emu.port, 1_000_000, timeout=0) as ser:
                        t0 = time.perf_counter()
                        scan = scanner(Wire(ser))
                        found = {(f.kind.value, f.servo_id) for f in diagnose(scan)}
                        seconds.append(time.perf_counter() - t0)
                    wrong += found != expected
                    if scanner is quick_scan:
                        sure.append(scan.certainty.value)
                cells.append(f"{statistics.median(seconds):.2f}, {wrong} of {runs}")
            verdicts = ", ".join(f"{sure.count(v)} {v}" for v in ("sure", "likely", "unsure") if sure.count(v))
            print(f"| {line} | {arm} | {cells[0]} | {cells[1]} | {verdicts} |")


def torque_check_cost(iterations: int = 200) -> None:
    """What checking torque before every motion adds to `send_action` (issue 14's power-cycle detection)."""
    from harness.emulator.scenario import build_chain, default_scenario
    from harness.robots.so101 import REPO_CALIBRATION, make_so101_follower

    print("\n| send_action, 6 servos, wire-timed emulator | p50 / p99 ms |")
    print("|---|---|")
    for label, check in (("LeRobot SO101Follower.send_action (no torque check)", False),
                         ("BusCheckedSO101Follower.send_action (torque read first)", True)):
        with PtyBus(build_chain(default_scenario()), wire_timing=True) as emu:
            robot = make_so101_follower(emu.port, {}, robot_id="emulated_follower", calibration_dir=REPO_CALIBRATION)
            robot.connect()
            goal = robot.get_observation()
            send = robot.send_action if check else super(type(robot), robot).send_action
            p50, p99 = time_calls(lambda s=send, g=goal: s(g), iterations)
            robot.disconnect()
        print(f"| {label} | {p50:.2f} / {p99:.2f} |")


IMPORTS = {   # what a fresh process imports, by what it is for
    "harness.bus.fix_ids (harness fix-ids)": "import harness.bus.fix_ids",
    "harness.bus.relocking_bus (a real arm's bus)": "import harness.bus.relocking_bus",
    "every module of harness/bus": ("import importlib, pkgutil, harness.bus\n"
                                    "for m in pkgutil.iter_modules(harness.bus.__path__):\n"
                                    "    importlib.import_module('harness.bus.' + m.name)"),
    "every module of harness/emulator (the emulated desk)": (
        "import importlib, pkgutil, harness.emulator\n"
        "for m in pkgutil.iter_modules(harness.emulator.__path__):\n"
        "    importlib.import_module('harness.emulator.' + m.name)"),
}
PROBE = """import sys, time
t0, cpu0 = time.perf_counter(), time.process_time()
{code}
seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
print(json.dumps({{"s": seconds, "cpu": cpu, "mujoco": "mujoco" in sys.modules, "torch": "torch" in sys.modules,
                  "sim": sorted(m for m in sys.modules if m.startswith("harness.sim")),
                  "modules": len(sys.modules)}}))"""


def import_cost(runs: int = 5) -> None:
    """Wall and CPU time of the imports alone, in a fresh interpreter each run (median of `runs`; the CPU time is
    the steadier on a busy machine), and whether they pull in MuJoCo, torch or any of `harness.sim`."""
    root = Path(__file__).resolve().parents[1]
    print(f"\n| import, fresh process | median of {runs}: wall / CPU ms | modules loaded | MuJoCo | torch | "
          "harness.sim modules |")
    print("|---|---|---|---|---|---|")
    for label, code in IMPORTS.items():
        if "harness.emulator" in code and not (root / "harness" / "emulator").is_dir():
            continue   # before issue 61 moved the emulator out of harness/bus
        results = []
        for _ in range(runs):
            out = subprocess.run([sys.executable, "-c", "import json\n" + PROBE.format(code=code)], cwd=root,
                                 capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root),
                                                                                  "PATH": "/usr/bin:/bin"})
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        last = results[-1]
        wall, cpu = (1000 * statistics.median(r[key] for r in results) for key in ("s", "cpu"))
        print(f"| {label} | {wall:.0f} / {cpu:.0f} | {last['modules']} | "
              f"{'yes' if last['mujoco'] else 'no'} | {'yes' if last['torch'] else 'no'} | {len(last['sim'])} |")


if __name__ == "__main__":
    if "--imports" in sys.argv:
        import_cost()
        sys.exit()
    if "--torque-check" in sys.argv:
        torque_check_cost()
        sys.exit()
    if "--noise-only" not in sys.argv:
        sync_io()
        diagnosis()
    noisy_line()
