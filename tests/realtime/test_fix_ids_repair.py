"""`harness fix-ids` end to end on a clean emulated line: the ID-5 collision repaired and proven after a power
cycle on each firmware the STS3215 is known to ship with, and a healthy arm, a servo at the wrong baud rate
and an unlocked EEPROM told apart. Wire-timed, so these run in the serial pass (tests/conftest.py): on a clean
line the repair must go right the first time, and a core held by other tests' work can make a clean
line look noisy."""

from __future__ import annotations

import pytest
from lerobot.motors.feetech import FeetechMotorsBus

from harness.bus import packets as p
from harness.bus.diagnosis import diagnose
from harness.bus.fix_ids import fix_ids
from harness.bus.scan import quick_scan
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES
from harness.emulator.servos import Firmware
from tests.bus_people import ScriptedOperator, arm, open_port, turn
from tests.realtime.test_bus import _motors

# Wire-timed pings whose agreement decides a diagnosis: even a nice-19 neighbour has made a clean line look noisy
# here (a CI run of session 45), so these run after the rest, two at a time and nothing else (scripts/test).
pytestmark = pytest.mark.quiet


@pytest.mark.slow   # wire-timed: seconds of emulated bus traffic; the inner loop keeps one repair test
@pytest.mark.parametrize("firmware", list(Firmware))
def test_fix_ids_repairs_the_id5_collision_and_it_survives_a_power_cycle(firmware) -> None:
    chain = arm(ids={"gripper": 5}, firmware=firmware)
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),
                                          lambda: chain.plug(*SO101_NAMES), chain.power_cycle,
                                          lambda: turn(chain, "gripper")])   # the final check
        assert fix_ids(bus.port, operator, open_port) == 0, operator.transcript
        # [1] identify it, [2] check it (the other joint it could be turned), [3] reconnect
        assert "gripper" in operator.instructions[0] and "power-cycle" in operator.instructions[4]
        assert any("Two servos answer as ID 5" in m and "gripper" in m for m in operator.said)
        FeetechMotorsBus(bus.port, _motors()).connect()  # LeRobot's own handshake now passes
    assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_fix_ids_reports_a_healthy_arm_and_finds_wrong_baud_and_unlocked_servos() -> None:
    chain = arm()
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [])
        assert fix_ids(bus.port, operator, open_port) == 0, operator.transcript
        assert "Nothing to fix" in operator.said[-1]
        chain.servo("elbow_flex").eeprom[p.ADDR_BAUD] = p.INDEX_BY_BAUD[57_600]
        chain.power_cycle()
        chain.servo("wrist_flex").ram[p.ADDR_LOCK] = 0
        with open_port(bus.port) as ser:
            kinds = {(f.kind, f.servo_id) for f in diagnose(quick_scan(Wire(ser)))}
        assert kinds == {("wrong_baud", 3), ("unlocked", 4)}
        operator = ScriptedOperator(bus, [chain.power_cycle])
        assert fix_ids(bus.port, operator, open_port) == 0, operator.transcript
    assert chain.servo("elbow_flex").baud == 1_000_000 and chain.servo("wrist_flex").locked
