"""The STS3215 emulator on the wire, LeRobot's own bus code over it, the re-locking bus and fix-ids."""

from __future__ import annotations

import time

import numpy as np
import pytest
import serial
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from harness.bus import packets as p
from harness.bus.relocking_bus import RelockingFeetechBus
from harness.bus.scan import quick_scan
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import SO101_NAMES
from harness.emulator.servos import Faults, Firmware, Servo, ServoChain
from harness.errors import BusSafetyError
from tests.helpers import wait_until

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores

GOLDEN = [  # request -> reply, from Feetech's protocol manual and the SDK
    ("FF FF 01 02 01 FB", "FF FF 01 02 00 FC"),                      # PING id 1
    ("FF FF 01 04 02 38 02 BE", "FF FF 01 04 00 00 08 F2"),          # READ Present_Position = 2048
    ("FF FF 01 04 02 03 02 F3", "FF FF 01 04 00 09 03 EE"),          # READ Model_Number = 777
    ("FF FF 01 04 03 37 00 C0", "FF FF 01 02 00 FC"),                # WRITE Lock = 0
    ("FF FF 01 04 03 05 06 EC", "FF FF 01 02 00 FC"),                # WRITE ID = 6, acked from the old ID
    ("FF FF 06 04 03 37 01 BA", "FF FF 06 02 00 F7"),                # WRITE Lock = 1 at the new ID
    ("FF FF FE 04 03 05 01 F4", ""),                                 # broadcast WRITE: no reply
]


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def _arm(firmware: Firmware = Firmware.DOCUMENTED, gripper_id: int = 6) -> ServoChain:
    servos = [Servo(name, i + 1, firmware=firmware) for i, name in enumerate(SO101_NAMES)]
    if gripper_id != 6:
        servos[5].eeprom[p.ADDR_ID] = gripper_id
        servos[5].power_cycle()
    return ServoChain(servos)


def _motors() -> dict[str, Motor]:
    return {name: Motor(i + 1, "sts3215", MotorNormMode.DEGREES) for i, name in enumerate(SO101_NAMES)}


def _serial(port: str) -> serial.Serial:
    return serial.Serial(port, 1_000_000, timeout=0)


BROADCAST_PING = "FF FF FE 02 01 FE"
PING_REPLIES = {"FF FF 01 02 00 FC", "FF FF 06 02 00 F7"}   # from ID 1 or, once renamed, ID 6


def _raw_exchange(ser: serial.Serial, request: str, expected: int) -> bytes:
    """The bytes on the wire after `request`, as they came (nothing parsed or re-encoded), read until
    `expected` bytes are in."""
    ser.write(_hex(request))
    ser.flush()
    got = bytearray()
    wait_until(lambda: got.extend(ser.read(64)) or len(got) >= expected, 1.0,
               f"{expected} bytes after {request} (got {bytes(got).hex(' ').upper()})")
    return bytes(got)


def test_golden_vectors_byte_for_byte() -> None:
    """Each request's reply as wire bytes against the manual's; a broadcast ping after each one must
    answer next, so a reply with bytes to spare (or one to a broadcast write) shows up as well."""
    chain = ServoChain([Servo("gripper", 1)])
    with PtyBus(chain) as bus, _serial(bus.port) as ser:
        for request, reply in GOLDEN:
            got = _raw_exchange(ser, request, len(_hex(reply)))
            assert got[:len(_hex(reply))] == _hex(reply), (request, got.hex(" ").upper())
            after = got[len(_hex(reply)):] + _raw_exchange(ser, BROADCAST_PING, 6 - (len(got) - len(_hex(reply))))
            assert after.hex(" ").upper() in PING_REPLIES, (request, after.hex(" ").upper())


class _LatePort:
    """A port whose reader is woken `delay_s` after it asked (a busy machine's scheduler), the servo's reply
    having arrived meanwhile: each look at the port costs the reader's clock that much."""

    def __init__(self, reply: bytes, clock: list[float], delay_s: float) -> None:
        self.baudrate, self._reply, self._clock, self._delay_s, self._looks = 1_000_000, reply, clock, delay_s, 0

    def reset_input_buffer(self) -> None: ...
    def write(self, data: bytes) -> None: ...
    def flush(self) -> None: ...

    @property
    def in_waiting(self) -> int:
        self._looks += 1
        if self._looks == 1:   # the first look finds nothing; the thread then waits for a core past the window
            self._clock[0] += self._delay_s
            return 0
        return len(self._reply)

    def read(self, count: int) -> bytes:
        reply, self._reply = self._reply[:count], self._reply[count:]
        return reply


def test_a_reply_that_waited_while_the_reader_had_no_core_is_read_not_called_silence() -> None:
    reply = p.status_packet(5)
    clock = [0.0]
    wire = Wire(_LatePort(reply, clock, delay_s=0.5), clock=lambda: clock[0], sleep=lambda s: None)
    answer = wire.ping(5)
    assert answer.state == "ok" and answer.replies[0].servo_id == 5
    silent = Wire(_LatePort(b"", clock, delay_s=0.5), clock=lambda: clock[0], sleep=lambda s: None)
    assert silent.ping(5).state == "none"   # and silence past the window still ends the wait


def test_sync_read_replies_in_list_order_and_sync_write_moves_the_servos() -> None:
    chain = _arm()
    for i, servo in enumerate(chain.servos):
        servo.position = 1000 + i
    with PtyBus(chain) as bus, _serial(bus.port) as ser:
        answer = Wire(ser).ask(_hex("FF FF FE 0A 82 38 02 01 02 03 04 05 06 26"), expect_replies=6)
        assert [r.servo_id for r in answer.replies] == [1, 2, 3, 4, 5, 6]
        assert [int.from_bytes(r.params, "little") for r in answer.replies] == [1000, 1001, 1002, 1003, 1004, 1005]
    frame = _hex("FF FF FE 16 83 2A 02 01 00 08 02 00 08 03 00 08 04 00 08 05 00 08 06 00 08 F7")
    chain.handle(p.take_packet(bytearray(frame)), 1_000_000)
    assert all(int.from_bytes(s.ram[42:44], "little") == 2048 for s in chain.servos)


def test_lerobot_connects_reads_and_writes_over_the_emulator() -> None:
    chain = _arm()
    with PtyBus(chain) as bus:
        lerobot_bus = FeetechMotorsBus(bus.port, _motors())
        lerobot_bus.connect()
        assert lerobot_bus.sync_read("Present_Position", normalize=False) == dict.fromkeys(SO101_NAMES, 2048)
        lerobot_bus.enable_torque()
        lerobot_bus.sync_write("Goal_Position", dict.fromkeys(SO101_NAMES, 2148), normalize=False)
        deadline = time.monotonic() + 2.0  # the servos move at a bounded speed, as real ones do
        while time.monotonic() < deadline:
            positions = lerobot_bus.sync_read("Present_Position", normalize=False)
            if positions == dict.fromkeys(SO101_NAMES, 2148):
                break
        assert positions == dict.fromkeys(SO101_NAMES, 2148)
        lerobot_bus.disconnect()
    assert not any(s.torque_enabled for s in chain.servos)


def test_the_seed_failure_is_reproduced_with_lerobots_own_connect() -> None:
    with PtyBus(_arm(gripper_id=5)) as bus, pytest.raises(RuntimeError, match=r"Missing motor IDs:\s+- 5 .*\s+- 6"):
        FeetechMotorsBus(bus.port, _motors()).connect()


@pytest.mark.parametrize("firmware", list(Firmware))
def test_stock_setup_motor_vs_the_relocking_bus_across_a_power_cycle(firmware) -> None:
    results = {}
    for cls in (FeetechMotorsBus, RelockingFeetechBus):
        chain = ServoChain([Servo("gripper", 1, firmware=firmware)])
        with PtyBus(chain) as bus:
            motor_bus = cls(bus.port, {"gripper": Motor(6, "sts3215", MotorNormMode.RANGE_0_100)})
            motor_bus.setup_motor("gripper")
            motor_bus.port_handler.closePort()
            chain.power_cycle()
            results[cls.__name__] = chain.servo("gripper").current_id
    assert results["RelockingFeetechBus"] == 6
    assert results["FeetechMotorsBus"] == (1 if firmware is Firmware.COMMIT_ON_RELOCK else 6)


def test_relocking_bus_refuses_to_program_with_two_servos_on_the_bus() -> None:
    chain = ServoChain([Servo("gripper", 1), Servo("wrist_roll", 5)])
    with PtyBus(chain) as bus:
        motor_bus = RelockingFeetechBus(bus.port, {"gripper": Motor(6, "sts3215", MotorNormMode.RANGE_0_100)})
        with pytest.raises(BusSafetyError, match="more than one servo"):
            motor_bus.setup_motor("gripper")
        motor_bus.port_handler.closePort()
    assert [s.current_id for s in chain.servos] == [1, 5]


def test_relocking_bus_refuses_to_program_a_servo_of_another_model() -> None:
    """LeRobot's model-number check, kept: an SCS-series servo (model 1284 here) has another register
    map, so nothing is written to it, not even torque off."""
    chain = ServoChain([Servo("gripper", 1, model=1284)])
    with PtyBus(chain) as bus:
        motor_bus = RelockingFeetechBus(bus.port, {"gripper": Motor(6, "sts3215", MotorNormMode.RANGE_0_100)})
        with pytest.raises(BusSafetyError, match=r"servo 1 reports model number 1284, not sts3215's 777"):
            motor_bus.setup_motor("gripper")
        motor_bus.port_handler.closePort()
    servo = chain.servo("gripper")
    assert (servo.current_id, servo.eeprom_writes) == (1, 0)


def test_relocking_bus_leaves_eeprom_locked_after_a_session() -> None:
    chain = _arm()
    with PtyBus(chain) as bus:
        motor_bus = RelockingFeetechBus(bus.port, _motors())
        motor_bus.connect()
        motor_bus.write("Min_Position_Limit", "elbow_flex", 100, normalize=False)  # an EEPROM register
        motor_bus.disconnect()
    elbow = chain.servo("elbow_flex")
    assert all(s.locked and not s.torque_enabled for s in chain.servos)
    assert int.from_bytes(elbow.eeprom[9:11], "little") == 100


@pytest.mark.slow   # wire-timed: seconds of emulated bus traffic; the inner loop keeps one repair test
def test_injected_faults_never_crash_the_scan_and_never_leave_torque_on_unreported() -> None:
    chain = _arm()
    chain.faults = Faults(drop_rate=0.3, corrupt_rate=0.3, seed=4)
    with PtyBus(chain) as bus:
        with _serial(bus.port) as ser:
            for _ in range(5):
                quick_scan(Wire(ser))        # lost and garbled replies: an answer, never an exception
        motor_bus = RelockingFeetechBus(bus.port, _motors())
        with pytest.raises((ConnectionError, RuntimeError)):   # LeRobot's handshake is not retried: refused
            motor_bus.connect()
        assert not any(s.torque_enabled for s in chain.servos)
        motor_bus.port_handler.closePort()
        chain.faults = Faults()
        motor_bus.connect()
        chain.faults = Faults(drop_rate=0.3, corrupt_rate=0.3, seed=5)
        motor_bus.enable_torque(num_retry=10)
        assert all(s.torque_enabled for s in chain.servos)      # six servos holding: the release has work
        silent = motor_bus.release_torque(num_retry=0)          # one try each on the faulty line
        holding = {s.name for s in chain.servos if s.torque_enabled}
        assert silent and holding <= set(silent), (silent, holding)   # every servo still holding is reported
        chain.faults = Faults()
        motor_bus.enable_torque()
        assert all(s.torque_enabled for s in chain.servos)      # holding again: disconnect has work too
        motor_bus.disconnect()
    assert not any(s.torque_enabled for s in chain.servos)


def test_so101_follower_drives_the_emulated_arm_through_the_relocking_bus() -> None:
    from harness.robots.so101 import REPO_CALIBRATION, make_so101_follower
    from harness.sim.units import GRIPPER_LOAD_KEY

    chain = _arm()
    gripper = chain.servo("gripper")
    gripper.eeprom[9:11], gripper.eeprom[11:13] = (1900).to_bytes(2, "little"), (3400).to_bytes(2, "little")
    chain.power_cycle()
    with PtyBus(chain) as bus:
        robot = make_so101_follower(bus.port, {}, robot_id="emulated_follower", calibration_dir=REPO_CALIBRATION)
        assert isinstance(robot.bus, RelockingFeetechBus)
        robot.connect()  # calibrated: the file matches what the servos hold, so nothing asks a person
        start = robot.get_observation()
        # the joints LeRobot reports, and the gripper servo's Present_Load that the failure anatomy reads
        assert set(start) == {f"{n}.pos" for n in SO101_NAMES} | {GRIPPER_LOAD_KEY}
        goal = {**start, "elbow_flex.pos": start["elbow_flex.pos"] + 30.0}
        sent = robot.send_action(goal)
        assert sent["elbow_flex.pos"] == pytest.approx(start["elbow_flex.pos"] + 10.0)  # max_relative_target
        target = sent["elbow_flex.pos"]
        wait_until(lambda: abs(robot.get_observation()["elbow_flex.pos"] - target) <= 0.5, 2.0,
                   "the elbow reaching its goal")   # the servos move at a bounded speed, as real ones do
        robot.disconnect()
    assert all(s.locked and not s.torque_enabled for s in chain.servos)


@pytest.mark.slow
def test_lerobots_so101_follower_drives_the_mujoco_arm_over_the_wire() -> None:
    import json as jsonlib

    import harness.sim  # noqa: F401
    from harness.emulator.sim_coupling import JointCalibration, SimCoupledChain, so101_servos
    from harness.robots.so101 import REPO_CALIBRATION, make_so101_follower
    from harness.sim.world import SimWorld

    calibration = {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in
                   jsonlib.loads((REPO_CALIBRATION / "emulated_follower.json").read_text()).items()}
    world = SimWorld()
    servos = so101_servos()
    gripper = servos[5]
    gripper.eeprom[9:11], gripper.eeprom[11:13] = (1900).to_bytes(2, "little"), (3400).to_bytes(2, "little")
    gripper.power_cycle()
    chain = SimCoupledChain(servos, world, calibration)
    with PtyBus(chain) as bus:
        robot = make_so101_follower(bus.port, {}, robot_id="emulated_follower", calibration_dir=REPO_CALIBRATION,
                                    max_relative_target=None)
        robot.connect()
        target = {**robot.get_observation(), "elbow_flex.pos": 30.0, "shoulder_lift.pos": -20.0}
        for _ in range(60):  # two seconds of a 30 Hz loop
            robot.send_action(target)
            time.sleep(1 / 30)   # behaviour: a 30 Hz control loop's period
        with bus.lock:
            elbow_deg = float(np.degrees(world.joint_positions_rad()[2]))
        assert elbow_deg == pytest.approx(30.0, abs=2.0)  # the simulated joint itself moved
        assert robot.get_observation()["elbow_flex.pos"] == pytest.approx(elbow_deg, abs=1.0)
        robot.disconnect()
    world.close()
