"""Camera frames from the MuJoCo world that `emulate-bus --sim` drives, served on a Unix socket.

A real arm's cameras see the arm the servos move; so do these. The drawing happens in a process
of its own (`harness.sim.frame_render`, which says why and holds the wire format); this side, in
the emulator, starts that process and answers its pose requests: the world's configuration,
copied under the bus lock (microseconds, so the servos' replies are never held up), with each
camera's fault as the console set it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, HarnessInputError
from harness.realtime import DEVICE_PRIORITY, realtime_thread
from harness.scratch import remove
from harness.sim.config_sim_camera import SIM_CAMERAS, new_socket_path
from harness.sim.frame_render import HEADER, MAGIC, READY, CameraFault, PoseLink, geometry_argument

__all__ = ["HEADER", "MAGIC", "CameraFault", "FrameServer", "FrameServerError"]

START_TIMEOUT_S = 60.0   # imports and a GL context on a loaded 2-core machine


class FrameServerError(HarnessError):
    """The simulated cameras' render process could not start."""


class FrameServer:
    def __init__(self, world: Any, lock: Any, socket_path: str | Path | None = None) -> None:
        self.world = world
        self.lock = lock
        self._own_folder = socket_path is None   # a scratch folder of its own, removed at close
        self.socket_path = Path(socket_path or new_socket_path())
        self.faults: dict[str, CameraFault] = {name: CameraFault.OK for name in SIM_CAMERAS}
        self._stop = threading.Event()
        _check_socket_path(self.socket_path)
        ours, theirs = socket.socketpair()
        self._link = PoseLink(ours, world.model.nq)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "harness.sim.frame_render", "--socket", str(self.socket_path),
             "--geometry", geometry_argument(world.geometry), "--pose-fd", str(theirs.fileno())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(theirs.fileno(),), env=env_finding_this_package())
        theirs.close()
        try:
            self._wait_until_ready()
        except BaseException:
            self._end_process()
            raise
        self._answering = threading.Thread(target=self._answer_pose_requests, name="camera-poses", daemon=True)
        self._answering.start()

    @property
    def pid(self) -> int:
        """The render process (what `ps` shows drawing the cameras)."""
        return self._process.pid

    # --- control ------------------------------------------------------------------
    def set_fault(self, camera: str, fault: CameraFault) -> None:
        if camera not in SIM_CAMERAS:
            raise KeyError(f"no camera named {camera!r} (cameras: {', '.join(SIM_CAMERAS)})")
        self.faults[camera] = fault

    def close(self) -> None:
        self._end_process()     # poses are answered until the process has gone: it never waits on one
        self._stop.set()
        self._answering.join(timeout=2)

    # --- the render process -------------------------------------------------------
    def _wait_until_ready(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        readable, _, _ = select.select([stdout], [], [], START_TIMEOUT_S)
        line = stdout.readline().strip() if readable else b""
        if line != READY:
            why = line.decode(errors="replace").removeprefix("error ") or (
                f"no answer within {START_TIMEOUT_S:.0f} s" if not readable else "it exited")
            raise FrameServerError(f"the simulated cameras could not start: {why}")

    def _answer_pose_requests(self) -> None:
        # Real-time like the bus thread (where the OS allows): a thread preempted by the renderer while it
        # holds the interpreter lock would hold the servos' replies up with it.
        with realtime_thread(priority=DEVICE_PRIORITY):
            self._answer_until_stopped()

    def _answer_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._link.wait_for_request(0.2):
                    continue
                with self.lock:
                    qpos = self.world.data.qpos.copy()
                self._link.answer_with(qpos, dict(self.faults))
            except OSError:
                return     # the render process has gone

    def _end_process(self) -> None:
        """Close the lifeline (the process unlinks its socket and exits), then make sure it did."""
        with contextlib.suppress(OSError):
            if self._process.stdin is not None:
                self._process.stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        with contextlib.suppress(OSError):
            self._link.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._own_folder:
            remove(self.socket_path.parent)


def env_finding_this_package() -> dict[str, str]:
    """The environment, with this `harness` first on the path: the render process imports the same code
    as the emulator, installed or not, from whatever folder the emulator was started in.

    Mesa's software renderer (llvmpipe, what EGL draws with on a machine without a GPU) rasterizes on worker
    threads of its own, at normal priority, which a camera thread raised above normal (`realtime.CAMERA_PRIORITY`)
    waits on. Drawing in the camera thread instead (`LP_NUM_THREADS=0`) kept frames fresh under load but made the
    cameras a real-time load of about a core on two: the kernel's real-time budget ran out and throttled every
    real-time thread of that core, the emulated servos' with them ("no status packet" pauses, whatever process the
    servos run in; docs/benchmarks.md, "Twin fidelity"). So Mesa keeps its default here; a user's own
    `LP_NUM_THREADS` is passed on."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


UNIX_PATH_MAX = 107   # bytes in sockaddr_un.sun_path, less the terminating NUL (Linux)


def _check_socket_path(socket_path: Path) -> None:
    """Refuse, before anything starts, a path no socket can be bound at; a socket file someone answers on
    belongs to another emulator; one nobody answers is left over, and removed."""
    if len(os.fsencode(socket_path)) > UNIX_PATH_MAX:
        raise HarnessInputError(socket_path, "--camera-socket", f"longer than a Unix socket path may be "
                                                                f"({UNIX_PATH_MAX} bytes); choose a shorter one")
    if not socket_path.parent.is_dir():
        raise HarnessInputError(socket_path, "--camera-socket", "its folder does not exist")
    if not os.access(socket_path.parent, os.W_OK | os.X_OK):
        raise HarnessInputError(socket_path, "--camera-socket", "its folder is not writable")
    if not socket_path.exists() and not socket_path.is_symlink():
        return
    if socket_path.is_symlink() or not stat.S_ISSOCK(socket_path.stat().st_mode):
        raise HarnessInputError(socket_path, "--camera-socket", "exists and is not a socket; it is left as it is")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(socket_path))
    except OSError:
        socket_path.unlink()
    else:
        raise HarnessInputError(socket_path, None,
                                "another emulate-bus --sim is serving cameras here; pass --camera-socket")
    finally:
        probe.close()
