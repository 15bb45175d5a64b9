"""Raw request/response on an open serial port with short, explicit timeouts.

LeRobot's bus waits ~50 ms for every missing reply and 787 ms for a broadcast ping; a scan
of eight baud rates would take seconds. Here each question waits only as long as a reply
could take, and garbled bytes (two servos answering at once) are reported, not discarded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from harness.bus import packets as p


@dataclass(frozen=True)
class Answer:
    state: Literal["ok", "none", "garbled"]
    replies: tuple[p.Packet, ...] = ()

    @property
    def data(self) -> bytes:
        return self.replies[0].params if self.replies else b""


class Wire:
    # 20 ms: a USB serial adapter may hold a reply for its latency timer (16 ms by default on FTDI);
    # a reply that completes earlier ends the wait at once, so only silence costs the full window.
    def __init__(self, ser: Any, reply_window_s: float = 0.020, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.ser = ser
        self.window = reply_window_s
        self._clock = clock
        self._sleep = sleep
        self.asked = 0          # questions sent, and
        self.bad_replies = 0    # replies a caller found lost or unusable and asked again for: line noise

    @property
    def baud(self) -> int:
        return int(self.ser.baudrate)

    def set_baud(self, baud: int) -> None:
        if self.ser.baudrate != baud:
            self.ser.baudrate = baud

    def ask(self, packet: bytes, expect_replies: int = 1, window_s: float | None = None) -> Answer:
        self.asked += 1
        self.ser.reset_input_buffer()
        self.ser.write(packet)
        self.ser.flush()
        window = window_s if window_s is not None else self.window + 30 * 10 / self.baud
        deadline = self._clock() + window
        buffer = bytearray()
        while True:
            # The port is read once more after the window has closed: on a busy machine this thread may wake
            # past the deadline while the reply has been waiting in the buffer, and silence it is not.
            late = self._clock() >= deadline
            waiting = self.ser.in_waiting
            if waiting:
                buffer += self.ser.read(waiting)
                if expect_replies and _count_frames(buffer) >= expect_replies:
                    break
            if late:
                break
            if not waiting:
                self._sleep(0.0002)
        raw = bytes(buffer)
        replies = []
        while (reply := p.take_packet(buffer)) is not None:
            replies.append(reply)
        leftover = len(raw) - sum(len(r.params) + 6 for r in replies)
        if not raw:
            return Answer("none")
        if leftover > 0 or not replies:
            return Answer("garbled", tuple(replies))
        return Answer("ok", tuple(replies))

    def ping(self, servo_id: int) -> Answer:
        return self.ask(p.instruction_packet(servo_id, p.PING))

    def read(self, servo_id: int, address: int, length: int) -> Answer:
        return self.ask(p.instruction_packet(servo_id, p.READ, bytes([address, length])))

    def write(self, servo_id: int, address: int, data: bytes) -> Answer:
        return self.ask(p.instruction_packet(servo_id, p.WRITE, bytes([address]) + data))

    def census(self, window_s: float = 0.04) -> Answer:
        """Broadcast PING, collecting everything for the whole window: one clean reply means one servo."""
        return self.ask(p.instruction_packet(p.BROADCAST_ID, p.PING), expect_replies=0, window_s=window_s)


def _count_frames(buffer: bytearray) -> int:
    probe = bytearray(buffer)
    count = 0
    while p.take_packet(probe) is not None:
        count += 1
    return count
