"""fix-ids knows each servo by its EEPROM (issue 26): a servo holding another joint's calibration is never
programmed, even when it follows the joint the person turns, and the final check proves the repaired ID by
the servo's EEPROM as well as by movement. On the default emulated arm and on a desk arm with other limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bus.diagnosis import FindingKind, diagnose
from harness.bus.fix_ids import fix_ids
from harness.bus.scan import quick_scan
from harness.bus.signature import load_expected
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import Scenario, build_chain, default_scenario, load_scenario
from harness.errors import HarnessInputError
from tests.bus_people import Person, open_port
from tests.helpers import REPO

# Wire-timed pings whose agreement decides a diagnosis: even a nice-19 neighbour has made a clean line look noisy
# here (a CI run of session 45), so these run after the rest, two at a time and nothing else (scripts/test).
pytestmark = pytest.mark.quiet

DATA = REPO / "tests" / "data"


def emulated_arm() -> Scenario:
    """The default emulated arm (calibration/emulated_follower.json) with the gripper answering as ID 5."""
    scenario = default_scenario()
    next(s for s in scenario.servos if s.name == "gripper").id = 5
    return scenario


ARMS = {   # scenario, the arm's calibration file, the gripper's and wrist_roll's EEPROM as the file says
    "emulated": (emulated_arm, REPO / "calibration" / "emulated_follower.json",
                 "limits 1900-3400, homing offset 0", "limits 0-4095, homing offset 0"),
    "desk": (lambda: load_scenario(DATA / "desk_arm_scenario.yaml"), DATA / "desk_arm_calibration.json",
             "limits 2030-3480, homing offset 1140", "limits 0-4095, homing offset 1340"),
    # the project's own scenario file, with the robot id docs/emulator.md gives (`--robot-id emulated_follower`)
    "shipped scenario": (lambda: load_scenario(REPO / "scripts" / "scenarios" / "id5_collision.yaml"),
                         REPO / "calibration" / "emulated_follower.json",
                         "limits 1900-3400, homing offset 0", "limits 0-4095, homing offset 0"),
}


@pytest.mark.slow
@pytest.mark.parametrize("arm", ARMS)
def test_wrist_roll_connected_and_turned_at_the_gripper_prompt_is_refused_by_its_eeprom(arm) -> None:
    """The issue's case: asked for the gripper, the person connects wrist_roll and turns the joint they hold.
    Its EEPROM holds wrist_roll's calibration, so it is refused before anything is written, every time."""
    scenario, calibration, gripper, wrist_roll = ARMS[arm]
    chain = build_chain(scenario())
    with PtyBus(chain) as bus:
        person = Person(bus, chain, ["wrist_roll"])
        assert fix_ids(bus.port, person, open_port, load_expected(calibration)) == 1
    refusals = [line for line in person.said if line.startswith("Refusing to program it")]
    assert len(refusals) == 3 and "\n" not in refusals[0]
    assert refusals[0].startswith(f"Refusing to program it: it looks like the wrist_roll: its EEPROM holds "
                                  f"{wrist_roll}, the wrist_roll's calibration in {calibration}, not the "
                                  f"gripper's ({gripper}). Nothing was written. Unplug it and connect only the "
                                  "gripper servo")
    assert "Fixed" not in person.transcript
    assert chain.servo("wrist_roll").current_id == 5 and chain.servo("gripper").current_id == 5
    assert all(s.eeprom_writes == 0 for s in chain.servos)


@pytest.mark.slow   # a whole repair with its power-cycle proof: seconds of emulated bus traffic
@pytest.mark.parametrize("arm", ARMS)
def test_a_repair_after_the_wrong_servo_is_proven_by_signature_and_by_movement(arm) -> None:
    scenario, calibration, gripper, _ = ARMS[arm]
    chain = build_chain(scenario())
    with PtyBus(chain) as bus:
        person = Person(bus, chain, ["wrist_roll", "gripper"])      # wrong first, then the right one
        assert fix_ids(bus.port, person, open_port, load_expected(calibration)) == 0, person.transcript
    said = person.transcript
    assert said.count("Refusing to program it: it looks like the wrist_roll") == 1
    assert (f"Proven: ID 6 followed the gripper jaw. Signature match: its EEPROM holds {gripper}, as the "
            f"gripper's calibration in {calibration} says.") in said
    assert "Fixed: all six IDs answer after a power cycle, EEPROM locked; the gripper proven at ID 6 by its " \
           "EEPROM and by movement." in said
    assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]
    assert chain.servo("wrist_roll").eeprom_writes == 0


def test_swapped_servos_are_named_by_their_eeprom_and_never_called_healthy() -> None:
    """wrist_roll at ID 6 and the gripper at ID 5 answer cleanly: by ID the arm is healthy; by EEPROM it is not."""
    scenario = default_scenario()
    for spec in scenario.servos:
        spec.id = {"wrist_roll": 6, "gripper": 5}.get(spec.name, spec.id)
    chain = build_chain(scenario)
    expected = load_expected(REPO / "calibration" / "emulated_follower.json")
    with PtyBus(chain) as bus, open_port(bus.port) as ser:
        scan = quick_scan(Wire(ser))
    assert diagnose(scan) == []
    findings = diagnose(scan, expected)
    assert {(f.kind, f.servo_id) for f in findings} == {(FindingKind.WRONG_JOINT, 5), (FindingKind.WRONG_JOINT, 6)}
    assert "ID 6 (gripper): it looks like the wrist_roll" in next(f.message for f in findings if f.servo_id == 6)


def test_a_calibration_file_with_a_bad_field_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "arm.json"
    bad.write_text('{"gripper": {"homing_offset": 0, "range_min": "low", "range_max": 3400}}')
    with pytest.raises(HarnessInputError) as err:
        load_expected(bad)
    assert err.value.one_line().startswith(f"{bad}: gripper.range_min: ")


@pytest.mark.slow   # a process of its own that loads LeRobot
def test_fix_ids_with_a_missing_calibration_file_exits_2_before_touching_the_port(tmp_path: Path,
                                                                                  harness_cli) -> None:
    missing = tmp_path / "nowhere.json"
    done = harness_cli.run(["fix-ids", "--port", str(tmp_path / "no-port"), "--robot-id", str(missing)],
                           capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"harness: error: {missing}: no such calibration file (--robot-id)"]
