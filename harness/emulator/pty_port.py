"""Serves a ServoChain on a pseudo-terminal, so any serial client (LeRobot, scservo_sdk, pyserial)
talks to it through the ordinary serial path. The baud rate the client sets is read back from the
terminal, so servos at another baud stay silent, as on a real bus."""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import select
import sys
import termios
import threading
import time
import tty

from harness.bus import packets as p
from harness.emulator.servos import ServoChain
from harness.realtime import DEVICE_PRIORITY, realtime_thread

GIL_SWITCH_S = 0.0005
TCGETS2 = 0x802C542A  # Linux: struct termios2, which carries arbitrary baud rates


def _baud_of(fd: int) -> int:
    buf = array.array("I", [0] * 11)  # 4 flags + c_line/c_cc (20 bytes, padded to 5 words) + 2 speeds
    try:
        fcntl.ioctl(fd, TCGETS2, buf, True)
        return int(buf[9]) or 1_000_000
    except OSError:
        speed = termios.tcgetattr(fd)[4]
        return {getattr(termios, f"B{b}", -1): b for b in (1_000_000, 500_000, 115_200, 57_600, 38_400)}.get(
            speed, 1_000_000)


class PtyBus:
    """`port` is the path a client opens. `wire_timing` delays replies by their bytes at the baud rate."""

    def __init__(self, chain: ServoChain, wire_timing: bool = False, tick_s: float = 0.005) -> None:
        self.chain = chain
        self.wire_timing = wire_timing
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.port = os.ttyname(self.slave)
        self.lock = threading.Lock()   # held while a packet is handled: tests mutate the chain safely under it
        self._stop = threading.Event()
        self._tick_s = tick_s
        # A client in the same process (tests, scripts) busy-polls its port while holding the GIL; hand the
        # GIL over sooner than the default 5 ms so replies come well inside LeRobot's ~50 ms window.
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        self._thread = threading.Thread(target=self._serve, name="sts3215-emulator", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        # Real servos answer in microseconds whatever the host is doing; a starved emulator thread on a busy
        # machine answers late and LeRobot reports a servo missing. Real-time where the OS allows.
        with realtime_thread(priority=DEVICE_PRIORITY):
            self._serve_packets()

    def _serve_packets(self) -> None:
        buffer = bytearray()
        last_tick = time.monotonic()
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], self._tick_s)
            if ready:   # answer first: the physics tick below may take milliseconds, a reply must not wait
                try:
                    buffer += os.read(self.master, 4096)
                except OSError:
                    return
                baud = _baud_of(self.slave)
                while (packet := p.take_packet(buffer)) is not None:
                    with self.lock:
                        reply = self.chain.handle(packet, baud)
                    if reply:
                        if self.wire_timing:
                            time.sleep(len(reply) * 10 / baud)
                        os.write(self.master, reply)
            now = time.monotonic()
            if now - last_tick >= self._tick_s or not ready:
                with self.lock:
                    self.chain.tick(now - last_tick)
                last_tick = now

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> PtyBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
