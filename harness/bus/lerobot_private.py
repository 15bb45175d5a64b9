"""The one place that touches LeRobot's private bus API.

The re-locking bus needs what LeRobot 0.6.1 keeps to itself: raw register reads and writes by
address (`_read`, `_write`), opening the port without the handshake (`_connect`), the handshake
hook (`_handshake`), the per-servo torque hook that LeRobot's own `disable_torque` and
`setup_motor` call (`_disable_torque`), its name resolution (`_get_motors_list`), the port and
packet handlers and the sync reader/writer built on them, and the SDK timeout fix it applies to
its port (`patch_setPacketTimeout`). None of these is a documented contract, and any LeRobot
release may rename or reshape one. They are used here only, through `LeRobotFeetechBus`, whose
methods are public and documented; `PINNED` lists each one with the parameters relied on, and
`tests/unit/bus/test_lerobot_private.py` checks them against the installed LeRobot, so an upgrade that
changes one fails that test naming the call, not a session on an arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import scservo_sdk as scs
from lerobot.motors.feetech import FeetechMotorsBus
from lerobot.motors.feetech.feetech import patch_setPacketTimeout
from lerobot.motors.motors_bus import get_address

__all__ = ["PINNED", "LeRobotFeetechBus", "Pinned", "patch_setPacketTimeout"]


@dataclass(frozen=True)
class Pinned:
    """One LeRobot name this module relies on: where it lives and the parameters it is called with
    (`params` None: an attribute, checked present on a constructed bus)."""

    owner: str                        # "FeetechMotorsBus" (the class) or "feetech"/"motors_bus" (the module)
    name: str
    params: tuple[str, ...] | None
    why: str


PINNED: tuple[Pinned, ...] = (
    Pinned("FeetechMotorsBus", "_read", ("address", "length", "motor_id", "num_retry", "raise_on_error"),
           "a register read by address (EEPROM Lock and ID read back)"),
    Pinned("FeetechMotorsBus", "_write", ("addr", "length", "motor_id", "value", "num_retry", "raise_on_error"),
           "a register write by address (Lock, ID, Baud_Rate, Torque_Enable)"),
    Pinned("FeetechMotorsBus", "_connect", ("handshake",), "open the port without the handshake (setup_motor)"),
    Pinned("FeetechMotorsBus", "_handshake", (), "the hook connect calls: Lock read before connect writes"),
    Pinned("FeetechMotorsBus", "_disable_torque", ("motor", "model", "num_retry"),
           "the per-servo torque hook LeRobot's disable_torque and setup_motor call"),
    Pinned("FeetechMotorsBus", "_get_motors_list", ("motors",), "motor names from a name, list or None"),
    Pinned("FeetechMotorsBus", "ping", ("motor", "num_retry", "raise_on_error"),
           "the model number a servo reports (setup_motor's model check)"),
    Pinned("FeetechMotorsBus", "set_baudrate", ("baudrate",), "baud rate of the open port"),
    Pinned("FeetechMotorsBus", "model_ctrl_table", None, "register addresses by model"),
    Pinned("FeetechMotorsBus", "model_baudrate_table", None, "baud rate register values by model"),
    Pinned("FeetechMotorsBus", "model_number_table", None, "the model number each model reports"),
    Pinned("FeetechMotorsBus", "default_baudrate", None, "the baud rate the arm runs at"),
    Pinned("FeetechMotorsBus", "port_handler", None, "replaced by the waiting port"),
    Pinned("FeetechMotorsBus", "packet_handler", None, "the sync reader and writer are rebuilt with it"),
    Pinned("FeetechMotorsBus", "sync_reader", None, "rebuilt on the waiting port"),
    Pinned("FeetechMotorsBus", "sync_writer", None, "rebuilt on the waiting port"),
    Pinned("motors_bus", "get_address", ("model_ctrl_table", "model", "data_name"), "a register's address"),
    Pinned("feetech", "patch_setPacketTimeout", ("self", "packet_length"),
           "LeRobot's fix of the SDK's packet timeout, applied to the waiting port"),
)


class LeRobotFeetechBus(FeetechMotorsBus):
    """LeRobot's Feetech bus with its private calls given public names and documented contracts.

    Subclasses override `after_handshake` and `torque_off`, never LeRobot's underscored hooks."""

    # --- the hooks LeRobot calls -------------------------------------------------------------------
    def _handshake(self) -> None:
        super()._handshake()
        self.after_handshake()

    def _disable_torque(self, motor: int, model: str, num_retry: int = 0) -> None:
        self.torque_off(motor, model, num_retry=num_retry)

    def after_handshake(self) -> None:
        """Called once LeRobot's handshake passed (every servo answered, one firmware), before connect
        writes any register."""

    def torque_off(self, motor_id: int, model: str, num_retry: int = 0) -> None:
        """Torque_Enable = 0 on one servo, and nothing else: LeRobot's Feetech hook also unlocks EEPROM
        (Lock = 0), which leaves an ID written later free to revert at the next power cycle."""
        addr, length = self.address(model, "Torque_Enable")
        self.write_register(addr, length, motor_id, 0, num_retry=num_retry)

    # --- calls -------------------------------------------------------------------------------------
    def address(self, model: str, data_name: str) -> tuple[int, int]:
        """(address, length) of a register of this model."""
        return get_address(self.model_ctrl_table, model, data_name)

    def read_register(self, address: int, length: int, motor_id: int, *, num_retry: int = 0,
                      raise_on_error: bool = True) -> tuple[int, int, int]:
        """(value, comm result, servo error) of a read by address. Raises `ConnectionError` (no or bad
        reply) or `RuntimeError` (the servo's error bits) when `raise_on_error`."""
        return self._read(address, length, motor_id, num_retry=num_retry, raise_on_error=raise_on_error)

    def write_register(self, address: int, length: int, motor_id: int, value: int, *, num_retry: int = 0,
                       raise_on_error: bool = True) -> tuple[int, int]:
        """(comm result, servo error) of a write by address; raises as `read_register` does."""
        return self._write(address, length, motor_id, value, num_retry=num_retry, raise_on_error=raise_on_error)

    def open_port(self) -> None:
        """Open the port without LeRobot's handshake (which needs every configured servo present)."""
        self._connect(handshake=False)

    def motor_names(self, motors: Any = None) -> list[str]:
        """Names from a name, an ID, a list of either, or None (every motor)."""
        return self._get_motors_list(motors)

    def use_port_handler(self, handler: scs.PortHandler) -> None:
        """Talk through `handler`: the sync reader and writer keep the handler they were built with, so
        they are rebuilt on it."""
        self.port_handler = handler
        self.sync_reader = scs.GroupSyncRead(handler, self.packet_handler, 0, 0)
        self.sync_writer = scs.GroupSyncWrite(handler, self.packet_handler, 0, 0)

    @property
    def serial(self) -> Any:
        """The open pyserial port under the SDK's handler (raw bytes: `Wire`, input dropped, close)."""
        return self.port_handler.ser
