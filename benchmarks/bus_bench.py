"""Feetech bus speed through the emulator: sync read/write with wire timing at 1 Mbaud, stock LeRobot
bus vs the re-locking bus, and fix-ids' diagnosis against LeRobot's scan_port on a collided chain.

Run: .venv/bin/python benchmarks/bus_bench.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import serial
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bus import protocol as p
from harness.bus.emulator import Servo, ServoChain
from harness.bus.fix_ids import diagnose, quick_scan
from harness.bus.pty_port import PtyBus
from harness.bus.relocking_bus import RelockingFeetechBus
from harness.bus.scenario import SO101_NAMES
from harness.bus.wire import Wire

ITERATIONS = 300


def chain(gripper_id: int = 6) -> ServoChain:
    servos = [Servo(n, i + 1) for i, n in enumerate(SO101_NAMES)]
    servos[5].eeprom[p.ADDR_ID] = gripper_id
    servos[5].power_cycle()
    return ServoChain(servos)


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


if __name__ == "__main__":
    sync_io()
    diagnosis()
