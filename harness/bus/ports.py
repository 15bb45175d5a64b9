"""The serial ports this machine has, by name: what a missing or wrong `--port` is answered with.

pyserial's `list_ports` names them as the operating system does (`COM4 USB-SERIAL CH340` on Windows,
`/dev/tty.usbmodem58FA0829321` on macOS, `/dev/ttyACM0` on Linux), so the person sees which one is the
arm's board without opening Device Manager. A pseudo-terminal (the bus emulator's) is never listed but
exists as a path; a pyserial URL (`emulated://`, `socket://`) is taken as given.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import HarnessInputError


@dataclass(frozen=True)
class SerialPort:
    device: str        # what --port takes: COM4, /dev/ttyACM0
    description: str   # what the OS calls it: USB-SERIAL CH340 (COM4), USB Single Serial


def serial_ports() -> list[SerialPort]:
    """Every serial port pyserial finds, in name order."""
    from serial.tools import list_ports

    found = [SerialPort(port.device, port.description or "") for port in list_ports.comports()]
    return sorted(found, key=lambda port: port.device)


def describe_ports(ports: list[SerialPort]) -> str:
    if not ports:
        return ("no serial ports found: plug the arm's controller board in by USB (on Windows, Device Manager shows "
                "it under Ports (COM & LPT) once its driver is installed)")
    named = [port.device if port.description in ("", "n/a", port.device) else f"{port.device} ({port.description})"
             for port in ports]
    return "serial ports here: " + ", ".join(named)


def _bare(port: str) -> str:
    """`\\\\.\\COM10` (Windows' device path for ports past COM9) and `COM10` are the same port."""
    return port.removeprefix("\\\\.\\").upper()


def check_port(port: str | None, list_ports: Callable[[], list[SerialPort]] = serial_ports,
               exists: Callable[[str], bool] = os.path.exists) -> str:
    """`port` when it is a serial port here (listed, a path that exists, or a pyserial URL); otherwise one
    line naming the ports there are."""
    if port is not None and port.strip() and ("://" in port or exists(port)):
        return port
    ports = list_ports()
    if not port or not port.strip():
        raise HarnessInputError(None, "--port", f"name the arm's serial port; {describe_ports(ports)}")
    if _bare(port) in {_bare(p.device) for p in ports}:
        return port
    raise HarnessInputError(None, "--port", f"no serial port {port}; {describe_ports(ports)}")
