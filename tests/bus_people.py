"""A person at the emulated arm, for fix-ids tests: each instruction performs the next physical action."""

from __future__ import annotations

from collections.abc import Callable

import serial

from harness.bus import packets as p
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES
from harness.emulator.servos import Firmware, Servo, ServoChain


class ScriptedOperator:
    def __init__(self, bus: PtyBus, actions: list[Callable[[], object]]) -> None:
        self.bus, self.actions, self.said, self.instructions = bus, list(actions), [], []

    def say(self, message: str) -> None:
        self.said.append(message)

    def confirm(self, question: str) -> bool:
        return True

    def instruct(self, message: str) -> None:
        """The next scripted action; "Check it: now turn the X" (fix-ids' check that the servo on the bus stays
        still while the other joint it could be is turned) is done as asked, without a scripted action."""
        self.instructions.append(message)
        with self.bus.lock:
            if message.startswith("Check it"):
                turn(self.bus.chain, next(name for name in SO101_NAMES if f"now turn the {name}" in message))
                return
            self.actions.pop(0)()

    @property
    def transcript(self) -> str:
        return "\n".join(self.said + self.instructions)


def turn(chain: ServoChain, name: str, ticks: int = 400) -> None:
    """A person turns a joint by hand (torque is off): its encoder reads a new position."""
    chain.servo(name).position = (chain.servo(name).position + ticks) % 4096


def arm(chain_class: type[ServoChain] = ServoChain, ids: dict[str, int] | None = None,
        firmware: Firmware = Firmware.DOCUMENTED, **chain_kwargs) -> ServoChain:
    """Six STS3215s named as an SO-101's joints; `ids` overrides a joint's ID as if stored in its EEPROM."""
    servos = [Servo(name, i + 1, firmware=firmware) for i, name in enumerate(SO101_NAMES)]
    for servo in servos:
        if ids and servo.name in ids:
            servo.eeprom[p.ADDR_ID] = ids[servo.name]
            servo.power_cycle()
    return chain_class(servos, **chain_kwargs)


def open_port(port: str) -> serial.Serial:
    return serial.Serial(port, 1_000_000, timeout=0)


class Person(ScriptedOperator):
    """A person who does what each prompt asks, with the servo they have in hand: at each "Connect ONLY"
    prompt the next servo of `in_hand` (the last one again once the list runs out) is the one connected,
    and "turn the joint" turns that servo; at the final check, on the assembled arm, the joint named."""

    def __init__(self, bus: PtyBus, chain: ServoChain, in_hand: list[str]) -> None:
        super().__init__(bus, [])
        self.chain, self.in_hand, self.holding = chain, list(in_hand), None

    def instruct(self, message: str) -> None:
        self.instructions.append(message)
        chain = self.chain
        with self.bus.lock:
            if message.startswith("Connect ONLY"):
                self.holding = self.in_hand.pop(0) if len(self.in_hand) > 1 else self.in_hand[0]
                chain.only(self.holding)
            elif message.startswith("Identify it"):
                turn(chain, self.holding)
            elif message.startswith("Check it"):   # the other joint named: it moves only if it is the one held
                turn(chain, next(name for name in SO101_NAMES if f"now turn the {name}" in message))
            elif message.startswith("Reconnect"):
                chain.plug(*SO101_NAMES)
            elif message.startswith("Now power-cycle"):
                chain.power_cycle()
            elif message.startswith("Final check"):
                turn(chain, next(name for name in SO101_NAMES if f"the {name}" in message))
            else:
                raise AssertionError(f"a prompt this person does not know: {message}")
