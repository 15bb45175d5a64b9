"""Windows and macOS, proven as far as a Linux machine can: see docs/bringup_windows.md for what this covers.

The two slow tests run tests/windows_like.py in a subprocess that plays Windows (POSIX-only modules refused to
harness code, `sys.platform == "win32"`): every module imports, and `harness fix-ids` diagnoses and repairs
two servos at ID 5 against the bus emulator on an in-process pyserial port (no pseudo-terminal).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bus.fix_ids import flush_typed_ahead
from harness.bus.ports import SerialPort, check_port, describe_ports
from harness.cli import main
from harness.errors import HarnessInputError
from harness.run.terminal import line_waiting
from tests.helpers import REPO

WINDOWS_PORTS = [SerialPort("COM4", "USB-SERIAL CH340 (COM4)"), SerialPort("COM1", "Communications Port (COM1)")]
MAC_PORTS = [SerialPort("/dev/cu.usbmodem58FA0829321", "USB Single Serial"), SerialPort("/dev/cu.Bluetooth", "n/a")]


def _windows_like(mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "windows_like.py"), mode], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("REPORT "))


@pytest.mark.slow
def test_every_module_imports_where_posix_only_modules_do_not_exist() -> None:
    report = _windows_like("import")
    assert report["platform"] == "win32" and report["blocker_refuses_termios"]
    assert report["failed"] == {}, report["failed"]
    assert report["refused"] == []
    every = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for p in (REPO / "harness").rglob("*.py")}
    assert set(report["imported"]) == every - {"harness"}   # the package itself: imported to walk it


@pytest.mark.slow
def test_fix_ids_diagnoses_and_repairs_two_servos_at_id_5_on_an_in_process_port_playing_windows() -> None:
    report = _windows_like("fix-ids")
    transcript = report["transcript"]
    assert report["platform"] == "win32" and report["refused"] == []
    assert report["code"] == 0, transcript
    assert report["ids"] == [1, 2, 3, 4, 5, 6]
    assert "Two servos answer as ID 5" in transcript and "No servo answers as ID 6" in transcript
    assert "Programmed the gripper servo as ID 6" in transcript   # LeRobot's bus did the write, over the port
    assert transcript.rstrip().endswith("the gripper proven at ID 6 by movement.")


def test_a_missing_or_wrong_port_names_the_ports_there_are() -> None:
    with pytest.raises(HarnessInputError) as missing:
        check_port(None, lambda: WINDOWS_PORTS)
    assert missing.value.field == "--port"
    assert "serial ports here: COM4 (USB-SERIAL CH340 (COM4)), COM1 (Communications Port (COM1))" in str(missing.value)
    with pytest.raises(HarnessInputError) as wrong:
        check_port("COM9", lambda: WINDOWS_PORTS, exists=lambda _: False)
    assert str(wrong.value).startswith("--port: no serial port COM9; serial ports here: COM4")
    assert check_port("com4", lambda: WINDOWS_PORTS, exists=lambda _: False) == "com4"
    assert check_port("\\\\.\\COM4", lambda: WINDOWS_PORTS, exists=lambda _: False) == "\\\\.\\COM4"
    assert check_port("emulated://bus1", lambda: []) == "emulated://bus1"
    with pytest.raises(HarnessInputError) as mac:
        check_port("/dev/tty.usbmodem1", lambda: MAC_PORTS, exists=lambda _: False)
    assert "/dev/cu.usbmodem58FA0829321 (USB Single Serial), /dev/cu.Bluetooth" in str(mac.value)
    assert describe_ports([]).startswith("no serial ports found: plug the arm's controller board in by USB")


@pytest.mark.parametrize("argv", [["fix-ids"], ["fix-ids", "--port", "/dev/harness-no-such-port"],
                                  ["fix-ids", "--port", "emulated://nothing-here"]])
def test_fix_ids_with_no_usable_port_is_one_line_naming_the_ports(argv, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--port" in err and ("serial ports here" in err or "no serial ports found" in err)


def test_console_input_on_windows_is_asked_without_select(tmp_path: Path) -> None:
    piped = io.StringIO("a line\n")
    assert line_waiting(piped, platform="win32")            # a pipe or a test's input: always ready, as before
    flush_typed_ahead(piped, platform="win32")              # not a console: nothing to drop, nothing raised
    assert piped.read() == "a line\n"
    with (tmp_path / "typed").open("w+") as file:   # a real descriptor: select() on POSIX, never on Windows
        assert line_waiting(file, platform="win32")
