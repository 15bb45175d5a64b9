"""The emulated arm's own process: the servos, the simulated world they drive and its cameras, for `harness rehearse`.

Why a process of its own: the emulated bus answers each servo packet from a thread that needs Python's
interpreter lock. In the rehearsal's process that lock is shared with the policy's threads, which at normal
priority may hold it while they wait for a core; under load a reply then missed LeRobot's window and a
rehearsal paused on "no status packet" (docs/benchmarks.md, "Twin fidelity"). A desk's servos share nothing
with the host's Python; neither do these now. The simulated cameras got their own render process for the same
reason (`sim.frame_render`); it is this process's child, as the cameras were the in-process emulator's.

Here the servos and the world stay coupled exactly as `emulator.scenario.open_rig(sim=True)` couples them (it is what
runs): `SimCoupledChain` on a `PtyBus`, the `FrameServer` beside it. What the rehearsal's process still needs
of the desk goes over a control link (`ControlLink`, JSON lines on a socket pair): a person's hands (the cube
placed, a console line carried out, which servos hold torque) and the simulator's truth (its clock and the cube's
pose) for the emulated expert. It ends when its standard input closes: when the rehearsal closes the rig, and
when the rehearsal dies, however it dies; never on a signal meant for the rehearsal (Ctrl+C in its terminal),
which releases torque on these servos as it stops.

Started by `harness.emulator.remote_rig.open_rig_process` as `python -m harness.emulator.rig_process`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from harness.realtime import DEVICE_PRIORITY, realtime_thread

READY = "ready"


class ControlLink:
    """Both ends of the control link: one JSON object a line each way, a request then its answer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = sock.makefile("rb")

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any] | None:
        """The next message; None when the other end has closed the link."""
        line = self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError(f"not a control message: {line[:80]!r}")
        return message

    def close(self) -> None:
        """Shut the socket first: a thread blocked reading it holds the reader's lock, which closing waits for."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._reader.close()
        with contextlib.suppress(OSError):
            self.sock.close()


def answer(rig: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Carry out one request on the rig; the answer, or `{"error": ...}` for one that cannot be."""
    from harness.emulator.scenario import ConsoleError, run_command

    op = request.get("op")
    try:
        if op == "place_cube":
            rig.place_cube(float(request["dx_cm"]), float(request["dy_cm"]), float(request.get("yaw_deg", 0.0)),
                           int(request.get("seed", 0)))
            return {"ok": True}
        if op == "command":
            lines = run_command(rig, str(request["line"]))
            return {"lines": lines}
        if op == "time":
            with rig.lock:
                return {"time": rig.world.time}
        if op == "cube_pose":
            with rig.lock:
                position, yaw = rig.world.cube_pose()
                return {"position": [float(v) for v in position], "yaw": float(yaw), "time": rig.world.time}
        if op == "torque":
            with rig.lock:
                return {"torque": {servo.name: servo.torque_enabled for servo in rig.chain.servos}}
    except (ConsoleError, KeyError, ValueError, TypeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"error": f"no request {op!r}"}


def serve_control(rig: Any, link: ControlLink) -> None:
    """Answer the rehearsal's requests until it closes the link. Real-time like the bus thread (where the OS
    allows): a request holds the bus lock for microseconds, and must not be preempted while it does."""
    with realtime_thread(priority=DEVICE_PRIORITY):
        while True:
            try:
                request = link.receive()
                if request is None:
                    return
                link.send(answer(rig, request))
            except (OSError, ValueError):
                return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the emulated arm of `harness rehearse`")
    parser.add_argument("--control-fd", required=True, type=int, help="this end of the rehearsal's control link")
    parser.add_argument("--camera-socket", type=Path, help="serve the simulated cameras here")
    parser.add_argument("--gap", default="{}", help="the declared reality gap, as JSON (models.reality_gap)")
    parser.add_argument("--cube-origin", default=None, help="the trained spot, X,Y in cm")
    args = parser.parse_args(argv)
    # A terminal's Ctrl+C (and a SIGTERM to the rehearsal's process group) reaches this process too; the rehearsal
    # still releases torque on these servos as it stops, so they live until it closes the lifeline, as a desk's do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    link = ControlLink(socket.socket(fileno=args.control_fd))
    with contextlib.ExitStack() as stack:
        stack.callback(link.close)
        try:
            import harness.sim  # noqa: F401  (headless GL before mujoco)
            from harness.emulator.scenario import default_scenario, open_rig
            from harness.models.reality_gap import RealityGap

            gap = RealityGap.model_validate(json.loads(args.gap))
            rig = stack.enter_context(open_rig(default_scenario(), sim=True, camera_socket=args.camera_socket,
                                               gap=gap))
            if args.cube_origin:
                x, y = (float(v) for v in args.cube_origin.split(","))
                rig.cube_origin_cm = (x, y)
        except Exception as exc:   # reported to the rehearsal, which raises it as one line
            print(f"error {type(exc).__name__}: {exc}", flush=True)
            return 1
        # What is built now lives as long as the process: out of the collector's reach (as `emulate-bus` does),
        # so a full collection never walks it holding the interpreter lock the bus thread needs.
        gc.freeze()
        threading.Thread(target=serve_control, args=(rig, link), name="rig-control", daemon=True).start()
        print(f"{READY} {rig.port}", flush=True)
        os.dup2(2, 1)   # nothing more for the rehearsal to read there; anything printed later goes to stderr
        sys.stdin.buffer.read()   # the lifeline: ends when the rehearsal closes it or dies
    return 0


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    os._exit(exit_code)   # the GL contexts are gone; skip teardown, where EGL's finalisers only print noise
