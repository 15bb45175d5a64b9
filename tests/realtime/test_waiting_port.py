"""The bus `harness` drives a real arm with waits for a servo's reply instead of spinning, and never takes
a late reply for the answer to a later request (waiting_port.py says why both matter on a real arm)."""

from __future__ import annotations

import os
import time

import pytest
from lerobot.motors import Motor, MotorNormMode

from harness.bus import packets as p
from harness.bus.relocking_bus import RelockingFeetechBus
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES
from harness.emulator.servos import Servo, ServoChain
from tests.helpers import wait_until

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores


def _arm() -> ServoChain:
    return ServoChain([Servo(name, i + 1) for i, name in enumerate(SO101_NAMES)])


def _motors() -> dict[str, Motor]:
    return {name: Motor(i + 1, "sts3215", MotorNormMode.DEGREES) for i, name in enumerate(SO101_NAMES)}


def test_waiting_for_a_silent_servo_leaves_the_core_free() -> None:
    chain = _arm()
    with PtyBus(chain) as bus:
        motor_bus = RelockingFeetechBus(bus.port, _motors())
        motor_bus.port_handler.openPort()
        with bus.lock:
            chain.unplug("gripper")
        wall, cpu = time.perf_counter(), time.thread_time()
        answers = [motor_bus.ping(6) for _ in range(8)]
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        motor_bus.port_handler.closePort()
    assert answers == [None] * 8        # each ping waited out its whole reply window
    assert wall > 0.1
    assert cpu < 0.3 * wall, f"{cpu * 1e3:.0f} ms of CPU in {wall * 1e3:.0f} ms of waiting: the port is polled"


def test_a_reply_that_came_too_late_is_not_read_as_the_next_answer() -> None:
    chain = _arm()
    with PtyBus(chain) as bus:
        motor_bus = RelockingFeetechBus(bus.port, _motors())
        motor_bus.connect()
        truth = motor_bus.sync_read("Present_Position", normalize=False)
        # The shoulder_pan's answer to an earlier read of a 2-byte register, after that read gave up on it.
        late = p.status_packet(1, data=(0).to_bytes(2, "little"))
        os.write(bus.master, late)
        wait_until(lambda: motor_bus.port_handler.ser.in_waiting >= len(late), 2.0, "the late reply in the port")
        again = motor_bus.sync_read("Present_Position", normalize=False)
        dropped = motor_bus.port_handler.stale_bytes_dropped
        motor_bus.disconnect()
    assert truth["shoulder_pan"] != 0
    assert again == truth
    assert dropped == len(late)
