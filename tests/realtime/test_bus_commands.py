"""The bus commands as a new user runs them in a terminal or a script (issue 14, finding 6):
`emulate-bus` keeps serving with its input closed, from any folder; `fix-ids` speaks at once and
never lets an Enter pressed while it was busy answer a later prompt."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import serial

from harness.bus.wire import Wire
from harness.emulator.pty_port import PtyBus
from tests.bus_people import arm
from tests.helpers import wait_until

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores


class Lines:
    """A child's stdout as it arrives (prompts end without a newline), with a deadline on each wait."""

    def __init__(self, stream) -> None:
        self.text = ""
        self._read_to = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        while chunk := os.read(stream.fileno(), 4096):
            with self._lock:
                self.text += chunk.decode(errors="replace")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The line holding the next `text` after the last one waited for."""
        def line() -> str | None:
            with self._lock:
                at = self.text.find(text, self._read_to)
                if at < 0:
                    return None
                self._read_to = at + len(text)
                start = self.text.rfind("\n", 0, at) + 1
                end = self.text.find("\n", at)
                return self.text[start:end if end >= 0 else len(self.text)]

        try:
            return wait_until(line, timeout, f"printed {text!r}", poll_s=0.02)
        except AssertionError:
            raise AssertionError(f"never printed {text!r}; printed:\n{self.text}") from None

    def drain(self, seconds: float) -> str:
        """What is printed within `seconds`: a window in which something must NOT happen."""
        time.sleep(seconds)   # behaviour: the window itself is what is checked (nothing printed, nothing exits)
        with self._lock:
            new, self._read_to = self.text[self._read_to:], len(self.text)
        return new


@pytest.mark.slow
@pytest.mark.desk
def test_emulate_bus_with_closed_input_keeps_serving_from_another_folder(tmp_path: Path, harness_cli) -> None:
    child = harness_cli.popen(["emulate-bus", "--sim"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        lines = Lines(child.stdout)
        port = lines.wait_for("Emulated STS3215 bus on").rsplit(" ", 1)[1]
        lines.drain(1.0)                       # an emulator that exits on EOF would be gone by now
        assert child.poll() is None, lines.text
        with serial.Serial(port, 1_000_000, timeout=0) as ser:
            assert Wire(ser).ping(6).state == "ok"
    finally:
        child.terminate()
        assert child.wait(timeout=10) == 0


@pytest.mark.slow
@pytest.mark.quiet   # a fix-ids diagnosis read off the wire: a nice-19 neighbour made its line look noisy (session 46)
def test_fix_ids_speaks_first_and_enter_typed_while_busy_answers_nothing(harness_cli) -> None:
    chain = arm(ids={"gripper": 5})
    master, slave = os.openpty()
    with PtyBus(chain) as bus:
        child = harness_cli.popen(["fix-ids", "--port", bus.port], stdin=slave, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        try:
            lines = Lines(child.stdout)
            assert lines.wait_for("fix-ids:", timeout=20).startswith("fix-ids: scanning")
            os.write(master, b"\n\n")          # impatient Enters while LeRobot loads (to find the calibration)
            lines.wait_for("Repair it now? [y/N] ")
            os.write(master, b"y\n")
            lines.wait_for("Loading LeRobot's Feetech driver")
            lines.wait_for("Connect ONLY the gripper servo")
            early = lines.drain(1.5)
            assert "answers" not in early and "Found" not in early, early
            os.write(master, b"\n")            # now the person is done: all six are still on the bus
            lines.wait_for("More than one servo answers at 1000000 baud")
        finally:
            child.kill()
            child.wait()
            os.close(master)
            os.close(slave)
    assert all(s.eeprom_writes == 0 for s in chain.servos)
