"""`harness fix-ids` and `harness emulate-bus`: the Feetech bus tools."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError

DEFAULT_ROBOT_ID = "harness_follower"   # `harness run`'s default


def fix_ids(args: argparse.Namespace) -> int:
    import serial

    from harness.bus.fix_ids import TerminalOperator, fix_ids
    from harness.bus.ports import check_port, describe_ports, serial_ports

    if args.robot_id is not None and not args.ignore_calibration:   # a file named on purpose: checked first
        _calibration_path(args.robot_id, must_exist=True)
    port = check_port(args.port)   # missing or not here: one line naming the ports there are

    def open_serial(name: str) -> serial.SerialBase:
        try:
            return serial.serial_for_url(name, 1_000_000, timeout=0)   # a device, or a URL (emulated://, socket://)
        except (serial.SerialException, ValueError) as exc:
            detail = " ".join(str(exc).split())
            raise HarnessInputError(None, "--port", f"cannot open {name}: {detail}; "
                                                    f"{describe_ports(serial_ports())}") from None

    return fix_ids(port, TerminalOperator(assume_yes=args.yes), open_serial,
                   calibration=None if args.ignore_calibration else lambda say: _expected(args.robot_id, say))


def _expected(robot_id: str | None, say: Any) -> Any:
    """The arm's calibration as each joint's EEPROM signature, found as `harness run --robot-id` finds it.
    Called once fix-ids has spoken (finding it loads LeRobot). A file named on purpose must exist; the
    default one may not (movement alone then tells servos apart, as before)."""
    from harness.bus.signature import load_expected

    path = _calibration_path(robot_id, must_exist=robot_id is not None)
    if not path.is_file():
        say(f"No calibration file for --robot-id {DEFAULT_ROBOT_ID} ({path}): servos are told apart by movement "
            "only. Pass --robot-id to compare each servo's EEPROM with the arm's calibration.")
        return None
    expected = load_expected(path)
    say(f"Calibration {path}: each servo's EEPROM (limits, homing offset) is compared with it.")
    return expected


def _calibration_path(robot_id: str | None, must_exist: bool) -> Path:
    from harness.robots.so101 import calibration_location

    name, folder = calibration_location(robot_id or DEFAULT_ROBOT_ID, None)
    path = folder / f"{name}.json"
    if must_exist and not path.is_file():
        raise HarnessInputError(path, None, "no such calibration file (--robot-id)")
    return path


def emulate_bus(args: argparse.Namespace) -> int:
    from harness.emulator.pty_port import PtyBus
    from harness.emulator.scenario import (
        DEFAULT_ASSEMBLY,
        build_chain,
        console,
        default_scenario,
        factory_fresh_scenario,
        has_console,
        load_scenario,
        serve_without_console,
    )

    if args.scenario is not None and not args.scenario.strip():
        raise HarnessInputError(None, "--scenario", "an empty path: name a scenario YAML file, or leave the flag out")
    scenario = (load_scenario(args.scenario) if args.scenario else
                factory_fresh_scenario() if args.factory_fresh else default_scenario())
    chain = build_chain(scenario)
    calibration_path = Path(args.calibration).resolve() if args.calibration else DEFAULT_ASSEMBLY
    from harness.models.reality_gap import parse_gap

    gap = parse_gap(getattr(args, "gap", None))
    if not gap.none and not args.sim:
        raise HarnessInputError(None, "--gap", "a reality gap is for the simulated arm: add --sim")
    world = None   # the simulated world these servos drive (--sim only)
    if args.sim:
        import harness.sim  # noqa: F401  (headless GL before mujoco)
        from harness.emulator.sim_coupling import JointCalibration, SimCoupledChain
        from harness.sim.world import SimWorld

        try:
            raw = json.loads(calibration_path.read_text())
            joints = {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in raw.items()}
        except (OSError, ValueError, KeyError) as exc:
            raise HarnessInputError(calibration_path, None, f"not a LeRobot calibration file ({exc})") from None
        from harness.sim.scene import gapped_geometry

        world = SimWorld(gapped_geometry(gap))
        chain = SimCoupledChain(chain.servos, world, joints, chain.faults,
                                gain=gap.servo_gain, backlash_deg=gap.servo_backlash_deg)
    with PtyBus(chain, wire_timing=scenario.wire_timing) as bus:
        frames = None
        if world is not None and not args.no_cameras:   # the simulated cameras render the world these servos drive
            from harness.sim.frame_server import FrameServer

            frames = FrameServer(world, bus.lock, args.camera_socket)
        # What is built now (imports, servos, world) lives as long as the emulator: out of the collector's reach,
        # a full collection no longer walks it holding the interpreter lock (30-80 ms, past the reply window).
        gc.freeze()
        try:
            # The calibration LeRobot's tools should use with these servos, as an absolute folder (any cwd):
            # the packaged one matches the default servos, and with --sim the file that maps them onto the arm.
            calibration = (calibration_path if args.sim else
                           None if args.scenario or args.factory_fresh else DEFAULT_ASSEMBLY)
            if has_console(sys.stdin):
                console(bus.chain, bus.lock, bus.port, world=world, frames=frames, calibration=calibration)
            else:
                if frames is not None:
                    print(f"Simulated cameras on {frames.socket_path}", flush=True)
                serve_without_console(bus.port, calibration=calibration)
        finally:
            if frames is not None:
                frames.close()
    return 0


def register(sub: Any) -> None:
    fix = sub.add_parser("fix-ids", help="diagnose and repair SO-101 servo IDs (e.g. two servos at ID 5)")
    fix.add_argument("--port", help="serial port: COM4, /dev/ttyACM0, /dev/tty.usbmodem... (without it: the "
                                    "serial ports this machine has, by name)")
    fix.add_argument("--yes", action="store_true", help="do not ask before programming (physical steps still wait)")
    fix.add_argument("--robot-id", help="the arm's calibration, as for `harness run`: calibration/<id>.json, else "
                                        "LeRobot's calibration folder, or a path to a .json file (default "
                                        f"{DEFAULT_ROBOT_ID}); each servo's EEPROM is compared with it")
    fix.add_argument("--ignore-calibration", action="store_true",
                     help="tell servos apart by movement only (a servo just replaced, not yet calibrated)")
    fix.set_defaults(func=fix_ids)

    emu = sub.add_parser("emulate-bus", help="serve emulated STS3215 servos on a pseudo-terminal (prints its path)")
    emu.add_argument("--scenario", help="YAML: servos (name, id, baud, firmware), fault rates, wire timing")
    emu.add_argument("--factory-fresh", action="store_true",
                     help="six servos straight from the bag: all ID 1, uncalibrated (for lerobot-setup-motors)")
    emu.add_argument("--sim", action="store_true",
                     help="couple the servos to the simulated arm: a LeRobot so101_follower on this port moves it")
    emu.add_argument("--calibration",
                     help="with --sim: the follower calibration LeRobot will use (maps ticks to joint angles; "
                          "default: the packaged calibration/emulated_follower.json, from any folder)")
    emu.add_argument("--camera-socket",
                     help="with --sim: where the simulated cameras (LeRobot camera type harness_sim) are served "
                          "(default: cameras.sock in a harness-emulator-* folder of its own in the temp folder, "
                          "printed at start; LeRobot's tools find it when it is the only emulator running)")
    emu.add_argument("--no-cameras", action="store_true", help="with --sim: do not render or serve camera frames")
    emu.add_argument("--gap", action="append", metavar="NAME=VALUE",
                     help="with --sim: a declared reality gap, repeatable (cube_friction, cube_mass_g, servo_gain, "
                          "servo_backlash_deg, camera_tilt_deg, exposure, table_height_mm; docs/twin.md). "
                          "`harness rehearse --gap` also records it in the scoresheet")
    emu.set_defaults(func=emulate_bus)
