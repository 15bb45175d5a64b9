"""`harness fix-ids` and `harness emulate-bus`: the Feetech bus tools."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def fix_ids(args: argparse.Namespace) -> int:
    import serial

    from harness.bus.fix_ids import TerminalOperator, fix_ids

    def open_serial(port: str) -> serial.Serial:
        try:
            return serial.Serial(port, 1_000_000, timeout=0)
        except (serial.SerialException, ValueError) as exc:
            raise HarnessInputError(None, "--port", f"cannot open {port}: {exc}") from None

    return fix_ids(args.port, TerminalOperator(assume_yes=args.yes), open_serial)


def emulate_bus(args: argparse.Namespace) -> int:
    from harness.bus.pty_port import PtyBus
    from harness.bus.scenario import build_chain, console, default_scenario, load_scenario

    scenario = load_scenario(args.scenario) if args.scenario else default_scenario()
    chain = build_chain(scenario)
    if args.sim:
        import harness.sim  # noqa: F401  (headless GL before mujoco)
        from harness.bus.sim_coupling import JointCalibration, SimCoupledChain
        from harness.sim.world import SimWorld

        try:
            raw = json.loads(Path(args.calibration).read_text())
            calibration = {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in raw.items()}
        except (OSError, ValueError, KeyError) as exc:
            raise HarnessInputError(args.calibration, None, f"not a LeRobot calibration file ({exc})") from None
        chain = SimCoupledChain(chain.servos, SimWorld(), calibration, chain.faults)
    with PtyBus(chain, wire_timing=scenario.wire_timing) as bus:
        console(bus.chain, bus.lock, bus.port)
    return 0


def register(sub: Any) -> None:
    fix = sub.add_parser("fix-ids", help="diagnose and repair SO-101 servo IDs (e.g. two servos at ID 5)")
    fix.add_argument("--port", required=True, help="serial port: /dev/ttyACM0, /dev/tty.usbmodem..., COM4")
    fix.add_argument("--yes", action="store_true", help="do not ask before programming (physical steps still wait)")
    fix.set_defaults(func=fix_ids)

    emu = sub.add_parser("emulate-bus", help="serve emulated STS3215 servos on a pseudo-terminal (prints its path)")
    emu.add_argument("--scenario", help="YAML: servos (name, id, baud, firmware), fault rates, wire timing")
    emu.add_argument("--sim", action="store_true",
                     help="couple the servos to the simulated arm: a LeRobot so101_follower on this port moves it")
    emu.add_argument("--calibration", default="calibration/emulated_follower.json",
                     help="with --sim: the follower calibration LeRobot will use (maps ticks to joint angles)")
    emu.set_defaults(func=emulate_bus)
