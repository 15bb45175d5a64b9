"""A serial port handler that sleeps until the servos' bytes arrive, instead of polling for them.

scservo_sdk opens the port non-blocking, and LeRobot's bus reads it in a loop until the packet's
time is up: while a reply is on its way, the reading thread spins on a core. Under SCHED_FIFO
(how `harness run` runs a real arm's loop) that spin keeps everything of normal priority off its
core, including the kernel worker that moves received bytes into the tty. Measured over the
emulator with both cameras rendering, that worker waited 20-30 ms behind the spinning loop and
replies missed LeRobot's 50 ms window ("There is no status packet"). Sleeping in select() until
the port is readable, or the packet's time is up, frees the core; the bytes read and the timeout
rule are LeRobot's.

A reply that comes after its window closed is still in the port when the next request goes out,
and LeRobot would parse it as the answer to that request: measured, a late Torque_Enable reply was
read as Present_Position (about -2880 degrees), and `max_relative_target` then stepped every joint
towards it. On a half-duplex bus nothing that arrived before a request can answer it, so such
bytes are dropped (and counted) before each request is written.
"""

from __future__ import annotations

import logging
import os
import select

import scservo_sdk as scs
import serial

from harness.bus.lerobot_private import patch_setPacketTimeout

log = logging.getLogger(__name__)
CAN_WAIT = os.name == "posix"   # select() takes a serial port's descriptor on POSIX only; Windows polls as before


class WaitingPortHandler(scs.PortHandler):
    is_open: bool   # the SDK's own attributes, as this class sets them (scservo_sdk has no types)
    ser: serial.Serial
    setPacketTimeout = patch_setPacketTimeout   # LeRobot's fix of the SDK's timeout, as FeetechMotorsBus applies it

    def __init__(self, port_name: str) -> None:
        super().__init__(port_name)
        self.stale_bytes_dropped = 0

    def setupPort(self, cflag_baud: int) -> bool:
        """The SDK's port set-up, and for a pyserial URL (`emulated://`, `socket://`, `rfc2217://`) pyserial's
        `serial_for_url` where the SDK would open a device path."""
        if "://" not in self.port_name:
            return super().setupPort(cflag_baud)
        if self.is_open:
            self.closePort()
        self.ser = serial.serial_for_url(self.port_name, baudrate=self.baudrate, bytesize=serial.EIGHTBITS, timeout=0)
        self.is_open = True
        self.ser.reset_input_buffer()
        self.tx_time_per_byte = (1000.0 / self.baudrate) * 10.0
        return True

    def writePort(self, packet: list[int] | bytes) -> int:
        stale = self.ser.in_waiting
        if stale:
            self.stale_bytes_dropped += stale
            self.ser.reset_input_buffer()
            log.debug("dropped %d stale bytes (a reply that came after its window) before a request", stale)
        return self.ser.write(packet)

    def readPort(self, length: int) -> bytes:
        data = self.ser.read(length)
        if data or not CAN_WAIT or "://" in self.port_name:   # a URL port has no descriptor to wait on
            return data
        left_ms = self.packet_timeout - self.getTimeSinceStart()
        if left_ms > 0:
            select.select([self.ser.fileno()], [], [], left_ms / 1000)
            data = self.ser.read(length)
        return data
