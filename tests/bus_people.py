"""A person at the emulated arm, for fix-ids tests: each instruction performs the next physical action."""

from __future__ import annotations

from collections.abc import Callable

import serial

from harness.bus import protocol as p
from harness.bus.emulator import Servo, ServoChain
from harness.bus.pty_port import PtyBus
from harness.bus.scenario import SO101_NAMES


class ScriptedOperator:
    def __init__(self, bus: PtyBus, actions: list[Callable[[], object]]) -> None:
        self.bus, self.actions, self.said, self.instructions = bus, list(actions), [], []

    def say(self, message: str) -> None:
        self.said.append(message)

    def confirm(self, question: str) -> bool:
        return True

    def instruct(self, message: str) -> None:
        self.instructions.append(message)
        with self.bus.lock:
            self.actions.pop(0)()

    @property
    def transcript(self) -> str:
        return "\n".join(self.said + self.instructions)


def turn(chain: ServoChain, name: str, ticks: int = 400) -> None:
    """A person turns a joint by hand (torque is off): its encoder reads a new position."""
    chain.servo(name).position = (chain.servo(name).position + ticks) % 4096


def arm(chain_class: type[ServoChain] = ServoChain, ids: dict[str, int] | None = None, **chain_kwargs) -> ServoChain:
    """Six STS3215s named as an SO-101's joints; `ids` overrides a joint's ID as if stored in its EEPROM."""
    servos = [Servo(name, i + 1) for i, name in enumerate(SO101_NAMES)]
    for servo in servos:
        if ids and servo.name in ids:
            servo.eeprom[p.ADDR_ID] = ids[servo.name]
            servo.power_cycle()
    return chain_class(servos, **chain_kwargs)


def open_port(port: str) -> serial.Serial:
    return serial.Serial(port, 1_000_000, timeout=0)
