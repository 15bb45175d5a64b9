"""The emulated STS3215 behaves as the real servo on the points LeRobot's tools depend on:
Homing_Offset, position limits, RESET, and the health sensors with their protections.
Every test talks bytes through scservo_sdk or LeRobot's own bus over the pseudo-terminal."""

from __future__ import annotations

import threading

import pytest
import scservo_sdk as scs
import serial
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from harness.bus import packets as p
from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from harness.emulator.scenario import Rig, Scenario, ServoSpec, build_chain, run_command
from harness.emulator.servos import ErrorBit, Servo, ServoChain
from tests.helpers import wait_until

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores


def _bus(port: str, name: str = "elbow_flex", motor_id: int = 1) -> FeetechMotorsBus:
    bus = FeetechMotorsBus(port, {name: Motor(motor_id, "sts3215", MotorNormMode.DEGREES)})
    bus.connect()
    return bus


def _sdk(port: str) -> tuple[scs.PortHandler, scs.PacketHandler]:
    handler = scs.PortHandler(port)
    assert handler.openPort() and handler.setBaudRate(1_000_000)
    return handler, scs.PacketHandler(0)


def _wait_for(predicate, timeout_s: float = 3.0) -> None:
    wait_until(predicate, timeout_s, "condition not reached in time")


def _settles_at(bus: FeetechMotorsBus, name: str, expected: int) -> None:
    """Wait for a move to end at `expected`. Moving clears within a tick of the goal, so a read just after it
    clears can still be one short (the tick thread runs unevenly on a loaded machine, and a tick soon after the
    last moves the shaft less than one position step); the move has ended there when the shaft reads `expected`
    and Moving is 0. A shaft that went elsewhere never does."""
    _wait_for(lambda: bus.read("Present_Position", name, normalize=False) == expected
              and bus.read("Moving", name, normalize=False) == 0, timeout_s=10.0)


def test_homing_offset_shifts_present_position_both_ways() -> None:
    servo = Servo("elbow_flex", 1, position=2500.0)
    with PtyBus(ServoChain([servo])) as pty:
        bus = _bus(pty.port)
        assert bus.read("Present_Position", "elbow_flex", normalize=False) == 2500
        bus.write("Homing_Offset", "elbow_flex", 300, normalize=False)
        assert bus.read("Present_Position", "elbow_flex", normalize=False) == 2200
        bus.write("Homing_Offset", "elbow_flex", -200, normalize=False)   # sign-magnitude, bit 11
        assert servo.ram[31:33] == bytes([200, 0x08])
        assert bus.read("Present_Position", "elbow_flex", normalize=False) == 2700
        offsets = bus.set_half_turn_homings()    # what lerobot-calibrate does at the middle pose
        assert offsets == {"elbow_flex": 2500 - 2047}
        assert bus.read("Present_Position", "elbow_flex", normalize=False) == 2047
        bus.disconnect()


def test_homing_offset_wraps_within_one_turn() -> None:
    servo = Servo("elbow_flex", 1, position=100.0)
    with PtyBus(ServoChain([servo])) as pty:
        bus = _bus(pty.port)
        bus.write("Homing_Offset", "elbow_flex", 300, normalize=False)
        assert bus.read("Present_Position", "elbow_flex", normalize=False) == (100 - 300) % 4096
        bus.disconnect()


def test_goal_position_is_clamped_to_the_position_limits() -> None:
    servo = Servo("elbow_flex", 1)
    with PtyBus(ServoChain([servo])) as pty:
        bus = _bus(pty.port)
        bus.write("Min_Position_Limit", "elbow_flex", 1500, normalize=False)
        bus.write("Max_Position_Limit", "elbow_flex", 2500, normalize=False)
        bus.enable_torque()
        bus.write("Goal_Position", "elbow_flex", 3500, normalize=False)
        _settles_at(bus, "elbow_flex", 2500)
        bus.write("Goal_Position", "elbow_flex", 100, normalize=False)
        _settles_at(bus, "elbow_flex", 1500)
        bus.disconnect()


def test_limits_and_goal_live_in_the_homed_frame() -> None:
    servo = Servo("elbow_flex", 1, position=3000.0)
    with PtyBus(ServoChain([servo])) as pty:
        bus = _bus(pty.port)
        bus.write("Homing_Offset", "elbow_flex", 1000, normalize=False)   # present = raw - 1000 = 2000
        bus.write("Max_Position_Limit", "elbow_flex", 2100, normalize=False)
        bus.enable_torque()
        bus.write("Goal_Position", "elbow_flex", 4000, normalize=False)
        _settles_at(bus, "elbow_flex", 2100)
        assert round(servo.position) == 3100   # the shaft itself stopped at raw 3100
        bus.disconnect()


def test_reset_is_answered_and_restores_factory_values() -> None:
    servo = Servo("gripper", 1)
    with PtyBus(ServoChain([servo])) as pty:
        bus = _bus(pty.port, "gripper")
        bus.write("Homing_Offset", "gripper", 500, normalize=False)
        bus.write("Max_Position_Limit", "gripper", 3000, normalize=False)
        bus.write("Max_Temperature_Limit", "gripper", 50, normalize=False)
        bus.port_handler.closePort()
        with serial.Serial(pty.port, 1_000_000, timeout=0) as ser:
            answer = Wire(ser).ask(bytes.fromhex("FFFF010206F6"), expect_replies=1, window_s=0.1)
        assert answer.state == "ok"
        assert p.status_packet(1, answer.replies[0].code, answer.replies[0].params) == bytes.fromhex("FFFF010200FC")
        handler, packets = _sdk(pty.port)
        offset, result, error = packets.read2ByteTxRx(handler, 1, 31)
        assert (offset, result, error) == (0, scs.COMM_SUCCESS, 0)
        assert packets.read2ByteTxRx(handler, 1, 11)[0] == 4095
        assert packets.read1ByteTxRx(handler, 1, 13)[0] == 70
        assert packets.read1ByteTxRx(handler, 1, p.ADDR_ID)[0] == 1   # still reachable at its ID
        handler.closePort()


def test_health_registers_read_plausible_values() -> None:
    chain = build_chain(Scenario(servos=[ServoSpec(name="elbow_flex", id=1)], supply_voltage=12.0))
    with PtyBus(chain) as pty:
        bus = _bus(pty.port)
        assert bus.read("Present_Voltage", "elbow_flex", normalize=False) == 120          # 0.1 V
        assert 20 <= bus.read("Present_Temperature", "elbow_flex", normalize=False) <= 40  # deg C
        assert bus.read("Present_Load", "elbow_flex", normalize=False) == 0                # limp
        idle_current = bus.read("Present_Current", "elbow_flex", normalize=False)
        assert 0 < idle_current < 20                                                       # 6.5 mA units
        bus.enable_torque()
        bus.write("Goal_Position", "elbow_flex", 3500, normalize=False)
        _wait_for(lambda: bus.read("Present_Load", "elbow_flex", normalize=False) > 0)   # pushing toward the goal
        assert bus.read("Present_Current", "elbow_flex", normalize=False) > idle_current
        bus.disconnect()


def test_overheat_sets_the_status_bit_and_releases_torque() -> None:
    chain = build_chain(Scenario(servos=[ServoSpec(name="elbow_flex", id=1)]))
    with PtyBus(chain) as pty:
        bus = _bus(pty.port)
        bus.enable_torque()
        Rig(chain, pty.lock, pty.port).heat("elbow_flex", 75.0)
        handler, packets = _sdk(pty.port)
        temperature, result, error = packets.read1ByteTxRx(handler, 1, 63)
        assert result == scs.COMM_SUCCESS and temperature >= 70
        assert error & scs.ERRBIT_OVERHEAT
        assert packets.read1ByteTxRx(handler, 1, p.ADDR_TORQUE_ENABLE)[0] == 0   # Unloading_Condition bit 2
        assert packets.getRxPacketError(error) == "[RxPacketError] Overheat error!"
        handler.closePort()
        with pytest.raises(RuntimeError, match="Overheat"):
            bus.write("Torque_Enable", "elbow_flex", 1)
        bus.port_handler.closePort()


def test_under_voltage_sets_the_voltage_bit_but_keeps_torque() -> None:
    chain = build_chain(Scenario(servos=[ServoSpec(name="elbow_flex", id=1)], supply_voltage=4.5))
    with PtyBus(chain) as pty:
        handler, packets = _sdk(pty.port)
        volts, result, error = packets.read1ByteTxRx(handler, 1, 62)
        assert (volts, result) == (45, scs.COMM_SUCCESS)
        assert error == ErrorBit.VOLTAGE == scs.ERRBIT_VOLTAGE
        packets.write1ByteTxRx(handler, 1, p.ADDR_TORQUE_ENABLE, 1)
        assert packets.read1ByteTxRx(handler, 1, p.ADDR_TORQUE_ENABLE)[0] == 1   # bit 0 not in Unloading (44)
        Rig(chain, pty.lock, pty.port).supply(12.0)
        assert packets.read1ByteTxRx(handler, 1, 62)[2] == 0                     # clears with the supply
        handler.closePort()


def test_overload_on_a_jammed_joint_trips_after_the_protection_time() -> None:
    chain = build_chain(Scenario(servos=[ServoSpec(name="elbow_flex", id=1, jammed=True)]))
    with PtyBus(chain) as pty:
        bus = _bus(pty.port)
        bus.write("Protection_Time", "elbow_flex", 50, normalize=False)   # 10 ms units: 0.5 s
        bus.enable_torque()
        bus.write("Goal_Position", "elbow_flex", 2600, normalize=False)
        handler, packets = _sdk(pty.port)
        _wait_for(lambda: packets.read2ByteTxRx(handler, 1, 60)[0] == 1000)   # pushing hard against the jam
        assert not packets.read1ByteTxRx(handler, 1, 65)[0] & scs.ERRBIT_OVERLOAD   # not for long enough yet
        _wait_for(lambda: packets.read1ByteTxRx(handler, 1, 65)[0] & scs.ERRBIT_OVERLOAD)
        assert packets.read1ByteTxRx(handler, 1, p.ADDR_TORQUE_ENABLE)[0] == 0
        assert packets.read2ByteTxRx(handler, 1, 56)[0] == 2048        # the shaft never moved
        Rig(chain, pty.lock, pty.port).jam("elbow_flex", False)
        packets.write1ByteTxRx(handler, 1, p.ADDR_TORQUE_ENABLE, 1)     # re-enabling clears the latch
        assert packets.read1ByteTxRx(handler, 1, 65)[0] == 0
        _wait_for(lambda: packets.read2ByteTxRx(handler, 1, 56)[0] == 2600)
        handler.closePort()
        bus.port_handler.closePort()


def test_console_commands_drive_the_same_faults() -> None:
    chain = build_chain(Scenario(servos=[ServoSpec(name="gripper", id=1)]))
    rig = Rig(chain, threading.Lock(), "/dev/null")
    assert run_command(rig, "heat gripper 80") == ["ok"]
    assert run_command(rig, "supply 4.0") == ["ok"]
    health = run_command(rig, "health")
    assert "overheat" in health[0] and "voltage" in health[0]
    assert run_command(rig, "heat wrist 80") == ["error: no servo named 'wrist' (servos: gripper)"]
    assert run_command(rig, "supply lots") == ["error: VOLTS must be a number, got 'lots'"]
    assert run_command(rig, "quit") is None
