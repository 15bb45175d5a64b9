"""A LeRobot `Camera` whose frames are the simulated arm's, served by `harness emulate-bus --sim`.

It behaves as LeRobot's own cameras do: `connect` waits for a first frame, a background thread
keeps the latest one, `async_read` waits for a frame newer than the last one it returned,
`read_latest` returns the newest at once and fails when it is too old (a dropout), and
`disconnect` stops the thread and closes the socket. Only the transport differs (a Unix socket
from the emulator instead of V4L2 from a USB device).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import threading
import time
from typing import Any

import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.cameras.configs import ColorMode
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from harness.realtime import CAMERA_PRIORITY, realtime_thread
from harness.sim.config_sim_camera import SIM_CAMERAS, HarnessSimCameraConfig

logger = logging.getLogger(__name__)

# Frame header, as `harness.sim.frame_server.HEADER` writes it (duplicated so this module stays MuJoCo-free).
HEADER_FORMAT = "<4sHHQdB3x"
HEADER_SIZE = struct.calcsize(HEADER_FORMAT)
MAGIC = b"HSF1"


def _parse_header(raw: bytes) -> tuple[int, int, int, float, int]:
    magic, width, height, sequence, rendered_at, fault = struct.unpack(HEADER_FORMAT, raw)
    if magic != MAGIC:
        raise ConnectionError(f"not a harness frame stream (magic {magic!r})")
    return width, height, sequence, rendered_at, fault


class HarnessSimCamera(Camera):
    def __init__(self, config: HarnessSimCameraConfig) -> None:
        super().__init__(config)
        self.config = config
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._new_frame = threading.Event()
        self.latest_frame: np.ndarray | None = None
        self.latest_received_at: float | None = None    # time.perf_counter()
        self.latest_rendered_at: float | None = None    # time.monotonic() in the emulator (same clock)
        self.latest_sequence = 0
        self.error: str | None = None

    def __str__(self) -> str:
        return f"HarnessSimCamera({self.config.camera}@{self.config.socket_path})"

    @property
    def is_connected(self) -> bool:
        return self._sock is not None and self._thread is not None and self._thread.is_alive()

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        from harness.scratch import live_folders
        from harness.sim.config_sim_camera import EMULATOR_SCRATCH, SOCKET_NAME

        paths = [folder / SOCKET_NAME for folder in live_folders(EMULATOR_SCRATCH) if (folder / SOCKET_NAME).exists()]
        return [{"name": f"harness sim {name}", "type": "harness_sim", "id": name, "socket_path": str(path)}
                for path in paths for name in SIM_CAMERAS]

    # --- lifecycle ---------------------------------------------------------------------
    def connect(self, warmup: bool = True) -> None:
        if self._sock is not None:
            raise DeviceAlreadyConnectedError(f"{self} is already connected")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.config.socket_path)
            request = {"camera": self.config.camera, "width": self.width, "height": self.height, "fps": self.fps}
            sock.sendall((json.dumps(request) + "\n").encode())
            answer = json.loads(self._read_line(sock))
        except (OSError, ValueError) as exc:
            sock.close()
            raise ConnectionError(f"{self}: no simulated camera server ({exc}); start `harness emulate-bus --sim`"
                                  ) from None
        if "error" in answer:
            sock.close()
            raise ConnectionError(f"{self}: refused: {answer['error']}")
        self._sock = sock
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_loop, name=f"{self}_read", daemon=True)
        self._thread.start()
        if warmup and not self._new_frame.wait(self.config.warmup_s):
            self.disconnect()
            raise ConnectionError(f"{self}: no frame within {self.config.warmup_s} s")

    def disconnect(self) -> None:
        if self._sock is None:
            raise DeviceNotConnectedError(f"{self} is not connected")
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._sock, self._thread = None, None
        with self._lock:
            self.latest_frame = None
            self._new_frame.clear()

    # --- reading ---------------------------------------------------------------------------
    def read(self) -> np.ndarray:
        """A frame newer than the call (blocking up to one second)."""
        self._check()
        self._new_frame.clear()
        return self.async_read(timeout_ms=1000)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._check()
        if not self._new_frame.wait(timeout_ms / 1000):
            raise TimeoutError(f"{self} async_read timeout after {timeout_ms} ms")
        with self._lock:
            frame = self.latest_frame
            self._new_frame.clear()
        if frame is None:
            raise RuntimeError(f"{self} has no frame")
        return frame

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        self._check()
        with self._lock:
            frame, received = self.latest_frame, self.latest_received_at
        if frame is None or received is None:
            raise RuntimeError(f"{self} has not received any frame yet")
        age_ms = (time.perf_counter() - received) * 1e3
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self} latest frame is too old: {age_ms:.0f} ms (max {max_age_ms} ms)")
        return frame

    def _check(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected" + (f" ({self.error})" if self.error else ""))

    # --- the socket ------------------------------------------------------------------------
    @staticmethod
    def _read_line(sock: socket.socket) -> bytes:
        line = bytearray()
        while not line.endswith(b"\n"):
            chunk = sock.recv(1)
            if not chunk:
                raise ConnectionError("server closed the connection")
            line += chunk
        return bytes(line)

    @staticmethod
    def _recv_into(sock: socket.socket, view: memoryview) -> None:
        while view.nbytes:
            got = sock.recv_into(view)
            if got == 0:
                raise ConnectionError("frame server closed the connection")
            view = view[got:]

    def _read_loop(self) -> None:
        with realtime_thread(priority=CAMERA_PRIORITY):   # the camera driver's thread (harness/realtime.py)
            self._read_until_stopped()

    def _read_until_stopped(self) -> None:
        sock = self._sock
        assert sock is not None
        header = bytearray(HEADER_SIZE)
        try:
            while not self._stop.is_set():
                self._recv_into(sock, memoryview(header))
                width, height, sequence, rendered_at, _ = _parse_header(bytes(header))
                frame: np.ndarray = np.empty((height, width, 3), dtype=np.uint8)
                self._recv_into(sock, memoryview(frame).cast("B"))
                if self.config.color_mode is ColorMode.BGR:
                    frame = np.ascontiguousarray(frame[..., ::-1])
                with self._lock:
                    self.latest_frame = frame
                    self.latest_received_at = time.perf_counter()
                    self.latest_rendered_at = rendered_at
                    self.latest_sequence = sequence
                    self._new_frame.set()
        except (OSError, ConnectionError) as exc:
            if not self._stop.is_set():
                self.error = str(exc)
                logger.warning("%s: %s", self, exc)
