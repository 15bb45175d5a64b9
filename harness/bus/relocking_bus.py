"""A FeetechMotorsBus whose EEPROM writes always re-lock.

STS3215 EEPROM must be unlocked (Lock=0), written, and locked again (Lock=1) for the write to
commit on some firmware batches; LeRobot 0.6.1 unlocks and never re-locks, and programs whichever
servo answers a broadcast ping first. This bus unlocks the addressed servo, writes, re-locks it at
its (possibly new) ID, reads ID and Lock back, refuses to program unless exactly one servo is on
the bus, and leaves every servo locked when the session ends. At connect it reads every servo's
Lock before anything writes it (`locks_at_connect`): `lerobot-setup-motors` leaves each servo it
set up unlocked, and an ID written then may not survive the next power cycle.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import scservo_sdk as scs

from harness.bus import packets as p
from harness.bus.lerobot_private import LeRobotFeetechBus
from harness.bus.waiting_port import WaitingPortHandler
from harness.bus.wire import Wire
from harness.errors import BusSafetyError, NoServoAnswers, ServoBusFault

LOCKED, UNLOCKED = 1, 0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EepromLocks:
    """Each servo's Lock register as read at connect, before this session wrote any: a servo found
    unlocked was written by some tool since its last power cycle and never re-locked."""

    port: str
    unlocked: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()     # no clean answer to the read (connect's own checks report silence)

    @property
    def ok(self) -> bool:
        return not self.unlocked

    def warning(self) -> str:
        """One line for a person: what was found, what it risks, what repairs it."""
        if not self.unlocked:
            return ""
        which = "every servo" if len(self.unlocked) == 6 else ", ".join(self.unlocked)
        return (f"EEPROM unlocked (Lock=0) on {which}, as lerobot-setup-motors leaves it: an ID written since the "
                f"last power cycle may revert at the next; run `harness fix-ids --port {self.port}` to check and "
                "re-lock")


class RelockingFeetechBus(LeRobotFeetechBus):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A port that sleeps while a reply is on its way (waiting_port.py says why).
        self.use_port_handler(WaitingPortHandler(self.port))
        self.locks_at_connect: EepromLocks | None = None

    def after_handshake(self) -> None:
        """After LeRobot's handshake (every servo there, one firmware), each servo's Lock, read before
        connect's configuration writes (which re-lock) can hide that it was left unlocked."""
        self.locks_at_connect = self.read_locks()

    def read_locks(self) -> EepromLocks:
        unlocked, unread = [], []
        for name, motor in self.motors.items():
            addr, length = self._addr(motor.id, "Lock")
            value, comm, _ = self.read_register(addr, length, motor.id, num_retry=2, raise_on_error=False)
            if comm != scs.COMM_SUCCESS:
                unread.append(name)
            elif value == UNLOCKED:
                unlocked.append(name)
        if unlocked:
            log.warning("EEPROM unlocked at connect: %s", ", ".join(unlocked))
        return EepromLocks(self.port, tuple(unlocked), tuple(unread))

    def sync_read(self, data_name: str, motors: Any = None, *, normalize: bool = True,
                  num_retry: int = 0) -> dict[str, Any]:
        """LeRobot's sync read, timed for `harness -vv` (a slow bus shows here before it misses deadlines)."""
        t0 = time.perf_counter()
        try:
            return super().sync_read(data_name, motors, normalize=normalize, num_retry=num_retry)
        finally:
            log.debug("bus sync_read %s: %.2f ms", data_name, 1000 * (time.perf_counter() - t0))

    def sync_write(self, data_name: str, values: Any, *, normalize: bool = True, num_retry: int = 0) -> None:
        t0 = time.perf_counter()
        try:
            super().sync_write(data_name, values, normalize=normalize, num_retry=num_retry)
        finally:
            log.debug("bus sync_write %s: %.2f ms", data_name, 1000 * (time.perf_counter() - t0))

    def _addr(self, motor_id: int, name: str) -> tuple[int, int]:
        model = next((m.model for m in self.motors.values() if m.id == motor_id), "sts3215")
        return self.address(model, name)

    def _lock(self, motor_id: int, value: int) -> None:
        addr, length = self._addr(motor_id, "Lock")
        self.write_register(addr, length, motor_id, value, num_retry=2)

    def _verify(self, motor_id: int) -> None:
        addr, length = self._addr(motor_id, "ID")
        found, _, _ = self.read_register(addr, length, motor_id, num_retry=2)
        addr, length = self._addr(motor_id, "Lock")
        lock, _, _ = self.read_register(addr, length, motor_id, num_retry=2)
        if found != motor_id or lock != LOCKED:
            raise BusSafetyError(f"servo {motor_id}: read back ID {found}, Lock {lock} (expected {motor_id}, 1)")

    def write_eeprom(self, motor_id: int, name: str, value: int) -> int:
        """Unlock, write, re-lock at the ID the servo has afterwards, verify. Returns that ID."""
        addr, length = self._addr(motor_id, name)
        self._lock(motor_id, UNLOCKED)
        new_id = value if name == "ID" else motor_id
        try:
            self.write_register(addr, length, motor_id, value, num_retry=0)
        except ConnectionError:
            if name != "ID":
                raise
            # Some firmware acknowledges an ID change from the new ID; LeRobot waits for the old one.
        self._lock(new_id, LOCKED)
        self._verify(new_id)
        return new_id

    def write(self, data_name: str, motor: str, value: Any, *, normalize: bool = True, num_retry: int = 0) -> None:
        """A register write retried at least twice: writes of absolute values are idempotent, and one lost
        reply on a noisy line must not fail LeRobot's connect (it writes ~10 registers per servo)."""
        num_retry = max(num_retry, 2)
        motor_id = self.motors[motor].id
        addr, _ = self._addr(motor_id, data_name)
        if addr >= p.EEPROM_END or data_name == "Lock":
            super().write(data_name, motor, value, normalize=normalize, num_retry=num_retry)
            return
        self._lock(motor_id, UNLOCKED)
        try:
            super().write(data_name, motor, value, normalize=normalize, num_retry=num_retry)
        finally:
            self._lock(motor_id, LOCKED)

    def release_torque(self, motors: Any = None, num_retry: int = 2) -> tuple[str, ...]:
        """Torque off on every servo that answers, each tried on its own so one silent servo never
        leaves the others holding; returns the names of the servos that did not answer."""
        silent = []
        for motor in self.motor_names(motors):
            m = self.motors[motor]
            try:
                self.torque_off(m.id, m.model, num_retry=num_retry)
            except (ConnectionError, RuntimeError, OSError):
                silent.append(motor)
        if silent:
            log.warning("torque release: no answer from %s", ", ".join(silent))
        return tuple(silent)

    def disable_torque(self, motors: Any = None, num_retry: int = 0) -> None:
        """Torque off, EEPROM left locked (EEPROM writes unlock for themselves); every servo is tried
        before the ones that did not answer are reported."""
        silent = self.release_torque(motors, num_retry=max(num_retry, 1))
        if silent:
            raise ServoBusFault(f"torque could not be released on {', '.join(silent)}: no answer", silent=silent)

    def assert_single_servo(self, tries: int = 6) -> int:
        """The ID of the only servo on the bus, or BusSafetyError naming what was heard. Broadcast pings
        until two give the same clean single reply and outnumber the garbled ones (a noisy line loses or
        garbles some replies; two servos at one baud rate garble every one)."""
        wire = Wire(self.serial)
        clean: Counter[int] = Counter()
        garbled = 0
        for _ in range(tries):
            answer = wire.census()
            if answer.state == "ok" and len(answer.replies) == 1:
                clean[answer.replies[0].servo_id] += 1
            elif answer.state != "none":
                garbled += 1
            if len(clean) == 1 and (count := max(clean.values())) >= 2 and count > garbled:
                return next(iter(clean))
        if not clean and not garbled:
            raise NoServoAnswers("no servo answers at this baud rate")
        raise BusSafetyError(
            f"more than one servo answered, or the line is too noisy to tell (clean replies from IDs "
            f"{sorted(clean) or 'none'}, {garbled} garbled of {tries}): connect only the servo you want to program"
        )

    def assert_model(self, motor_id: int, model: str) -> None:
        """LeRobot's check before `setup_motor` programs a servo: it reports the model number `model` has.
        Another model (an SCS servo, a different STS) has another register map: an ID or baud rate written
        at the STS3215's addresses would land in some other register."""
        expected = self.model_number_table[model]
        reported = self.ping(motor_id, num_retry=2)
        if reported != expected:
            found = "no model number" if reported is None else f"model number {reported}"
            raise BusSafetyError(f"servo {motor_id} reports {found}, not {model}'s {expected}: connect only "
                                 f"a {model} to program it")

    def setup_motor(self, motor: str, initial_baudrate: int | None = None, initial_id: int | None = None) -> None:
        """LeRobot's `setup_motor` (find the one servo, check its model, torque off, write ID then baud
        rate), with every EEPROM write re-locked and read back, and refused unless one servo answers."""
        if not self.is_connected:
            self.open_port()
        bauds = [initial_baudrate] if initial_baudrate else list(self.model_baudrate_table[self.motors[motor].model])
        found = None
        for baud in bauds:
            self.set_baudrate(baud)
            try:
                found = (baud, self.assert_single_servo())
                break
            except NoServoAnswers:
                continue
        if found is None:
            raise BusSafetyError(f"'{motor}' was not found at any baud rate; is it connected and powered?")
        baud, current_id = found
        if initial_id is not None and initial_id != current_id:
            raise BusSafetyError(f"expected ID {initial_id} but the servo on the bus is ID {current_id}")
        model = self.motors[motor].model
        self.assert_model(current_id, model)
        self.torque_off(current_id, model, num_retry=2)
        target_id = self.write_eeprom(current_id, "ID", self.motors[motor].id)
        target_baud = self.default_baudrate
        if baud != target_baud:
            value = self.model_baudrate_table[model][target_baud]
            addr, length = self._addr(target_id, "Baud_Rate")
            self._lock(target_id, UNLOCKED)
            self.write_register(addr, length, target_id, value, raise_on_error=False)
            self.set_baudrate(target_baud)
            self._lock(target_id, LOCKED)
            self._verify(target_id)
        self.set_baudrate(target_baud)

    def lock_all(self) -> None:
        for motor in self.motors.values():
            addr, length = self._addr(motor.id, "Lock")
            self.write_register(addr, length, motor.id, LOCKED, raise_on_error=False)

    def disconnect(self, disable_torque: bool = True) -> None:
        """Torque off where servos answer, every servo locked, the port closed: even when some are silent."""
        if self.is_connected:
            try:
                if disable_torque:
                    self.release_torque()
                self.lock_all()
            finally:
                super().disconnect(disable_torque=False)
