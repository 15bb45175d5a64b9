"""An EEPROM left unlocked is said at connect (issue 26): `lerobot-setup-motors` leaves every servo it sets up
with Lock=0, and an ID written then may revert at the next power cycle. The re-locking bus reads each servo's
Lock before connect's own writes re-lock it; `harness run --robot so101` and the TUI's check screen show one
line naming `harness fix-ids` as the repair."""

from __future__ import annotations

import pytest
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus
from rich.console import Console

from harness.app.parts import make_real_robot
from harness.bus.relocking_bus import RelockingFeetechBus
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES, build_chain, default_scenario, factory_fresh_scenario
from harness.models.protocol import load_protocol
from harness.models.run_settings import RunSettings
from harness.tui.screens import CheckReport, CheckScreen
from tests.helpers import REPO
from tests.tui_snapshot_apps import LOCKED

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores

MOTORS = {name: Motor(i + 1, "sts3215", MotorNormMode.DEGREES) for i, name in enumerate(SO101_NAMES)}


def setup_motors_as_lerobot_does(chain, port: str) -> None:
    """What `lerobot-setup-motors` does (LeRobot's own `setup_motor`), each servo alone, gripper first."""
    bus = FeetechMotorsBus(port, dict(MOTORS))
    for name in reversed(SO101_NAMES):
        chain.only(name)
        bus.setup_motor(name)
    bus.disconnect(disable_torque=False)
    chain.plug(*SO101_NAMES)


@pytest.mark.slow
def test_after_lerobot_setup_motors_every_servo_is_unlocked_and_the_bus_says_so_at_connect() -> None:
    chain = build_chain(factory_fresh_scenario())
    with PtyBus(chain) as bus:
        setup_motors_as_lerobot_does(chain, bus.port)
        assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]
        assert not any(s.locked for s in chain.servos)          # the emulator keeps what LeRobot left
        relocking = RelockingFeetechBus(bus.port, dict(MOTORS))
        relocking.connect()
        relocking.disconnect()
        locks = relocking.locks_at_connect
        assert locks is not None and locks.unlocked == tuple(SO101_NAMES) and not locks.ok
        assert all(s.locked for s in chain.servos)              # ... and leaves them locked itself
        chain.power_cycle()
        relocking.connect()
        relocking.disconnect()
    assert relocking.locks_at_connect.ok and relocking.locks_at_connect.warning() == ""


def test_harness_run_robot_so101_warns_in_one_line_naming_fix_ids_when_an_eeprom_is_unlocked() -> None:
    """The connect path `harness run --robot so101` uses (make_real_robot), on the calibrated emulated arm whose
    gripper was just set up again with lerobot-setup-motors; then the same arm after a power cycle."""
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml")
    chain = build_chain(default_scenario())
    with PtyBus(chain) as bus:
        bus_lerobot = FeetechMotorsBus(bus.port, {"gripper": MOTORS["gripper"]})
        chain.only("gripper")
        bus_lerobot.setup_motor("gripper")
        bus_lerobot.disconnect(disable_torque=False)
        chain.plug(*SO101_NAMES)
        settings = RunSettings(port=bus.port, robot_id="emulated_follower")
        robot = make_real_robot(settings, protocol)
        robot.disconnect()
        warnings = robot.connect_warnings
        chain.power_cycle()
        after_power_cycle = make_real_robot(settings, protocol)
        after_power_cycle.disconnect()
    assert warnings == (f"EEPROM unlocked (Lock=0) on gripper, as lerobot-setup-motors leaves it: an ID written since "
                        f"the last power cycle may revert at the next; run `harness fix-ids --port {bus.port}` to "
                        "check and re-lock",)
    assert after_power_cycle.connect_warnings == ()


def test_the_check_screen_shows_the_warning_beside_the_robot() -> None:
    line = "EEPROM unlocked (Lock=0) on gripper ...; run `harness fix-ids --port /dev/ttyACM0` to check and re-lock"
    report = CheckReport(robot="so101 (SO-101 follower)", cameras=[("top", 30.0)], policy="act", policy_warmup_ms=None,
                         locked=LOCKED, scored=0, voids=0, scoresheet="sheet.yaml", warnings=(line,))
    console = Console(record=True, width=240)
    console.print(CheckScreen(report)._render_report())
    text = console.export_text()
    assert f"WARNING {line}" in text
    assert text.index("Robot") < text.index("WARNING") < text.index("Camera top")
