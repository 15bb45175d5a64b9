"""Camera frames from the MuJoCo world that `emulate-bus --sim` drives, served on a Unix socket.

A real arm's cameras see the arm the servos move; so do these. One render thread owns the GL
renderers (an EGL context belongs to its thread), copies the scene out of the world under the
bus lock (a fraction of a millisecond, so the servos' replies are never held up), draws it
outside the lock, and hands each frame to the subscriber's sender thread, which writes it to the
socket. A slow reader only ever gets the latest frame (one-slot mailbox), as a camera driver would.

Wire format: the client sends one JSON line `{"camera", "width", "height", "fps"}`; the server
answers one JSON line (`{"ok": true}` or `{"error": ...}`), then frames, each a `HEADER` followed
by `height * width * 3` RGB bytes. `rendered_at` is CLOCK_MONOTONIC, comparable across processes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from harness.errors import HarnessInputError
from harness.sim.config_sim_camera import SIM_CAMERAS, default_socket_path
from harness.sim.world import CAMERA_NAMES

HEADER = struct.Struct("<4sHHQdB3x")   # magic, width, height, sequence, rendered_at (s), fault
MAGIC = b"HSF1"
NOISE_PATTERNS = 7


class CameraFault(Enum):
    OK = "ok"            # frames at the requested rate
    DROPOUT = "dropout"  # no frames at all (cable pulled, driver hung)
    FROZEN = "frozen"    # the same picture over and over
    BLACK = "black"      # frames arrive, all black (lens cap, exposure failure)


@dataclass
class _Subscriber:
    conn: socket.socket
    camera: str
    width: int
    height: int
    period_s: float
    next_due: float
    sequence: int = 0
    last: np.ndarray | None = None
    mailbox: tuple[bytes, np.ndarray] | None = None
    ready: threading.Condition = field(default_factory=threading.Condition)
    alive: bool = True


class FrameServer:
    def __init__(self, world: Any, lock: Any, socket_path: str | Path | None = None) -> None:
        self.world = world
        self.lock = lock
        self.socket_path = Path(socket_path or default_socket_path())
        self.faults: dict[str, CameraFault] = {}
        self.frames_rendered = 0
        self._subscribers: list[_Subscriber] = []
        self._subs_lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = self._listen()
        self._threads = [threading.Thread(target=self._accept, name="camera-accept", daemon=True),
                         threading.Thread(target=self._render_loop, name="camera-render", daemon=True)]
        for thread in self._threads:
            thread.start()

    # --- control ------------------------------------------------------------------
    def set_fault(self, camera: str, fault: CameraFault) -> None:
        if camera not in SIM_CAMERAS:
            raise KeyError(f"no camera named {camera!r} (cameras: {', '.join(SIM_CAMERAS)})")
        self.faults[camera] = fault

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._subs_lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            self._drop(sub)
        for thread in self._threads:
            thread.join(timeout=2)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    # --- connections ----------------------------------------------------------------
    def _listen(self) -> socket.socket:
        if self.socket_path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.socket_path))
            except OSError:
                self.socket_path.unlink()   # left behind by a process that has gone
            else:
                raise HarnessInputError(self.socket_path, None,
                                        "another emulate-bus --sim is serving cameras here; pass --camera-socket")
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        listener.listen(8)
        listener.settimeout(0.2)
        return listener

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="camera-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            request = json.loads(conn.makefile("rb").readline() or b"{}")
            camera = str(request.get("camera"))
            width, height, fps = int(request["width"]), int(request["height"]), float(request["fps"])
            if camera not in SIM_CAMERAS or not (0 < width <= 4096 and 0 < height <= 4096 and 0 < fps <= 240):
                raise ValueError(f"bad request {request}")
        except (ValueError, KeyError, TypeError, OSError) as exc:
            with contextlib.suppress(OSError):
                conn.sendall((json.dumps({"error": str(exc)}) + "\n").encode())
                conn.close()
            return
        conn.settimeout(None)
        conn.sendall(b'{"ok": true}\n')
        sub = _Subscriber(conn, camera, width, height, 1.0 / fps, time.monotonic())
        with self._subs_lock:
            self._subscribers.append(sub)
        self._send_loop(sub)

    def _send_loop(self, sub: _Subscriber) -> None:
        while sub.alive:
            with sub.ready:
                while sub.mailbox is None and sub.alive:
                    sub.ready.wait(0.5)
                item, sub.mailbox = sub.mailbox, None
            if item is None:
                continue
            header, frame = item
            try:
                sub.conn.sendall(header)
                sub.conn.sendall(memoryview(frame).cast("B"))
            except OSError:
                self._drop(sub)

    def _drop(self, sub: _Subscriber) -> None:
        sub.alive = False
        with sub.ready:
            sub.ready.notify_all()
        with self._subs_lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
        with contextlib.suppress(OSError):
            sub.conn.close()

    # --- rendering ------------------------------------------------------------------
    def _render_loop(self) -> None:
        renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        noise: dict[tuple[int, int], np.ndarray] = {}
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                with self._subs_lock:
                    subscribers = list(self._subscribers)
                due = [s for s in subscribers if s.next_due <= now]
                if not due:
                    wait = min((s.next_due for s in subscribers), default=now + 0.01) - now
                    self._stop.wait(min(max(wait, 0.0005), 0.01))
                    continue
                for sub in due:
                    sub.next_due = max(sub.next_due + sub.period_s, now)
                    self._publish(sub, renderers, noise)
        finally:
            for renderer in renderers.values():
                renderer.close()

    def _publish(self, sub: _Subscriber, renderers: dict, noise: dict) -> None:
        fault = self.faults.get(sub.camera, CameraFault.OK)
        if fault is CameraFault.DROPOUT:
            return
        if fault is CameraFault.FROZEN and sub.last is not None:
            frame = sub.last
        else:
            frame = self._render(sub, renderers, noise)
            if fault is CameraFault.BLACK:
                frame = np.zeros_like(frame)
            else:
                sub.last = frame
        sub.sequence += 1
        header = HEADER.pack(MAGIC, sub.width, sub.height, sub.sequence, time.monotonic(),
                             list(CameraFault).index(fault))
        with sub.ready:
            sub.mailbox = (header, frame)
            sub.ready.notify()

    def _render(self, sub: _Subscriber, renderers: dict, noise: dict) -> np.ndarray:
        size = (sub.width, sub.height)
        renderer = renderers.get(size)
        if renderer is None:
            with self.lock:
                renderer = mujoco.Renderer(self.world.model, sub.height, sub.width)
            renderers[size] = renderer
            rng = np.random.default_rng(sub.width * 10_007 + sub.height)
            noise[size] = rng.integers(0, 2, size=(NOISE_PATTERNS, sub.height, sub.width, 3), dtype=np.uint8)
        with self.lock:   # copy the scene out of the world; drawing happens after the lock is released
            renderer.update_scene(self.world.data, camera=CAMERA_NAMES[sub.camera])
        self.frames_rendered += 1
        # Least-significant-bit sensor noise, as in SimWorld.render: a still scene must not look frozen.
        return renderer.render() ^ noise[size][self.frames_rendered % NOISE_PATTERNS]
