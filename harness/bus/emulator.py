"""A chain of emulated STS3215 servos, byte-for-byte on the wire.

Each servo keeps an EEPROM image and a RAM control table. Writes below address 40
follow one of three firmware behaviours for persistence (the seed problem hinges on
this), power cycles reload RAM from EEPROM with Lock=1 and torque off, two servos at
one ID both execute every write and their overlapping replies arrive garbled, and a
servo only hears frames sent at its own baud rate.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum

from harness.bus import protocol as p


class Firmware(Enum):
    DOCUMENTED = "documented"                # EEPROM write persists when Lock is 0 at the moment of the write
    COMMIT_ON_RELOCK = "commit-on-relock"    # writes while unlocked are staged; they persist when Lock goes to 1
    REJECT_WHILE_LOCKED = "reject-while-locked"  # EEPROM writes are ignored while locked


def _default_eeprom(servo_id: int, baud_index: int) -> bytearray:
    e = bytearray(p.EEPROM_END)
    e[p.ADDR_FIRMWARE_MAJOR], e[p.ADDR_FIRMWARE_MINOR] = 3, 10
    e[p.ADDR_MODEL:p.ADDR_MODEL + 2] = p.STS3215_MODEL.to_bytes(2, "little")
    e[p.ADDR_ID], e[p.ADDR_BAUD] = servo_id, baud_index
    e[7] = 250                      # Return_Delay_Time
    e[p.ADDR_RESPONSE_LEVEL] = 1
    e[11:13] = (4095).to_bytes(2, "little")    # Max_Position_Limit
    e[13], e[14], e[15] = 70, 140, 50
    e[p.ADDR_MAX_TORQUE:p.ADDR_MAX_TORQUE + 2] = (1000).to_bytes(2, "little")
    e[19], e[20] = 44, 47
    e[21], e[22] = 32, 32           # P, D
    e[26], e[27], e[30] = 1, 1, 1
    return e


@dataclass
class Servo:
    """One STS3215. `name` is only for people and tests; the wire knows IDs."""

    name: str
    servo_id: int
    baud_index: int = 0
    firmware: Firmware = Firmware.DOCUMENTED
    model: int = p.STS3215_MODEL
    position: float = 2048.0
    speed_ticks_per_s: float = 3000.0
    ack_with_old_id: bool = True
    eeprom: bytearray = field(init=False)
    ram: bytearray = field(init=False)
    staged: dict[int, int] = field(default_factory=dict, init=False)
    eeprom_writes: int = field(default=0, init=False)
    pending_reg_write: tuple[int, bytes] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.eeprom = _default_eeprom(self.servo_id, self.baud_index)
        self.eeprom[p.ADDR_MODEL:p.ADDR_MODEL + 2] = self.model.to_bytes(2, "little")
        self.power_cycle()

    # --- state -----------------------------------------------------------
    @property
    def current_id(self) -> int:
        return self.ram[p.ADDR_ID]

    @property
    def baud(self) -> int:
        return p.BAUD_BY_INDEX.get(self.ram[p.ADDR_BAUD], 1_000_000)

    @property
    def locked(self) -> bool:
        return self.ram[p.ADDR_LOCK] != 0

    @property
    def torque_enabled(self) -> bool:
        return self.ram[p.ADDR_TORQUE_ENABLE] != 0

    def power_cycle(self) -> None:
        self.ram = bytearray(100)
        self.ram[: p.EEPROM_END] = self.eeprom
        self.ram[p.ADDR_LOCK] = 1
        self.ram[p.ADDR_TORQUE_ENABLE] = 0
        self.ram[p.ADDR_TORQUE_LIMIT:p.ADDR_TORQUE_LIMIT + 2] = self.eeprom[p.ADDR_MAX_TORQUE:p.ADDR_MAX_TORQUE + 2]
        self.staged.clear()
        self.pending_reg_write = None
        self._sync_present()
        self.ram[p.ADDR_GOAL_POSITION:p.ADDR_GOAL_POSITION + 2] = self.ram[p.ADDR_PRESENT_POSITION:
                                                                          p.ADDR_PRESENT_POSITION + 2]

    # --- register access ---------------------------------------------------
    def read(self, address: int, length: int) -> bytes:
        self._sync_present()
        return bytes(self.ram[address:address + length]).ljust(length, b"\x00")

    def write(self, address: int, data: bytes) -> None:
        for offset, value in enumerate(data):
            self._write_byte(address + offset, value)

    def _write_byte(self, address: int, value: int) -> None:
        if address >= len(self.ram) or address in (0, 1, 2, 3, 4) or address in range(56, 71):
            return  # read-only
        if address == p.ADDR_LOCK:
            was_locked = self.locked
            self.ram[address] = value
            if not was_locked and value != 0 and self.firmware is Firmware.COMMIT_ON_RELOCK and self.staged:
                for addr, staged in self.staged.items():
                    self.eeprom[addr] = staged
                self.eeprom_writes += len(self.staged)
                self.staged.clear()
            return
        if address < p.EEPROM_END:
            if self.firmware is Firmware.REJECT_WHILE_LOCKED and self.locked:
                return
            self.ram[address] = value
            if not self.locked:
                if self.firmware is Firmware.COMMIT_ON_RELOCK:
                    self.staged[address] = value
                else:
                    self.eeprom[address] = value
                    self.eeprom_writes += 1
            return
        self.ram[address] = value

    # --- motion ------------------------------------------------------------
    def tick(self, dt: float) -> None:
        """Move toward the goal at a bounded speed while torque is on."""
        if not self.torque_enabled:
            return
        goal = _decode_sign_magnitude(int.from_bytes(self.ram[p.ADDR_GOAL_POSITION:p.ADDR_GOAL_POSITION + 2],
                                                     "little"))
        step = self.speed_ticks_per_s * dt
        delta = goal - self.position
        self.position += max(-step, min(step, delta))
        self._sync_present()

    def _sync_present(self) -> None:
        raw = round(self.position) % 4096
        self.ram[p.ADDR_PRESENT_POSITION:p.ADDR_PRESENT_POSITION + 2] = raw.to_bytes(2, "little")
        moving = self.torque_enabled and abs(
            _decode_sign_magnitude(int.from_bytes(self.ram[p.ADDR_GOAL_POSITION:p.ADDR_GOAL_POSITION + 2], "little"))
            - self.position) > 1
        self.ram[p.ADDR_MOVING] = int(moving)


def _decode_sign_magnitude(raw: int, sign_bit: int = 15) -> int:
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw >> sign_bit & 1 else magnitude


@dataclass
class Faults:
    drop_rate: float = 0.0      # share of replies that never arrive
    corrupt_rate: float = 0.0   # share of replies with one byte flipped
    seed: int = 0


class ServoChain:
    """The servos on one bus, and what the wire carries back for each request."""

    def __init__(self, servos: list[Servo], faults: Faults | None = None) -> None:
        self.servos = servos
        self.connected: set[str] = {s.name for s in servos}
        self.faults = faults or Faults()
        self._rng = random.Random(self.faults.seed)
        self.requests = 0

    # --- physical actions (what a person does to the arm) -------------------
    def power_cycle(self) -> None:
        for servo in self.servos:
            servo.power_cycle()

    def unplug(self, *names: str) -> None:
        self.connected -= set(names)

    def plug(self, *names: str) -> None:
        self.connected |= set(names)

    def only(self, *names: str) -> None:
        """Leave only these servos connected to the controller board."""
        self.connected = set(names)

    def servo(self, name: str) -> Servo:
        return next(s for s in self.servos if s.name == name)

    def tick(self, dt: float) -> None:
        for servo in self.servos:
            servo.tick(dt)

    # --- the wire ------------------------------------------------------------
    def _listening(self, baud: int) -> list[Servo]:
        return [s for s in self.servos if s.name in self.connected and s.baud == baud]

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        """Execute one instruction packet as every servo that hears it would; return the bytes on the wire."""
        self.requests += 1
        servos = self._listening(baud)
        addressed = [s for s in servos if packet.servo_id in (s.current_id, p.BROADCAST_ID)]
        broadcast = packet.servo_id == p.BROADCAST_ID
        code, params = packet.code, packet.params
        if code == p.PING:
            return self._replies([(s.current_id, b"") for s in addressed])
        if code == p.READ and len(params) == 2 and not broadcast:
            return self._replies([(s.current_id, s.read(params[0], params[1])) for s in addressed])
        if code in (p.WRITE, p.REG_WRITE) and params:
            acks = []
            for servo in addressed:
                old_id = servo.current_id
                if code == p.WRITE:
                    servo.write(params[0], params[1:])
                else:
                    servo.pending_reg_write = (params[0], params[1:])
                if not broadcast and servo.ram[p.ADDR_RESPONSE_LEVEL]:
                    acks.append((old_id if servo.ack_with_old_id else servo.current_id, b""))
            return self._replies(acks)
        if code == p.ACTION:
            for servo in addressed:
                if servo.pending_reg_write is not None:
                    servo.write(*servo.pending_reg_write)
                    servo.pending_reg_write = None
            return b""
        if code == p.SYNC_READ and broadcast and len(params) >= 2:
            address, length, ids = params[0], params[1], params[2:]
            out = b""
            for servo_id in ids:
                out += self._replies([(s.current_id, s.read(address, length)) for s in servos
                                      if s.current_id == servo_id])
            return out
        if code == p.SYNC_WRITE and broadcast and len(params) >= 2:
            address, length = params[0], params[1]
            for i in range(2, len(params) - length, length + 1):
                servo_id, data = params[i], params[i + 1:i + 1 + length]
                for servo in servos:
                    if servo.current_id == servo_id:
                        servo.write(address, data)
            return b""
        return b""

    def _replies(self, replies: list[tuple[int, bytes]]) -> bytes:
        if not replies:
            return b""
        frames = [p.status_packet(servo_id, 0, data) for servo_id, data in replies]
        if len(frames) > 1:
            return self._collide(frames)
        frame = frames[0]
        if self.faults.drop_rate and self._rng.random() < self.faults.drop_rate:
            return b""
        if self.faults.corrupt_rate and self._rng.random() < self.faults.corrupt_rate:
            i = self._rng.randrange(2, len(frame))
            frame = frame[:i] + bytes([frame[i] ^ 0x5A]) + frame[i + 1:]
        return frame

    @staticmethod
    def _collide(frames: list[bytes]) -> bytes:
        """Two servos drive the half-duplex line at once: low bits win (wired AND), with a slight
        skew between them, so the bytes that arrive are neither reply."""
        length = max(len(f) for f in frames)
        skewed = [f[:1] + f for f in frames[1:]]
        out = bytearray(b"\xff" * length)
        for frame in [frames[0], *skewed]:
            for i, byte in enumerate(frame[:length]):
                out[i] &= byte
        return bytes(out)
