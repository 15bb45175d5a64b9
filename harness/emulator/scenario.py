"""Emulator scenarios from YAML, the `harness emulate-bus` console, and its Python twin (`Rig`).

The console is what a person at the desk does to the arm: plug and unplug servos, power-cycle
them, move joints by hand (torque off), sweep them through their ranges for calibration, place
the cube for a trial, and break things on purpose (overheat, a sagging supply, a jammed joint, a
camera that drops out, freezes or goes black). Tests call the same `Rig` methods directly.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.bus import packets as p
from harness.emulator.hands import Finished
from harness.emulator.servos import ADDR_HOMING_OFFSET, Faults, Firmware, Servo, ServoChain, encode_sign_magnitude
from harness.errors import HarnessError, HarnessInputError
from harness.models.reality_gap import RealityGap

SO101_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
DEFAULT_CUBE_ORIGIN_CM = (22.0, -5.0)  # the protocol's default trained cube position
DEFAULT_ASSEMBLY = Path(__file__).resolve().parents[2] / "calibration" / "emulated_follower.json"


class ServoSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    id: int = Field(ge=0, le=253)
    baud: int = 1_000_000
    firmware: Literal["documented", "commit-on-relock", "reject-while-locked"] = "documented"
    model: int = p.STS3215_MODEL
    position: int = Field(2048, ge=0, le=4095)
    min_limit: int = Field(0, ge=0, le=4095)     # Min/Max_Position_Limit in EEPROM (LeRobot's calibrated range)
    max_limit: int = Field(4095, ge=0, le=4095)
    homing_offset: int = Field(0, ge=-2047, le=2047)
    ack_with_old_id: bool = True
    temperature_c: float = Field(28.0, ge=-20, le=150)  # at or above Max_Temperature_Limit (70): overheat
    jammed: bool = False                                # the shaft is blocked: overload once torque pushes
    firmware_version: str = Field("3.10", pattern=r"^\d{1,2}\.\d{1,2}$")   # Firmware_Major.Minor (LeRobot wants one)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    servos: list[ServoSpec]
    drop_rate: float = Field(0.0, ge=0, le=1)
    corrupt_rate: float = Field(0.0, ge=0, le=1)
    seed: int = 0
    wire_timing: bool = False
    supply_voltage: float = Field(12.0, ge=0, le=25)   # below Min_Voltage_Limit (5.0 V): under-voltage


def default_scenario() -> Scenario:
    """A healthy SO-101 follower: IDs 1-6 at 1 Mbaud, calibrated as calibration/emulated_follower.json."""
    return Scenario(servos=[ServoSpec(name=n, id=i + 1, **({"min_limit": 1900, "max_limit": 3400}
                                                            if n == "gripper" else {}))
                            for i, n in enumerate(SO101_NAMES)])


def factory_fresh_scenario() -> Scenario:
    """Six servos straight from the bag: all ID 1 at 1 Mbaud, uncalibrated, all on one chain
    (run `lerobot-setup-motors` and connect each alone with `only NAME`, as the prompts ask)."""
    return Scenario(servos=[ServoSpec(name=n, id=1) for n in SO101_NAMES])


def load_scenario(path: str | Path) -> Scenario:
    from harness.storage.safe_yaml import load_yaml_file

    try:
        return Scenario.model_validate(load_yaml_file(path, max_bytes=1024 * 1024))
    except ValidationError as err:
        first = err.errors()[0]
        raise HarnessInputError(path, ".".join(str(x) for x in first["loc"]), first["msg"]) from None


def build_chain(scenario: Scenario) -> ServoChain:
    servos = []
    for spec in scenario.servos:
        if spec.baud not in p.INDEX_BY_BAUD:
            raise HarnessInputError(None, f"servos.{spec.name}.baud", f"{spec.baud} is not an STS3215 baud rate")
        servo = Servo(spec.name, spec.id, p.INDEX_BY_BAUD[spec.baud], Firmware(spec.firmware), spec.model,
                      float(spec.position), ack_with_old_id=spec.ack_with_old_id, temperature_c=spec.temperature_c,
                      supply_v=scenario.supply_voltage, jammed=spec.jammed)
        major, minor = (int(v) for v in spec.firmware_version.split("."))
        servo.eeprom[p.ADDR_FIRMWARE_MAJOR], servo.eeprom[p.ADDR_FIRMWARE_MINOR] = major, minor
        servo.eeprom[9:11] = spec.min_limit.to_bytes(2, "little")
        servo.eeprom[11:13] = spec.max_limit.to_bytes(2, "little")
        servo.eeprom[ADDR_HOMING_OFFSET:ADDR_HOMING_OFFSET + 2] = encode_sign_magnitude(
            spec.homing_offset, 11).to_bytes(2, "little")
        servo.power_cycle()
        servos.append(servo)
    return ServoChain(servos, Faults(scenario.drop_rate, scenario.corrupt_rate, scenario.seed))


class ConsoleError(HarnessError, ValueError):
    """A console command that cannot be carried out; the console prints it and carries on."""


@dataclass
class Rig:
    """The emulated arm on the desk: its servo chain (and the lock the bus thread holds), and with
    `--sim` the MuJoCo world the servos drive and the camera frame server that renders it."""

    chain: ServoChain
    lock: Any
    port: str
    world: Any | None = None
    frames: Any | None = None
    cube_origin_cm: tuple[float, float] = DEFAULT_CUBE_ORIGIN_CM

    # --- hands ---------------------------------------------------------------------
    def move(self, name: str, degrees: float, speed_deg_s: float | None = None) -> str:
        """Queue a hand motion; returns the job's name, which `chain.hand.on_done` reports when it is done."""
        self._joint(name)
        return self.chain.hand.move(name, degrees, speed_deg_s)

    def sweep(self, speed_deg_s: float | None = None, names: list[str] | None = None) -> str:
        for name in names or []:
            self._joint(name)
        return self.chain.hand.sweep(names or None, speed_deg_s)

    def release(self, names: list[str] | None = None) -> list[str]:
        """Let go of these joints (all when None); returns the jobs stopped before they were done."""
        for name in names or []:
            self._joint(name)
        return self.chain.hand.release(names or None)

    def wait(self, timeout_s: float = 60.0) -> None:
        self.chain.hand.wait(timeout_s)

    def hand_line(self) -> str:
        """What the hand is doing: the motion under way and what is left of its queue, or what it holds."""
        doing = self.chain.hand.doing()
        if doing is not None:
            motion, more, seconds = doing
            after = f", {more} more motion{'s' * (more != 1)} queued" if more else ""
            return (f"  hand: moving {motion.joint} to {motion.target_deg:+.1f} deg ({motion.job}){after}; "
                    f"about {seconds:.0f} s left")
        held = ", ".join(f"{name} {deg:+.1f}" for name, deg in self.chain.hand.held.items())
        return f"  hand: still, holding {held} deg" if held else "  hand: still, holding nothing"

    def _torque_holds(self, names: list[str]) -> list[str]:
        with self.lock:
            return [s.name for s in self.chain.servos if s.name in names and s.torque_enabled]

    # --- the table -----------------------------------------------------------------
    def place_cube(self, dx_cm: float, dy_cm: float, yaw_deg: float = 0.0, seed: int = 0) -> None:
        """Put the cube at rest at the trained position plus (dx, dy) cm, turned by yaw, as a person would."""
        import math

        world = self._world()
        x, y = self.cube_origin_cm
        with self.lock:
            world.place_cube(((x + dx_cm) / 100, (y + dy_cm) / 100), math.radians(yaw_deg), seed=seed)

    # --- faults ---------------------------------------------------------------------
    def heat(self, name: str, celsius: float) -> None:
        with self.lock:
            self._servo(name).temperature_c = celsius

    def supply(self, volts: float) -> None:
        with self.lock:
            self.chain.set_supply(volts)

    def jam(self, name: str, jammed: bool = True) -> None:
        with self.lock:
            self._servo(name).jammed = jammed

    def camera(self, name: str, fault: str) -> None:
        if self.frames is None:
            raise ConsoleError("no simulated cameras (start with --sim)")
        from harness.sim.frame_server import CameraFault

        try:
            self.frames.set_fault(name, CameraFault(fault))
        except ValueError:
            raise ConsoleError(f"camera fault must be one of {[f.value for f in CameraFault]}") from None

    def command(self, line: str) -> list[str] | None:
        """One console line carried out on this arm (`run_command`): the lines to print, None for `quit`."""
        return run_command(self, line)

    # --- reading --------------------------------------------------------------------
    def status_lines(self) -> list[str]:
        with self.lock:
            return rig_status(self)

    def health_lines(self) -> list[str]:
        with self.lock:
            lines = []
            for s in self.chain.servos:
                s.sense(0.0)
                errors = ",".join(str(e.name).lower() for e in type(s.errors) if e in s.errors) or "ok"
                lines.append(f"  {s.name:<14} pos {round(s.present_ticks):>4} offset {s.homing_offset:>5} "
                             f"{s.ram[62] / 10:4.1f} V {s.ram[63]:>3} C load {round(s.load):>5} "
                             f"{'JAMMED ' if s.jammed else ''}errors {errors}")
            return lines

    def _servo(self, name: str) -> Servo:
        for servo in self.chain.servos:
            if servo.name == name:
                return servo
        raise ConsoleError(f"no servo named {name!r} (servos: {', '.join(s.name for s in self.chain.servos)})")

    def _joint(self, name: str) -> None:
        if name not in self.chain.hand.ranges:
            raise ConsoleError(f"no joint named {name!r} (joints: {', '.join(self.chain.hand.ranges)})")

    def _world(self) -> Any:
        if self.world is None:
            raise ConsoleError("no simulated table (start with --sim)")
        return self.world


def load_assembly(path: str | Path) -> dict[str, Any]:
    """How the simulated arm's encoders sit on its joints, as a LeRobot calibration file (no homing offset)."""
    from harness.emulator.sim_coupling import JointCalibration

    try:
        raw = json.loads(Path(path).read_text())
        return {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in raw.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessInputError(path, None, f"not a LeRobot calibration file ({exc})") from None


@contextmanager
def open_rig(scenario: Scenario | None = None, sim: bool = False, assembly: str | Path = DEFAULT_ASSEMBLY,
             camera_socket: str | Path | None = None, gap: RealityGap | None = None) -> Iterator[Rig]:
    """What `harness emulate-bus` serves, as an object for scripts and tests: the chain on a pseudo-terminal;
    with `sim` the MuJoCo arm the servos drive; with a `camera_socket` too, the simulated cameras. `gap`: the
    declared reality gap the simulated arm, its table and its cameras differ from the twin by."""
    from harness.emulator.pty_port import PtyBus

    scenario = scenario or default_scenario()
    chain = build_chain(scenario)
    world = frames = None
    if sim:
        import harness.sim  # noqa: F401  (headless GL before mujoco)
        from harness.emulator.sim_coupling import SimCoupledChain
        from harness.sim.scene import gapped_geometry
        from harness.sim.world import SimWorld

        gap = gap or RealityGap()
        calibration = load_assembly(assembly)
        world = SimWorld(gapped_geometry(gap))
        chain = SimCoupledChain(chain.servos, world, calibration, chain.faults, gain=gap.servo_gain,
                                backlash_deg=gap.servo_backlash_deg)
    try:
        with PtyBus(chain, wire_timing=scenario.wire_timing) as bus:
            if world is not None and camera_socket is not None:
                from harness.sim.frame_server import FrameServer

                frames = FrameServer(world, bus.lock, camera_socket)
            try:
                yield Rig(chain, bus.lock, bus.port, world, frames)
            finally:
                if frames is not None:
                    frames.close()
    finally:
        if world is not None:
            world.close()


HELP = """commands:
  status | health | power-cycle | unplug NAME... | plug NAME... | only NAME...
  move NAME DEG (torque off: by hand; 0 = middle of the range) | sweep [DEG_PER_S] [NAME...] | release [NAME...]
    (move and sweep print `done: ...` when the hand has finished; `status` shows a motion under way)
  cube DX_CM DY_CM [YAW_DEG] (--sim: place the cube at the trained spot plus this offset)
  heat NAME CELSIUS | supply VOLTS | jam NAME | unjam NAME | camera NAME ok|dropout|frozen|black
  help | quit"""


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConsoleError(f"{what} must be a number, got {text!r}") from None


def _need(words: list[str], count: int, usage: str) -> None:
    if len(words) < count:
        raise ConsoleError(f"usage: {usage}")


def _by_hand(rig: Rig, names: list[str]) -> None:
    """A hand cannot turn a joint its servo holds: asking it to would do nothing, so it is an error."""
    held = rig._torque_holds(names)
    if held:
        raise ConsoleError(f"torque is on for {', '.join(held)}: the servo holds it and a hand cannot move it "
                           "(LeRobot's tools release torque before they ask you to move the arm)")


def _queued(rig: Rig, job: str) -> list[str]:
    doing = rig.chain.hand.doing()
    about = f"about {doing[2]:.0f} s" if doing is not None else "a moment"
    return [f"{job}: under way ({about}); a `done:` line follows when the hand has finished"]


def _move(rig: Rig, args: list[str]) -> list[str]:
    _need(args, 2, "move NAME DEG")
    degrees = _number(args[1], "DEG")
    rig._joint(args[0])
    _by_hand(rig, [args[0]])
    return _queued(rig, rig.move(args[0], degrees))


def _sweep(rig: Rig, args: list[str]) -> list[str]:
    speed = None
    if args and args[0].replace(".", "", 1).isdigit():
        speed = _number(args.pop(0), "speed")
        if speed <= 0:
            raise ConsoleError(f"DEG_PER_S must be above 0, got {speed:g}")
    for name in args:
        rig._joint(name)
    _by_hand(rig, args or list(rig.chain.hand.ranges))
    return _queued(rig, rig.sweep(speed, args))


def _release(rig: Rig, args: list[str]) -> list[str]:
    hand = rig.chain.hand
    for name in args:
        rig._joint(name)
    if hand.doing() is None and not (set(args or hand.ranges) & set(hand.held)):
        raise ConsoleError(f"the hand holds {'none of ' + ', '.join(args) if args else 'nothing'}: nothing to let go")
    stopped = rig.release(args)
    return [f"released {', '.join(args) if args else 'every joint'}"
            + (f"; stopped before done: {'; '.join(stopped)}" if stopped else "")]


def _servos(rig: Rig, args: list[str], usage: str) -> None:
    """The servo names a plug command acts on: at least one, each one that exists."""
    _need(args, 1, usage)
    for name in args:
        rig._servo(name)


def _unplug(rig: Rig, args: list[str]) -> list[str]:
    _servos(rig, args, "unplug NAME...")
    if not set(args) & rig.chain.connected:
        raise ConsoleError(f"{', '.join(args)} {'is' if len(args) == 1 else 'are'} already unplugged")
    rig.chain.unplug(*args)
    return rig_status(rig)


def _plug(rig: Rig, args: list[str]) -> list[str]:
    _servos(rig, args, "plug NAME...")
    if set(args) <= rig.chain.connected:
        raise ConsoleError(f"{', '.join(args)} {'is' if len(args) == 1 else 'are'} already plugged in")
    rig.chain.plug(*args)
    return rig_status(rig)


def _only(rig: Rig, args: list[str]) -> list[str]:
    _servos(rig, args, "only NAME... (to unplug every servo, `unplug` them by name)")
    rig.chain.only(*args)
    return rig_status(rig)


def rig_status(rig: Rig) -> list[str]:
    """The status lines, from a command that already holds the rig's lock."""
    lines = []
    for s in rig.chain.servos:
        plugged = "plugged" if s.name in rig.chain.connected else "unplugged"
        lines.append(f"  {s.name:<14} ID {s.current_id:<3} (EEPROM {s.eeprom[p.ADDR_ID]}) {s.baud} baud "
                     f"{'locked' if s.locked else 'UNLOCKED'} torque {'on' if s.torque_enabled else 'off'} "
                     f"{s.firmware.value} {plugged}")
    lines.append(rig.hand_line())
    return lines


def _ok(action: Callable[[Rig, list[str]], Any]) -> Callable[[Rig, list[str]], list[str]]:
    def run(rig: Rig, args: list[str]) -> list[str]:
        action(rig, args)
        return ["ok"]
    return run


def _power_cycle(rig: Rig, a: list[str]) -> list[str]:
    rig.chain.power_cycle()
    return rig_status(rig)


def _heat(rig: Rig, a: list[str]) -> None:
    _need(a, 2, "heat NAME CELSIUS")
    rig.heat(a[0], _number(a[1], "CELSIUS"))


def _supply(rig: Rig, a: list[str]) -> None:
    _need(a, 1, "supply VOLTS")
    rig.supply(_number(a[0], "VOLTS"))


def _jam(rig: Rig, a: list[str], jammed: bool = True) -> None:
    _need(a, 1, "jam NAME" if jammed else "unjam NAME")
    rig.jam(a[0], jammed=jammed)


def _camera(rig: Rig, a: list[str]) -> None:
    _need(a, 2, "camera NAME ok|dropout|frozen|black")
    rig.camera(a[0], a[1])


def _cube(rig: Rig, a: list[str]) -> list[str]:
    _need(a, 2, "cube DX_CM DY_CM [YAW_DEG]")
    dx, dy = _number(a[0], "DX_CM"), _number(a[1], "DY_CM")
    yaw = _number(a[2], "YAW_DEG") if len(a) > 2 else 0.0
    rig.place_cube(dx, dy, yaw)
    return [f"cube placed at dx {dx:+.1f} dy {dy:+.1f} cm yaw {yaw:+.0f} deg from the trained spot"]


COMMANDS: dict[str, Callable[[Rig, list[str]], list[str]]] = {
    "status": lambda rig, a: rig.status_lines(),
    "health": lambda rig, a: rig.health_lines(),
    "help": lambda rig, a: [HELP],
    "power-cycle": _power_cycle,
    "unplug": _unplug,
    "plug": _plug,
    "only": _only,
    "move": _move,
    "sweep": _sweep,
    "release": _release,
    "cube": _cube,
    "heat": _ok(_heat),
    "supply": _ok(_supply),
    "jam": _ok(_jam),
    "unjam": _ok(lambda rig, a: _jam(rig, a, jammed=False)),
    "camera": _ok(_camera),
}
LOCKED_COMMANDS = {"power-cycle", "unplug", "plug", "only"}  # the others take the lock themselves


def run_command(rig: Rig, line: str) -> list[str] | None:
    """Carry out one console line; return the lines to print (one `error: ...` line for a command that cannot
    be carried out or would do nothing), or None for `quit`."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        return [f"error: {exc}"]
    if not words:
        return []
    command, args = words[0], words[1:]
    if command == "quit":
        return None
    action = COMMANDS.get(command)
    if action is None:
        return [f"error: no command {command!r}", HELP]
    try:
        if command in LOCKED_COMMANDS:
            with rig.lock:
                return action(rig, args)
        return action(rig, args)
    except (ConsoleError, KeyError) as exc:
        return [f"error: {exc.args[0] if exc.args else exc}"]


def has_console(stdin: Any) -> bool:
    """A person can type here: stdin is a terminal and this process owns it (not `emulate-bus &`, whose
    reads would stop the whole process with SIGTTIN, nor a script's closed or redirected input)."""
    try:
        return stdin.isatty() and os.tcgetpgrp(stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def calibration_line(calibration: Path) -> str:
    """Where LeRobot's tools find the calibration that matches these servos, from any folder."""
    return (f"Calibrated as {calibration.stem}: --robot.id={calibration.stem} "
            f"--robot.calibration_dir={calibration.parent}")


def serve_without_console(port: str, stop: threading.Event | None = None, calibration: Path | None = None) -> None:
    """Keep serving the bus with no console, until SIGINT/SIGTERM (or `stop`, for tests)."""
    print(f"Emulated STS3215 bus on {port}", flush=True)
    if calibration is not None:
        print(calibration_line(calibration), flush=True)
    print("No console (input is not a terminal): serving until interrupted (Ctrl-C or SIGTERM).", flush=True)
    stop = stop or threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def console(chain: ServoChain, lock: object, port: str, stdin: TextIO = sys.stdin, world: Any | None = None,
            frames: Any | None = None, calibration: Path | None = None, out: Any = None) -> None:
    """Act on the emulated arm while a client has the port open. Ends on `quit` or end of input.

    A hand's motion takes seconds: the command answers when it starts and a `done: ...` line follows when the
    hand has finished, printed by a thread of its own (the bus thread only queues it, it must never block)."""
    out = out or sys.stdout
    rig = Rig(chain, lock, port, world, frames)
    print(f"Emulated STS3215 bus on {port}", file=out, flush=True)
    if frames is not None:
        print(f"Simulated cameras on {frames.socket_path}", file=out, flush=True)
    if calibration is not None:
        print(calibration_line(calibration), file=out, flush=True)
    print(HELP, file=out, flush=True)
    finished: queue.SimpleQueue[Finished | None] = queue.SimpleQueue()

    def report() -> None:
        while (done := finished.get()) is not None:
            print(f"done: {done.job} ({done.seconds:.1f} s)", file=out, flush=True)

    reporter = threading.Thread(target=report, name="console-done-lines", daemon=True)
    reporter.start()
    chain.hand.on_done = finished.put
    try:
        for line in stdin:
            lines = run_command(rig, line)
            if lines is None:
                return
            for text in lines:
                print(text, file=out, flush=True)
    finally:
        chain.hand.on_done = None
        finished.put(None)
        reporter.join(timeout=1)
