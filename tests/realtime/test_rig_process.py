"""The emulated arm in a process of its own (`harness rehearse`'s): its servos answer whatever the rehearsal's
process does to its interpreter lock, and the desk (cube, console, the simulator's truth) is reached through it."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.emulator.remote_rig import RigProcessError, open_rig_process
from harness.emulator.scenario import SO101_NAMES, default_scenario, open_rig
from tests.helpers import REPO, wait_until

PINGER = """
import sys, time
import serial
from harness.bus import packets as p
port = serial.Serial(sys.argv[1], 1_000_000, timeout=2.0)
print("ready", flush=True)
waits = []
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    sent = time.monotonic()
    port.write(p.instruction_packet(1, p.PING))
    reply = port.read(6)
    waits.append(time.monotonic() - sent if len(reply) == 6 else float("inf"))
    time.sleep(0.005)   # the behaviour: a bus client's pace between pings
print(max(waits), len(waits), flush=True)
"""


def _longest_reply_while_the_lock_is_held(port: str, hold_s: float) -> tuple[float, float]:
    """Ping servo 1 from another process while this one holds its interpreter lock in C calls (a sort holds it
    throughout, as a policy thread may while it waits for a core); (longest wait for a reply, shortest hold)."""
    pinger = subprocess.Popen([sys.executable, "-c", PINGER, port, str(hold_s + 1.0)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert pinger.stdout is not None
    assert pinger.stdout.readline().strip() == "ready"
    values = [random.random() for _ in range(600_000)]
    holds = []
    until = time.monotonic() + hold_s
    while time.monotonic() < until:
        started = time.monotonic()
        sorted(values)   # one C call: the interpreter lock is not let go until it returns
        holds.append(time.monotonic() - started)
    longest, count = pinger.stdout.readline().split()
    assert pinger.wait(timeout=30) == 0 and int(count) > 10
    return float(longest), min(holds)


@pytest.mark.slow
def test_the_servos_answer_while_the_rehearsals_interpreter_lock_is_held() -> None:
    with open_rig(default_scenario(), sim=True) as rig:   # the emulator in this process: its replies wait
        waited, hold = _longest_reply_while_the_lock_is_held(rig.port, 2.0)
    assert hold > 0.05, "the machine sorts too fast to hold the lock long enough for this test"
    assert waited >= 0.8 * hold, (waited, hold)
    with open_rig_process() as remote:
        waited, hold = _longest_reply_while_the_lock_is_held(remote.port, 2.0)
    assert math.isfinite(waited) and waited < 0.5 * hold, (waited, hold)


@pytest.mark.slow
def test_the_desk_is_reached_through_the_arm_process(tmp_path: Path) -> None:
    with open_rig_process(tmp_path / "cams.sock", cube_origin_cm=(20.0, -4.0)) as rig:
        assert (tmp_path / "cams.sock").exists()   # the cameras are the arm process's
        rig.place_cube(1.0, -2.0, 30.0)
        position, yaw = rig.truth.cube_pose()
        assert position[0] == pytest.approx(0.21, abs=0.002) and position[1] == pytest.approx(-0.06, abs=0.002)
        assert math.degrees(yaw) == pytest.approx(30.0, abs=1.0)
        started = rig.truth.time
        wait_until(lambda: rig.truth.time > started + 0.1, 30, "the emulated arm's clock runs")
        assert rig.truth.model.nq == len(rig.truth.model.qpos0)   # the model the expert plans on, built here
        assert rig.command("cube 0 0")[0].startswith("cube placed at dx +0.0")
        assert rig.truth.cube_pose()[0][0] == pytest.approx(0.20, abs=0.002)
        status = rig.command("status")
        assert any("gripper" in line and "torque off" in line for line in status), status
        assert rig.torque_enabled() == dict.fromkeys(SO101_NAMES, False)   # nothing holds before a run connects
        assert rig.command("heat nobody 90") == ["error: no servo named 'nobody' (servos: shoulder_pan, "
                                                 "shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper)"]
        assert rig.command("quit") is None
        os.kill(rig.pid, signal.SIGINT)   # Ctrl+C in the rehearsal's terminal: the rehearsal stops, releasing torque
        os.kill(rig.pid, signal.SIGTERM)
        assert rig.command("status") == status   # ... on servos that are still there to answer
    assert not (tmp_path / "cams.sock").exists()


@pytest.mark.slow
def test_an_arm_process_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RigProcessError) as raised, open_rig_process(tmp_path / "missing" / "cams.sock"):
        pass
    message = str(raised.value)
    assert message.startswith("the emulated arm could not start:") and "its folder does not exist" in message
    assert "\n" not in message
