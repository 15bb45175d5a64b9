"""fix-ids never renames the wrong servo, survives lost replies, reads a noisy line right and catches
mixed firmware before LeRobot does: each test is one finding of issue 14, on the project's emulator."""

from __future__ import annotations

import os
import select
import threading

import pytest
from lerobot.motors.feetech import FeetechMotorsBus

from harness.bus import packets as p
from harness.bus.diagnosis import FindingKind, diagnose
from harness.bus.fix_ids import TerminalOperator, fix_ids
from harness.bus.scan import Certainty, quick_scan
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES, Scenario, build_chain
from harness.emulator.servos import Faults, Firmware, ServoChain
from tests.bus_people import ScriptedOperator, arm, open_port, turn
from tests.realtime.test_bus import _motors

# Wire-timed pings whose agreement decides a diagnosis: even a nice-19 neighbour has made a clean line look noisy
# here (a CI run of session 45), so these run after the rest, two at a time and nothing else (scripts/test).
pytestmark = pytest.mark.quiet

ALL = SO101_NAMES


# --- finding 1: the wrong servo connected at "Connect ONLY the gripper" -------------------------------

@pytest.mark.slow
def test_a_servo_with_a_known_other_id_is_refused_and_left_untouched() -> None:
    """The elbow (ID 3, heard clearly in the diagnosis) connected instead of the gripper is never renamed."""
    chain = arm(ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [
            lambda: chain.only("elbow_flex"),                        # the wrong servo
            lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),   # then the right one
            lambda: chain.plug(*ALL), chain.power_cycle,
            lambda: turn(chain, "gripper")])   # the final check: the repaired joint turned on the whole arm
        assert fix_ids(bus.port, operator, open_port) == 0
    said = operator.transcript
    assert "Found ID 3 at 1000000 baud, model 777 (STS3215), firmware 3.10" in said
    assert "Refusing to program it: this is the elbow_flex servo, not the gripper. Nothing was written." in said
    assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]
    assert chain.servo("elbow_flex").eeprom_writes == 0


@pytest.mark.slow
def test_the_other_servo_of_a_collision_is_refused_when_it_does_not_follow_the_joint() -> None:
    """wrist_roll and gripper both answer as ID 5: by ID alone either could be the gripper. The one on the
    bus must move when the person turns the gripper, or it is not programmed (no wrist/gripper swap)."""
    chain = arm(ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [
            lambda: chain.only("wrist_roll"), lambda: turn(chain, "gripper"),   # wrong servo; gripper turned
            lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),
            lambda: chain.plug(*ALL), chain.power_cycle,
            lambda: turn(chain, "gripper")])   # the final check: the repaired joint turned on the whole arm
        assert fix_ids(bus.port, operator, open_port) == 0
    said = operator.transcript
    assert "two servos collided at ID 5: this is the wrist_roll or gripper" in said
    assert "did not move when you turned the gripper" in said
    assert chain.servo("wrist_roll").current_id == 5 and chain.servo("gripper").current_id == 6


@pytest.mark.slow
def test_two_servos_on_the_bus_when_one_was_asked_for_are_refused() -> None:
    chain = arm(ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [lambda: chain.only("wrist_roll", "gripper")] * 3)
        assert fix_ids(bus.port, operator, open_port) == 1
    assert "More than one servo answers at 1000000 baud" in operator.transcript
    assert all(s.eeprom_writes == 0 for s in chain.servos)


# --- finding 2: a lost reply between the ID write and the re-lock --------------------------------------

class CutAfterIdWrite(ServoChain):
    """The servo's power (or cable) goes the instant its ID has been written, before the re-lock."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cut = False

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        reply = super().handle(packet, baud)
        is_id_write = packet.code == p.WRITE and packet.params[:1] == bytes([p.ADDR_ID])
        if is_id_write and packet.servo_id != p.BROADCAST_ID and not self.cut:
            self.cut = True
            self.connected.clear()
            return b""
        return reply


@pytest.mark.slow   # wire-timed: seconds of emulated bus traffic; the inner loop keeps one repair test
@pytest.mark.parametrize("firmware", list(Firmware))
def test_a_power_cut_between_id_write_and_relock_ends_in_advice_and_a_finished_repair(firmware) -> None:
    chain = arm(CutAfterIdWrite, ids={"gripper": 5})
    for servo in chain.servos:
        servo.firmware = firmware
    with PtyBus(chain) as bus:
        def power_back() -> None:
            chain.power_cycle()
            chain.only("gripper")

        operator = ScriptedOperator(bus, [
            lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),      # cut during this attempt
            power_back, lambda: turn(chain, "gripper"),                        # the retry
            lambda: chain.plug(*ALL), chain.power_cycle,
            lambda: turn(chain, "gripper")])   # the final check: the repaired joint turned on the whole arm
        assert fix_ids(bus.port, operator, open_port) == 0
    said = operator.transcript
    assert "Bus error while programming the gripper (ConnectionError" in said
    assert "No servo answers at any baud rate. Check that the gripper's cable is seated" in said
    assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]
    assert all(s.locked for s in chain.servos)


class RelockLostOnTheLine(ServoChain):
    """After the ID write, the next four re-lock packets (three tries, then the one on disconnect) never
    reach the servo (a noisy line)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.armed, self.lost = False, 0

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        is_relock = packet.code == p.WRITE and packet.params[:2] == bytes([p.ADDR_LOCK, 1])
        if self.armed and is_relock and self.lost < 4:
            self.lost += 1
            return b""
        if packet.code == p.WRITE and packet.params[:1] == bytes([p.ADDR_ID]):
            self.armed = True
        return super().handle(packet, baud)


@pytest.mark.slow
def test_lost_relock_replies_leave_the_servo_described_and_the_next_attempt_relocks_it() -> None:
    chain = arm(RelockLostOnTheLine, ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [
            lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),
            lambda: None, lambda: turn(chain, "gripper"),
            lambda: chain.plug(*ALL), chain.power_cycle,
            lambda: turn(chain, "gripper")])   # the final check: the repaired joint turned on the whole arm
        assert fix_ids(bus.port, operator, open_port) == 0
    said = operator.transcript
    assert "One servo on the bus: ID 6 at 1000000 baud" in said and "Lock 0 (EEPROM unlocked)" in said
    assert "The new ID took but the re-lock did not" in said
    assert chain.servo("gripper").locked and chain.servo("gripper").current_id == 6


# --- finding 3: a noisy line ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_a_healthy_arm_on_a_noisy_line_is_called_healthy_and_the_noise_is_reported(seed) -> None:
    chain = arm(faults=Faults(drop_rate=0.05, corrupt_rate=0.05, seed=seed))
    with PtyBus(chain) as bus, open_port(bus.port) as ser:
        scan = quick_scan(Wire(ser))
    assert diagnose(scan) == []
    assert scan.lost_or_garbled > 0 and scan.certainty is not Certainty.UNSURE


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_a_collision_on_a_noisy_line_is_named_as_on_a_clean_one(seed) -> None:
    chain = arm(ids={"gripper": 5}, faults=Faults(drop_rate=0.05, corrupt_rate=0.05, seed=seed))
    with PtyBus(chain) as bus, open_port(bus.port) as ser:
        findings = diagnose(quick_scan(Wire(ser)))
    assert {(f.kind, f.servo_id) for f in findings} == {(FindingKind.COLLISION, 5), (FindingKind.MISSING, 6)}


def test_a_clean_line_is_reported_sure() -> None:
    with PtyBus(arm()) as bus:
        operator = ScriptedOperator(bus, [])
        assert fix_ids(bus.port, operator, open_port) == 0
    assert "How sure: sure - every ID gave the same answer on each of its 3 pings." in operator.transcript


# --- finding 4: mixed firmware versions ------------------------------------------------------------------

def test_mixed_firmware_is_diagnosed_before_lerobot_refuses_and_never_called_fixed() -> None:
    scenario = Scenario.model_validate({"servos": [
        {"name": name, "id": i + 1, **({"firmware_version": "3.9"} if name == "gripper" else {})}
        for i, name in enumerate(ALL)]})
    chain = build_chain(scenario)
    gripper = chain.servo("gripper")
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [])
        assert fix_ids(bus.port, operator, open_port) == 1
        with pytest.raises(RuntimeError, match="different firmware versions"):
            FeetechMotorsBus(bus.port, _motors()).connect()   # what the diagnosis warned about
    said = operator.transcript
    assert "ID 6 (gripper) runs firmware 3.9, the others 3.10" in said
    assert "update it to 3.10 with Feetech's FD software" in said
    assert "Fixed" not in said and gripper.eeprom_writes == 0


# --- finding 6: prompts never answered by keys typed while the tool was busy -------------------------

def test_enter_pressed_while_busy_does_not_answer_the_next_prompt() -> None:
    master, slave = os.openpty()
    with os.fdopen(slave, "r", closefd=True) as stdin, open(os.devnull, "w") as stdout:
        os.write(master, b"y\n\n")        # typed while LeRobot was loading
        assert select.select([stdin], [], [], 5.0)[0], "the typed keys never reached the terminal"
        later = threading.Timer(0.3, lambda: os.write(master, b"n\n"))
        later.start()
        answer = TerminalOperator(stdin=stdin, stdout=stdout).confirm("Repair it now?")
        later.join()
    os.close(master)
    assert answer is False


@pytest.mark.slow   # wire-timed: seconds of emulated bus traffic; the inner loop keeps one repair test
@pytest.mark.parametrize("seed", range(2))
def test_the_whole_repair_succeeds_on_a_noisy_line(seed) -> None:
    chain = arm(ids={"gripper": 5}, faults=Faults(drop_rate=0.05, corrupt_rate=0.05, seed=seed))
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),
                                          lambda: chain.plug(*ALL), chain.power_cycle,   # first time right
                                          lambda: turn(chain, "gripper")])
        assert fix_ids(bus.port, operator, open_port) == 0, operator.transcript
    assert [s.current_id for s in chain.servos] == [1, 2, 3, 4, 5, 6]


class HalfGarbledAtId2(ServoChain):
    """Every other reply from ID 2 arrives corrupted: the pings can never agree on what ID 2 is."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flip = False

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        reply = super().handle(packet, baud)
        if packet.servo_id == 2 and packet.code == p.PING and reply:
            self.flip = not self.flip
            if self.flip:
                return reply[:3] + bytes([reply[3] ^ 0x5A]) + reply[4:]
        return reply


def test_an_unsure_diagnosis_is_never_acted_on() -> None:
    chain = arm(HalfGarbledAtId2, ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [])
        assert fix_ids(bus.port, operator, open_port) == 1
    assert "How sure: unsure" in operator.transcript
    assert "Not repairing on a diagnosis this unsure" in operator.transcript
    assert operator.instructions == [] and all(s.eeprom_writes == 0 for s in chain.servos)


# --- issue 40: no calibration file, the wrong servo connected and its own joint turned -----------------

@pytest.mark.slow
def test_without_calibration_wrist_roll_turned_at_the_gripper_prompt_is_refused_by_the_other_joints_check() -> None:
    """Only wrist_roll connected at the gripper prompt, and the person turns the joint in hand (wrist_roll): it
    follows, so movement alone would call it the gripper; turning the wrist_roll then moves it too, so it is
    refused and never written. The gripper, connected next, stays still when the wrist_roll is turned."""
    from tests.bus_people import Person

    chain = arm(ids={"gripper": 5})
    with PtyBus(chain) as bus:
        person = Person(bus, chain, ["wrist_roll", "gripper"])
        assert fix_ids(bus.port, person, open_port) == 0
    said = person.transcript
    assert "it moved when you turned the wrist_roll: this is the wrist_roll servo, not the gripper" in said
    assert "Programmed the gripper servo as ID 6" in said and said.index("Refusing") < said.index("Programmed")
    assert chain.servo("wrist_roll").current_id == 5 and chain.servo("gripper").current_id == 6
    assert chain.servo("wrist_roll").eeprom_writes == 0


@pytest.mark.slow
def test_without_calibration_a_calibrated_servo_is_never_written() -> None:
    """A servo whose EEPROM holds a joint's calibration (not the factory's) cannot be told apart from another
    joint's by movement without the arm's calibration file: refused, with what to do."""
    chain = arm(ids={"gripper": 5})
    gripper = chain.servo("gripper")
    gripper.eeprom[9:11], gripper.eeprom[11:13] = (1900).to_bytes(2, "little"), (3400).to_bytes(2, "little")
    gripper.power_cycle()
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [lambda: chain.only("gripper")] * 3)
        assert fix_ids(bus.port, operator, open_port) == 1
    said = operator.transcript
    assert "its EEPROM holds a joint's calibration (limits 1900-3400, homing offset 0)" in said
    assert "--robot-id" in said and all(s.eeprom_writes == 0 for s in chain.servos)


@pytest.mark.slow
def test_a_failed_final_proof_puts_the_old_id_back() -> None:
    chain = arm(ids={"gripper": 5})
    with PtyBus(chain) as bus:
        operator = ScriptedOperator(bus, [
            lambda: chain.only("gripper"), lambda: turn(chain, "gripper"),
            lambda: chain.plug(*ALL), chain.power_cycle,
            lambda: None,   # the final check: nothing turned, so ID 6 is not proven
            lambda: chain.only("gripper"), lambda: chain.plug(*ALL)])   # alone to put its ID back, then back in
        assert fix_ids(bus.port, operator, open_port) == 1
    said = operator.transcript
    assert "Not proven: ID 6 did not move" in said
    assert "is ID 5 again, as before this session" in said
    assert chain.servo("gripper").current_id == 5 and chain.servo("gripper").eeprom[p.ADDR_ID] == 5
