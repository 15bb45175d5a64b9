"""The rehearsal's side of the emulated arm's own process (`emulator.rig_process`, which says why it is one).

`open_rig_process` starts it and hands back a `RemoteRig`: the port LeRobot's follower opens, the hands a person
or the scripted operator has at the desk (`place_cube`, a console line), and `truth`, the simulator's clock and
cube pose that the emulated expert plans from (`EmulatedTruth`, the part of a `SimWorld` that policy reads). The
process ends when the rig closes, and with the rehearsal however it dies (its standard input is the lifeline).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from harness.emulator.rig_process import READY, ControlLink
from harness.errors import HarnessError
from harness.models.reality_gap import RealityGap
from harness.sim.frame_server import env_finding_this_package

START_TIMEOUT_S = 120.0   # imports, MuJoCo, and the cameras' own render process on a loaded 2-core machine


class RigProcessError(HarnessError):
    """The emulated arm's process could not start, or stopped answering."""


class EmulatedTruth:
    """What the emulated expert reads of the emulator's simulator: its clock and the cube's true pose (asked of the
    arm's process), the table's geometry and the model it plans on (built here from the same geometry)."""

    def __init__(self, rig: RemoteRig, geometry: Any) -> None:
        self._rig = rig
        self.geometry = geometry

    @cached_property
    def model(self) -> Any:
        from harness.sim.scene import build_model

        return build_model(self.geometry)

    @property
    def time(self) -> float:
        return float(self._rig.call({"op": "time"})["time"])

    def cube_pose(self) -> tuple[np.ndarray, float]:
        found = self._rig.call({"op": "cube_pose"})
        return np.array(found["position"], dtype=float), float(found["yaw"])


class RemoteRig:
    """The emulated desk as the rehearsal's process sees it (`emulator.scenario.Rig`'s hands, over the control link)."""

    def __init__(self, port: str, link: ControlLink, gap: RealityGap, camera_socket: Path | None, pid: int) -> None:
        from harness.sim.scene import gapped_geometry

        self.port = port
        self.pid = pid   # the arm's process (what `ps` shows serving the servos)
        self.camera_socket = camera_socket
        self._link = link
        self._lock = threading.Lock()
        self.truth = EmulatedTruth(self, gapped_geometry(gap))

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                self._link.send(request)
                reply = self._link.receive()
            except (OSError, ValueError) as exc:
                raise RigProcessError(f"the emulated arm's process stopped answering ({exc})") from None
        if reply is None:
            raise RigProcessError("the emulated arm's process has gone")
        if "error" in reply:
            raise RigProcessError(f"the emulated arm refused {request.get('op')}: {reply['error']}")
        return reply

    def place_cube(self, dx_cm: float, dy_cm: float, yaw_deg: float = 0.0, seed: int = 0) -> None:
        """Put the cube at rest at the trained spot plus (dx, dy) cm, turned by yaw, as a person would."""
        self.call({"op": "place_cube", "dx_cm": dx_cm, "dy_cm": dy_cm, "yaw_deg": yaw_deg, "seed": seed})

    def torque_enabled(self) -> dict[str, bool]:
        """Which servos hold torque now, by joint: what a hand on the arm feels (released means it moves freely)."""
        return {str(name): bool(on) for name, on in self.call({"op": "torque"})["torque"].items()}

    def command(self, line: str) -> list[str] | None:
        """One console line carried out on the arm (`emulator.scenario.run_command`): the lines to print, None
        for quit."""
        lines = self.call({"op": "command", "line": line})["lines"]
        return None if lines is None else [str(text) for text in lines]


@contextlib.contextmanager
def open_rig_process(camera_socket: Path | None = None, gap: RealityGap | None = None,
                     cube_origin_cm: tuple[float, float] | None = None) -> Iterator[RemoteRig]:
    """The emulated SO-101 (`emulate-bus --sim`'s servos, world and, with a `camera_socket`, cameras) in a process
    of its own, for as long as the block runs."""
    gap = gap or RealityGap()
    ours, theirs = socket.socketpair()
    argv = [sys.executable, "-m", "harness.emulator.rig_process", "--control-fd", str(theirs.fileno()),
            "--gap", json.dumps(gap.declared())]
    if camera_socket is not None:
        argv += ["--camera-socket", str(camera_socket)]
    if cube_origin_cm is not None:
        argv += ["--cube-origin", f"{cube_origin_cm[0]!r},{cube_origin_cm[1]!r}"]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(theirs.fileno(),),
                               env=env_finding_this_package())
    theirs.close()
    link = ControlLink(ours)
    try:
        port = _wait_until_ready(process)
        yield RemoteRig(port, link, gap, camera_socket, process.pid)
    finally:
        _end(process, link)


def _wait_until_ready(process: subprocess.Popen[bytes]) -> str:
    stdout = process.stdout
    assert stdout is not None
    readable, _, _ = select.select([stdout], [], [], START_TIMEOUT_S)
    line = stdout.readline().decode(errors="replace").strip() if readable else ""
    word, _, rest = line.partition(" ")
    if word != READY or not rest:
        why = line.removeprefix("error ") or (f"no answer within {START_TIMEOUT_S:.0f} s" if not readable
                                              else "it exited")
        raise RigProcessError(f"the emulated arm could not start: {why}")
    return rest


def _end(process: subprocess.Popen[bytes], link: ControlLink) -> None:
    """Close the lifeline (the process closes its cameras and bus, then exits), then make sure it did."""
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()
    link.close()
