"""The bus emulator behind a pyserial port in this process: `emulated://NAME`, on any operating system.

`PtyBus` serves the emulated servos on a pseudo-terminal, which exists on Linux and macOS only. This serves
the same `ServoChain` through pyserial's URL mechanism instead (this module is a pyserial protocol handler:
`serial.serial_for_url("emulated://NAME")` opens it), so fix-ids' scan, diagnosis and repair, and LeRobot's
own bus underneath the repair, run against the emulator wherever pyserial does, Windows included. Every
request is answered as it is written, at the baud the port is set to, as the servos on a real bus would.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import serial

from harness.bus import packets as p
from harness.emulator.servos import ServoChain

SCHEME = "emulated"
_HANDLER_PACKAGE = "harness.emulator"
_buses: dict[str, InProcessBus] = {}
_names = itertools.count(1)


class InProcessBus:
    """Emulated servos reachable as the port `self.port` from this process (`with InProcessBus(chain) as bus`)."""

    def __init__(self, chain: ServoChain) -> None:
        self.chain = chain
        self.lock = threading.Lock()   # held while a packet is handled: a test changes the chain under it
        self.port = f"{SCHEME}://bus{next(_names)}"
        self._last_tick = time.monotonic()
        if _HANDLER_PACKAGE not in serial.protocol_handler_packages:
            serial.protocol_handler_packages.append(_HANDLER_PACKAGE)
        _buses[self.port.split("://", 1)[1]] = self

    def answer(self, data: bytes, buffer: bytearray, baud: int) -> bytes:
        """The servos' replies to the complete packets now in `buffer` (which keeps a partial one)."""
        buffer += data
        replies = bytearray()
        with self.lock:
            now = time.monotonic()
            self.chain.tick(now - self._last_tick)
            self._last_tick = now
            while (packet := p.take_packet(buffer)) is not None:
                replies += self.chain.handle(packet, baud)
        return bytes(replies)

    def close(self) -> None:
        _buses.pop(self.port.split("://", 1)[1], None)

    def __enter__(self) -> InProcessBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Serial(serial.SerialBase):
    """pyserial's port for `emulated://NAME` (found by `serial.serial_for_url` through this module's name)."""

    def open(self) -> None:
        if self._port is None:
            raise serial.SerialException("Port must be configured before it can be used.")
        name = str(self._port).split("://", 1)[-1]
        bus = _buses.get(name)
        if bus is None:
            raise serial.SerialException(f"could not open port {self._port}: no emulated bus of that name here")
        self._bus = bus
        self._rx = bytearray()
        self._pending = bytearray()
        self.is_open = True

    def close(self) -> None:
        self.is_open = False

    def _reconfigure_port(self) -> None:
        """Baud changes take effect on the next request (the servos listen at their own baud)."""

    @property
    def in_waiting(self) -> int:
        return len(self._rx)

    def read(self, size: int = 1) -> bytes:
        if not self.is_open:
            raise serial.PortNotOpenError()
        data = bytes(self._rx[:size])
        del self._rx[:size]
        return data

    def write(self, data: Any) -> int:
        if not self.is_open:
            raise serial.PortNotOpenError()
        raw = bytes(data)
        self._rx += self._bus.answer(raw, self._pending, self._baudrate)
        return len(raw)

    def reset_input_buffer(self) -> None:
        self._rx.clear()

    def reset_output_buffer(self) -> None:
        self._pending.clear()

    def flush(self) -> None:
        """Written bytes are answered at once: nothing waits."""
