"""The simulated cameras' own process: renders the arm `emulate-bus --sim` drives and serves the frames.

Why a process of its own: MuJoCo's renderer holds Python's interpreter lock while it draws (20-40 ms
for a 640x480 frame on a CPU), and the emulator's bus thread needs that lock to answer each servo
packet within its reply window. In one process, every frame held the servos' replies up by a
render; a real arm's USB cameras share nothing with its servo bus, and neither do these now.

This process builds its own `SimWorld` from the same `SceneGeometry`, asks the emulator for the
arm's configuration (and each camera's fault) once per round of rendering over a socket pair
(`PoseLink`), and draws each frame with `SimWorld.render_request` (posed by forward kinematics,
with the same sensor noise as every simulated frame). It serves subscribers on a Unix
socket (wire format below), one sender thread each; a slow reader only ever gets the latest frame
(one-slot mailbox), as a camera driver would. It ends when its standard input closes: when the
emulator closes the cameras, and when the emulator dies, however it dies.

Wire format: the client sends one JSON line `{"camera", "width", "height", "fps"}`; the server
answers one JSON line (`{"ok": true}` or `{"error": ...}`), then frames, each a `HEADER` followed
by `height * width * 3` RGB bytes. `rendered_at` is CLOCK_MONOTONIC, comparable across processes.

Started by `harness.sim.frame_server.FrameServer` as `python -m harness.sim.frame_render`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from harness.realtime import CAMERA_PRIORITY, realtime_thread
from harness.sim.scene import SceneGeometry
from harness.sim.world import CAMERA_NAMES, NOISE_PATTERNS, FrameRequest, SimWorld

HEADER = struct.Struct("<4sHHQdB3x")   # magic, width, height, sequence, rendered_at (s), fault
MAGIC = b"HSF1"
CAMERAS = tuple(CAMERA_NAMES)          # the order faults travel in on the pose link
READY = b"ready"


class CameraFault(Enum):
    OK = "ok"            # frames at the requested rate
    DROPOUT = "dropout"  # no frames at all (cable pulled, driver hung)
    FROZEN = "frozen"    # the same picture over and over
    BLACK = "black"      # frames arrive, all black (lens cap, exposure failure)


FAULTS = tuple(CameraFault)


@dataclass(frozen=True)
class Pose:
    """What a round of rendering needs from the emulator: the arm and cube, and each camera's fault."""

    qpos: np.ndarray
    faults: dict[str, CameraFault]


class PoseLink:
    """Both ends of the request/answer link between the emulator and this process.

    A request is one byte; the answer is `nq` float64 (the world's qpos) then one byte per camera
    (its fault's index), a fixed size both ends know from the model.
    """

    def __init__(self, sock: socket.socket, nq: int) -> None:
        self.sock = sock
        self.answer = struct.Struct(f"<{nq}d{len(CAMERAS)}B")

    # --- the render process's end ------------------------------------------------------------
    def request(self) -> Pose:
        """The emulator's present pose; ConnectionError when the emulator has gone."""
        self.sock.sendall(b"?")
        raw = bytearray()
        while len(raw) < self.answer.size:
            chunk = self.sock.recv(self.answer.size - len(raw))
            if not chunk:
                raise ConnectionError("the emulator closed the pose link")
            raw += chunk
        values = self.answer.unpack(bytes(raw))
        nq = len(values) - len(CAMERAS)
        return Pose(np.array(values[:nq]), {name: FAULTS[i] for name, i in zip(CAMERAS, values[nq:], strict=True)})

    # --- the emulator's end ------------------------------------------------------------------
    def wait_for_request(self, timeout_s: float) -> bool:
        """True once a request has arrived; False on timeout. ConnectionError when the renderer has gone."""
        self.sock.settimeout(timeout_s)
        try:
            got = self.sock.recv(1)
        except TimeoutError:
            return False
        if not got:
            raise ConnectionError("the render process closed the pose link")
        return True

    def answer_with(self, qpos: np.ndarray, faults: dict[str, CameraFault]) -> None:
        self.sock.sendall(self.answer.pack(*qpos, *(FAULTS.index(faults[name]) for name in CAMERAS)))


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


class FrameService:
    """Accepts camera subscribers and renders each at its own rate from the emulator's poses."""

    def __init__(self, geometry: SceneGeometry, socket_path: Path, pose_link: socket.socket) -> None:
        self.world = SimWorld(geometry)   # drawn only: posed from the emulator's qpos, never stepped
        self.socket_path = socket_path
        self.poses = PoseLink(pose_link, self.world.model.nq)
        self.frames_rendered = 0
        self._subscribers: list[_Subscriber] = []
        self._subs_lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(socket_path))
        self._listener.listen(8)
        self._listener.settimeout(0.2)
        self._threads = [threading.Thread(target=self._accept, name="camera-accept", daemon=True),
                         threading.Thread(target=self._render_loop, name="camera-render", daemon=True)]
        for thread in self._threads:
            thread.start()

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
            if camera not in CAMERAS or not (0 < width <= 4096 and 0 < height <= 4096 and 0 < fps <= 240):
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
        with realtime_thread(priority=CAMERA_PRIORITY):
            self._send_until_dropped(sub)

    def _send_until_dropped(self, sub: _Subscriber) -> None:
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
        with realtime_thread(priority=CAMERA_PRIORITY):   # a camera delivers whatever the host does (realtime.py)
            self._render_until_stopped()

    def _render_until_stopped(self) -> None:
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
                try:
                    pose = self.poses.request()
                except OSError:
                    self._stop.set()    # the emulator has gone: so have its cameras
                    return
                for sub in due:
                    sub.next_due = max(sub.next_due + sub.period_s, now)
                    self._publish(sub, pose)
        finally:
            self.world.release_renderers()   # on the thread that made them (EGL)

    def _publish(self, sub: _Subscriber, pose: Pose) -> None:
        fault = pose.faults[sub.camera]
        if fault is CameraFault.DROPOUT:
            return
        if fault is CameraFault.FROZEN and sub.last is not None:
            frame = sub.last
        else:
            self.frames_rendered += 1
            frame = self.world.render_request(FrameRequest(sub.camera, sub.width, sub.height, pose.qpos,
                                                           self.frames_rendered % NOISE_PATTERNS, frozen=False))
            if fault is CameraFault.BLACK:
                frame = np.zeros_like(frame)
            else:
                sub.last = frame
        sub.sequence += 1
        header = HEADER.pack(MAGIC, sub.width, sub.height, sub.sequence, time.monotonic(), FAULTS.index(fault))
        with sub.ready:
            sub.mailbox = (header, frame)
            sub.ready.notify()


def geometry_argument(geometry: SceneGeometry) -> str:
    return json.dumps(asdict(geometry))


def _geometry_from(text: str) -> SceneGeometry:
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(text).items()}
    return SceneGeometry(**values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the simulated cameras of `harness emulate-bus --sim`")
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--geometry", required=True, help="SceneGeometry as JSON")
    parser.add_argument("--pose-fd", required=True, type=int, help="this end of the emulator's pose link")
    args = parser.parse_args(argv)
    geometry = _geometry_from(args.geometry)
    link = socket.socket(fileno=args.pose_fd)
    try:
        service = FrameService(geometry, args.socket, link)
    except Exception as exc:   # reported to the emulator, which raises it as one line
        print(f"error {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(READY.decode(), flush=True)
    try:
        sys.stdin.buffer.read()   # the lifeline: ends when the emulator closes it or dies
    finally:
        service.close()
        link.close()
    return 0


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    os._exit(exit_code)   # the GL contexts are gone; skip teardown, where EGL's finalisers only print noise
