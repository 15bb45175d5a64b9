"""A chain of emulated STS3215 servos, byte-for-byte on the wire.

Each servo keeps an EEPROM image and a RAM control table. Writes below address 40
follow one of three firmware behaviours for persistence (the seed problem hinges on
this), power cycles reload RAM from EEPROM with Lock=1 and torque off, two servos at
one ID both execute every write and their overlapping replies arrive garbled, and a
servo only hears frames sent at its own baud rate.

The shaft is modelled too: the raw encoder position, Homing_Offset between it and
Present_Position, goals clamped to the position limits, and the health sensors
(supply voltage, temperature, load, current) whose protections set the status error
bits and release torque as the Unloading_Condition register says. See docs/emulator.md
for what the reference leaves open and what this emulator assumes there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum, IntFlag

from harness.bus import packets as p
from harness.emulator.hands import Hand

TICKS = 4096
INSTR_RESET = 0x06  # factory reset: EEPROM back to defaults; answered with a status packet

# Control-table addresses beyond the framing module's (STS/SMS series, as in LeRobot's table).
ADDR_MIN_LIMIT, ADDR_MAX_LIMIT = 9, 11
ADDR_MAX_TEMPERATURE, ADDR_MAX_VOLTAGE, ADDR_MIN_VOLTAGE = 13, 14, 15
ADDR_UNLOADING_CONDITION, ADDR_LED_ALARM = 19, 20
ADDR_PROTECTION_CURRENT, ADDR_HOMING_OFFSET = 28, 31
ADDR_PROTECTIVE_TORQUE, ADDR_PROTECTION_TIME, ADDR_OVERLOAD_TORQUE, ADDR_OVERCURRENT_TIME = 34, 35, 36, 38
ADDR_PRESENT_LOAD, ADDR_PRESENT_VOLTAGE, ADDR_PRESENT_TEMPERATURE, ADDR_PRESENT_CURRENT = 60, 62, 63, 69
READ_ONLY = frozenset({0, 1, 2, 3, 4, *range(56, 71)})

# Health model constants: a 12 V STS3215 (30 kg.cm stall); see docs/emulator.md.
AMBIENT_C = 25.0
THERMAL_TAU_S = 90.0           # time constant of the motor's temperature
HEATING_AT_FULL_LOAD_C = 45.0  # steady-state rise above ambient at 100 % load
IDLE_CURRENT_A, STALL_CURRENT_A = 0.02, 2.7
CURRENT_LSB_A = 0.0065
SUPPLY_SAG_V_AT_FULL_LOAD = 0.4
FREE_MOVING_LOAD = 120.0       # 0.1 % units: a servo moving its own horn, no payload
HOLDING_LOAD_PER_TICK = 15.0


class Firmware(Enum):
    DOCUMENTED = "documented"                # EEPROM write persists when Lock is 0 at the moment of the write
    COMMIT_ON_RELOCK = "commit-on-relock"    # writes while unlocked are staged; they persist when Lock goes to 1
    REJECT_WHILE_LOCKED = "reject-while-locked"  # EEPROM writes are ignored while locked


class ErrorBit(IntFlag):
    """The status packet's error byte (= register 65), as scservo_sdk names the bits."""

    VOLTAGE = 0x01
    ANGLE = 0x02
    OVERHEAT = 0x04
    OVERCURRENT = 0x08
    OVERLOAD = 0x20


def _default_eeprom(servo_id: int, baud_index: int) -> bytearray:
    e = bytearray(p.EEPROM_END)
    e[p.ADDR_FIRMWARE_MAJOR], e[p.ADDR_FIRMWARE_MINOR] = 3, 10
    e[p.ADDR_MODEL:p.ADDR_MODEL + 2] = p.STS3215_MODEL.to_bytes(2, "little")
    e[p.ADDR_ID], e[p.ADDR_BAUD] = servo_id, baud_index
    e[7] = 250                      # Return_Delay_Time
    e[p.ADDR_RESPONSE_LEVEL] = 1
    e[ADDR_MAX_LIMIT:ADDR_MAX_LIMIT + 2] = (4095).to_bytes(2, "little")
    e[ADDR_MAX_TEMPERATURE], e[ADDR_MAX_VOLTAGE], e[ADDR_MIN_VOLTAGE] = 70, 140, 50
    e[p.ADDR_MAX_TORQUE:p.ADDR_MAX_TORQUE + 2] = (1000).to_bytes(2, "little")
    e[ADDR_UNLOADING_CONDITION], e[ADDR_LED_ALARM] = 44, 47
    e[21], e[22] = 32, 32           # P, D
    e[26], e[27], e[30] = 1, 1, 1
    e[ADDR_PROTECTION_CURRENT:ADDR_PROTECTION_CURRENT + 2] = (500).to_bytes(2, "little")
    e[ADDR_PROTECTIVE_TORQUE], e[ADDR_PROTECTION_TIME], e[ADDR_OVERLOAD_TORQUE] = 20, 200, 80
    e[ADDR_OVERCURRENT_TIME] = 200
    return e


def _decode_sign_magnitude(raw: int, sign_bit: int = 15) -> int:
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw >> sign_bit & 1 else magnitude


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    magnitude = min(abs(value), (1 << sign_bit) - 1)
    return magnitude | (1 << sign_bit) if value < 0 else magnitude


@dataclass
class Servo:
    """One STS3215. `name` is only for people and tests; the wire knows IDs.

    `position` is the raw encoder reading of the shaft (ticks, before Homing_Offset);
    `temperature_c`, `load` (0.1 % of full torque, signed) and `jammed` (the shaft is blocked)
    are its physical state.
    """

    name: str
    servo_id: int
    baud_index: int = 0
    firmware: Firmware = Firmware.DOCUMENTED
    model: int = p.STS3215_MODEL
    position: float = 2048.0
    speed_ticks_per_s: float = 3000.0
    ack_with_old_id: bool = True
    temperature_c: float = AMBIENT_C + 3.0
    supply_v: float = 12.0
    jammed: bool = False
    load_protection: bool = True   # False where the load comes from a physics model (see `sense`)
    load: float = field(default=0.0, init=False)
    velocity: float = field(default=0.0, init=False)
    eeprom: bytearray = field(init=False)
    ram: bytearray = field(init=False)
    staged: dict[int, int] = field(default_factory=dict, init=False)
    eeprom_writes: int = field(default=0, init=False)
    pending_reg_write: tuple[int, bytes] | None = field(default=None, init=False)
    latched_errors: ErrorBit = field(default=ErrorBit(0), init=False)
    _overload_s: float = field(default=0.0, init=False)
    _overcurrent_s: float = field(default=0.0, init=False)

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

    def _word(self, address: int) -> int:
        return int.from_bytes(self.ram[address:address + 2], "little")

    @property
    def homing_offset(self) -> int:
        return _decode_sign_magnitude(self._word(ADDR_HOMING_OFFSET), 11)

    @property
    def position_limits(self) -> tuple[int, int]:
        return self._word(ADDR_MIN_LIMIT), self._word(ADDR_MAX_LIMIT)

    @property
    def present_ticks(self) -> float:
        """Present_Position as the servo computes it: raw encoder minus Homing_Offset, on one turn."""
        return (self.position - self.homing_offset) % TICKS

    @property
    def goal_ticks(self) -> int:
        """Goal_Position as the servo acts on it: clamped to [Min, Max]_Position_Limit (when they span a range)."""
        goal = _decode_sign_magnitude(self._word(p.ADDR_GOAL_POSITION))
        low, high = self.position_limits
        return min(max(goal, low), high) if high > low else goal

    @property
    def errors(self) -> ErrorBit:
        return ErrorBit(self.ram[p.ADDR_STATUS])

    def raw_goal(self) -> float:
        """The goal as a raw encoder position (Goal_Position is in the Present_Position frame)."""
        return self.position + (self.goal_ticks - self.present_ticks)

    def power_cycle(self) -> None:
        self.ram = bytearray(100)
        self.ram[: p.EEPROM_END] = self.eeprom
        self.ram[p.ADDR_LOCK] = 1
        self.ram[p.ADDR_TORQUE_ENABLE] = 0
        self.ram[p.ADDR_TORQUE_LIMIT:p.ADDR_TORQUE_LIMIT + 2] = self.eeprom[p.ADDR_MAX_TORQUE:p.ADDR_MAX_TORQUE + 2]
        self.staged.clear()
        self.pending_reg_write = None
        self.latched_errors = ErrorBit(0)
        self._overload_s = self._overcurrent_s = 0.0
        self.load = 0.0
        self.sense(0.0)
        self.ram[p.ADDR_GOAL_POSITION:p.ADDR_GOAL_POSITION + 2] = self.ram[p.ADDR_PRESENT_POSITION:
                                                                          p.ADDR_PRESENT_POSITION + 2]

    def factory_reset(self) -> None:
        """RESET (0x06): EEPROM back to factory values, keeping ID and baud so the servo stays reachable
        (the reference is silent on both; see docs/emulator.md), then RAM reloaded as at power-on."""
        fresh = _default_eeprom(self.current_id, self.ram[p.ADDR_BAUD])
        fresh[p.ADDR_MODEL:p.ADDR_MODEL + 2] = self.model.to_bytes(2, "little")
        self.eeprom = fresh
        self.eeprom_writes += 1
        self.power_cycle()

    # --- register access ---------------------------------------------------
    def read(self, address: int, length: int) -> bytes:
        self.sense(0.0)   # registers as of now, whatever the console or a scenario changed since the last tick
        return bytes(self.ram[address:address + length]).ljust(length, b"\x00")

    def write(self, address: int, data: bytes) -> None:
        for offset, value in enumerate(data):
            self._write_byte(address + offset, value)

    def _write_byte(self, address: int, value: int) -> None:
        if address >= len(self.ram) or address in READ_ONLY:
            return
        if address == p.ADDR_LOCK:
            was_locked = self.locked
            self.ram[address] = value
            if not was_locked and value != 0 and self.firmware is Firmware.COMMIT_ON_RELOCK and self.staged:
                for addr, staged in self.staged.items():
                    self.eeprom[addr] = staged
                self.eeprom_writes += len(self.staged)
                self.staged.clear()
            return
        if address == p.ADDR_TORQUE_ENABLE and value:
            self.latched_errors = ErrorBit(0)  # re-enabling torque clears a latched protection
            self._overload_s = self._overcurrent_s = 0.0
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

    # --- motion and health ------------------------------------------------------
    def tick(self, dt: float) -> None:
        """Move toward the (clamped) goal at a bounded speed while torque is on, then update the sensors."""
        before = self.position
        if self.torque_enabled:
            error = self.goal_ticks - self.present_ticks
            if not self.jammed:
                step = self.speed_ticks_per_s * dt
                self.position += max(-step, min(step, error))
            remaining = self.goal_ticks - self.present_ticks
            if self.jammed and abs(remaining) > 2:
                self.load = 1000.0 if remaining > 0 else -1000.0
            elif abs(remaining) > 1:
                self.load = FREE_MOVING_LOAD if remaining > 0 else -FREE_MOVING_LOAD
            else:
                self.load = HOLDING_LOAD_PER_TICK * remaining
        else:
            self.load = 0.0
        self.velocity = (self.position - before) / dt if dt > 0 else 0.0
        self.sense(dt)

    def sense(self, dt: float) -> None:
        """Advance temperature and the protection timers by `dt`, then write the Present_* registers.

        With `load_protection` off, overload/over-current trip only on an explicit jam (used where the
        load comes from a physics model whose force caps are not the servo's torque limit)."""
        torque = self.torque_enabled
        share = min(abs(self.load), 1000.0) / 1000.0
        current = (IDLE_CURRENT_A + STALL_CURRENT_A * share) if torque else IDLE_CURRENT_A
        target_c = AMBIENT_C + HEATING_AT_FULL_LOAD_C * share
        if dt > 0:
            self.temperature_c += (target_c - self.temperature_c) * min(1.0, dt / THERMAL_TAU_S)
        counts_for_protection = self.load_protection or self.jammed
        overload_threshold = self.ram[ADDR_OVERLOAD_TORQUE] * 10
        if torque and counts_for_protection and abs(self.load) >= max(overload_threshold, 1):
            self._overload_s += dt
        else:
            self._overload_s = 0.0
        if torque and counts_for_protection and current / CURRENT_LSB_A >= max(self._word(ADDR_PROTECTION_CURRENT), 1):
            self._overcurrent_s += dt
        else:
            self._overcurrent_s = 0.0
        if self._overload_s > 0 and self._overload_s >= self.ram[ADDR_PROTECTION_TIME] * 0.01:
            self.latched_errors |= ErrorBit.OVERLOAD
        if self._overcurrent_s > 0 and self._overcurrent_s >= self.ram[ADDR_OVERCURRENT_TIME] * 0.01:
            self.latched_errors |= ErrorBit.OVERCURRENT
        errors = self.latched_errors
        volts_x10 = round((self.supply_v - SUPPLY_SAG_V_AT_FULL_LOAD * share) * 10)
        if not self.ram[ADDR_MIN_VOLTAGE] <= volts_x10 <= self.ram[ADDR_MAX_VOLTAGE]:
            errors |= ErrorBit.VOLTAGE
        if self.temperature_c >= self.ram[ADDR_MAX_TEMPERATURE]:
            errors |= ErrorBit.OVERHEAT
        if torque and errors & self.ram[ADDR_UNLOADING_CONDITION]:
            self.ram[p.ADDR_TORQUE_ENABLE] = 0  # the protection releases torque
            self.load = 0.0
        self.ram[p.ADDR_STATUS] = int(errors)
        self.ram[ADDR_PRESENT_VOLTAGE] = max(0, min(255, volts_x10))
        self.ram[ADDR_PRESENT_TEMPERATURE] = max(0, min(255, round(self.temperature_c)))
        self.ram[ADDR_PRESENT_LOAD:ADDR_PRESENT_LOAD + 2] = encode_sign_magnitude(round(self.load), 10).to_bytes(
            2, "little")
        amps = current if self.torque_enabled else IDLE_CURRENT_A
        self.ram[ADDR_PRESENT_CURRENT:ADDR_PRESENT_CURRENT + 2] = round(amps / CURRENT_LSB_A).to_bytes(2, "little")
        self._write_present()

    def _write_present(self) -> None:
        raw = round(self.present_ticks) % TICKS
        self.ram[p.ADDR_PRESENT_POSITION:p.ADDR_PRESENT_POSITION + 2] = raw.to_bytes(2, "little")
        velocity = encode_sign_magnitude(round(self.velocity), 15)
        self.ram[p.ADDR_PRESENT_VELOCITY:p.ADDR_PRESENT_VELOCITY + 2] = velocity.to_bytes(2, "little")
        moving = self.torque_enabled and abs(self.goal_ticks - self.present_ticks) > 1
        self.ram[p.ADDR_MOVING] = int(moving)


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
        self.hand = Hand()

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

    def set_supply(self, volts: float) -> None:
        """The power supply feeding every servo on the chain (under-voltage when it sags below the limit)."""
        for servo in self.servos:
            servo.supply_v = volts

    def tick(self, dt: float) -> None:
        """A hand holds or moves shafts whose torque is off (raw = 2048 at 0 degrees); then the servos act."""
        named = {s.name: s for s in self.servos if s.name in self.hand.ranges}
        present = {name: (s.position - TICKS / 2) * 360.0 / TICKS for name, s in named.items()}
        for name, degrees in self.hand.advance(dt, present).items():
            servo = named.get(name)
            if servo is not None and not servo.torque_enabled:
                servo.position = min(max(TICKS / 2 + degrees * TICKS / 360.0, 0.0), TICKS - 1.0)
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
            return self._replies([(s, s.current_id, b"") for s in addressed])
        if code == p.READ and len(params) == 2 and not broadcast:
            return self._replies([(s, s.current_id, s.read(params[0], params[1])) for s in addressed])
        if code in (p.WRITE, p.REG_WRITE) and params:
            acks = []
            for servo in addressed:
                old_id = servo.current_id
                if code == p.WRITE:
                    servo.write(params[0], params[1:])
                else:
                    servo.pending_reg_write = (params[0], params[1:])
                if not broadcast and servo.ram[p.ADDR_RESPONSE_LEVEL]:
                    acks.append((servo, old_id if servo.ack_with_old_id else servo.current_id, b""))
            return self._replies(acks)
        if code == INSTR_RESET:
            acks = []
            for servo in addressed:
                old_id = servo.current_id
                servo.factory_reset()
                if not broadcast:
                    acks.append((servo, old_id, b""))
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
                out += self._replies([(s, s.current_id, s.read(address, length)) for s in servos
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

    def _replies(self, replies: list[tuple[Servo, int, bytes]]) -> bytes:
        if not replies:
            return b""
        frames = [p.status_packet(servo_id, servo.ram[p.ADDR_STATUS], data) for servo, servo_id, data in replies]
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
