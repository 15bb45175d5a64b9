"""Emulator scenarios from YAML, and the `harness emulate-bus` console."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.bus import protocol as p
from harness.bus.emulator import Faults, Firmware, Servo, ServoChain
from harness.errors import HarnessInputError

SO101_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class ServoSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    id: int = Field(ge=0, le=253)
    baud: int = 1_000_000
    firmware: Literal["documented", "commit-on-relock", "reject-while-locked"] = "documented"
    model: int = p.STS3215_MODEL
    position: int = Field(2048, ge=0, le=4095)
    min_limit: int = Field(0, ge=0, le=4095)     # Min/Max_Position_Limit in EEPROM (LeRobot's calibrated range)
    max_limit: int = Field(4095, ge=0, le=4095)
    ack_with_old_id: bool = True


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    servos: list[ServoSpec]
    drop_rate: float = Field(0.0, ge=0, le=1)
    corrupt_rate: float = Field(0.0, ge=0, le=1)
    seed: int = 0
    wire_timing: bool = False


def default_scenario() -> Scenario:
    """A healthy SO-101 follower: IDs 1-6 at 1 Mbaud, calibrated as calibration/emulated_follower.json."""
    return Scenario(servos=[ServoSpec(name=n, id=i + 1, **({"min_limit": 1900, "max_limit": 3400}
                                                            if n == "gripper" else {}))
                            for i, n in enumerate(SO101_NAMES)])


def load_scenario(path: str | Path) -> Scenario:
    try:
        return Scenario.model_validate(yaml.safe_load(Path(path).read_text()))
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror}") from None
    except ValidationError as err:
        first = err.errors()[0]
        raise HarnessInputError(path, ".".join(str(x) for x in first["loc"]), first["msg"]) from None


def build_chain(scenario: Scenario) -> ServoChain:
    servos = []
    for spec in scenario.servos:
        if spec.baud not in p.INDEX_BY_BAUD:
            raise HarnessInputError(None, f"servos.{spec.name}.baud", f"{spec.baud} is not an STS3215 baud rate")
        servo = Servo(spec.name, spec.id, p.INDEX_BY_BAUD[spec.baud], Firmware(spec.firmware), spec.model,
                      float(spec.position), ack_with_old_id=spec.ack_with_old_id)
        servo.eeprom[9:11] = spec.min_limit.to_bytes(2, "little")
        servo.eeprom[11:13] = spec.max_limit.to_bytes(2, "little")
        servo.power_cycle()
        servos.append(servo)
    return ServoChain(servos, Faults(scenario.drop_rate, scenario.corrupt_rate, scenario.seed))


HELP = """commands: status | power-cycle | unplug NAME... | plug NAME... | only NAME... | quit"""


def console(chain: ServoChain, lock: object, port: str, stdin=sys.stdin) -> None:
    """Act on the emulated arm while a client has the port open."""
    print(f"Emulated STS3215 bus on {port}", flush=True)
    print(HELP, flush=True)
    for line in stdin:
        words = line.split()
        if not words:
            continue
        command, names = words[0], words[1:]
        with lock:
            if command == "quit":
                return
            if command == "power-cycle":
                chain.power_cycle()
            elif command in ("unplug", "plug", "only"):
                getattr(chain, command)(*names)
            elif command != "status":
                print(HELP, flush=True)
                continue
            for s in chain.servos:
                plugged = "plugged" if s.name in chain.connected else "unplugged"
                print(f"  {s.name:<14} ID {s.current_id:<3} (EEPROM {s.eeprom[p.ADDR_ID]}) {s.baud} baud "
                      f"{'locked' if s.locked else 'UNLOCKED'} torque {'on' if s.torque_enabled else 'off'} "
                      f"{s.firmware.value} {plugged}", flush=True)
