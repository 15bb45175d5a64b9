"""Run in a subprocess by tests/e2e/test_portability.py: this interpreter plays Windows as far as the harness sees.

- Every `import` statement in harness code (outside the bus emulator, which needs a pseudo-terminal) of a
  POSIX-only standard module fails as it would on Windows: `builtins.__import__` is wrapped, so a module
  already imported by a third-party library is refused too. Third-party libraries import what they like:
  on Windows they take their own branches, which this machine cannot run.
- `sys.platform` is "win32" and `platform.system()` "Windows" from the moment the third-party stack the
  harness imports at module level is loaded (loaded first, under the real platform, for the same reason).

`python tests/windows_like.py import` imports every harness module and prints a JSON report;
`python tests/windows_like.py fix-ids` runs `harness fix-ids` (the real command: its parser, its operator on
stdin/stdout, its port handling) against the bus emulator on an in-process pyserial port, with a person
scripted to do what each prompt asks.
"""

from __future__ import annotations

import builtins
import importlib
import json
import pkgutil
import platform
import sys

POSIX_ONLY = frozenset({"termios", "tty", "pty", "fcntl", "resource", "grp", "pwd", "posix", "syslog", "crypt",
                        "curses", "_curses", "readline", "spwd", "nis", "_posixsubprocess", "_posixshmem"})
EMULATOR = ("harness.emulator.pty_port",)   # the bus emulator's pseudo-terminal: POSIX only, by design
THIRD_PARTY = ("asyncio", "subprocess", "multiprocessing", "concurrent.futures", "numpy", "pandas", "torch",
               "torchvision", "lerobot", "lerobot.motors.feetech", "lerobot.robots", "lerobot.cameras",
               "lerobot.policies.factory", "lerobot.datasets.lerobot_dataset", "textual", "textual.app", "rich",
               "ray", "mujoco", "cv2", "matplotlib", "matplotlib.pyplot", "pydantic", "yaml", "scipy", "serial",
               "serial.tools.list_ports", "scservo_sdk", "PIL", "av", "datasets", "transformers", "filelock",
               "psutil", "tqdm", "huggingface_hub", "grpc", "fast_simplification", "pyarrow", "pyarrow.parquet")
refused: list[tuple[str, str]] = []
_real_import = builtins.__import__


def _windows_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if (level == 0 and name.split(".")[0] in POSIX_ONLY and importer.startswith("harness")
            and not importer.startswith(EMULATOR)):
        refused.append((importer, name))
        raise ModuleNotFoundError(f"No module named '{name}' (playing Windows)", name=name)
    return _real_import(name, globals, locals, fromlist, level)


def play_windows() -> None:
    for module in THIRD_PARTY:
        importlib.import_module(module)
    builtins.__import__ = _windows_import
    sys.platform = "win32"
    platform.system = lambda: "Windows"


def import_everything() -> dict[str, object]:
    import harness

    failed, imported = {}, []
    for info in pkgutil.walk_packages(harness.__path__, "harness.", onerror=lambda name: None):
        try:
            importlib.import_module(info.name)
            imported.append(info.name)
        except Exception as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
    try:   # the blocker itself: a harness module importing termios at import time is refused
        exec("import termios", {"__name__": "harness.self_check"})
        blocks = False
    except ModuleNotFoundError:
        blocks = True
        refused.remove(("harness.self_check", "termios"))   # the check's own refusal, not a module's
    return {"failed": failed, "imported": imported, "blocker_refuses_termios": blocks}


def fix_ids_session() -> dict[str, object]:
    """fix-ids' diagnosis and repair of an arm whose gripper answers as ID 5 (two servos at ID 5), through
    the CLI, on an emulated bus served over pyserial in this process."""
    import io
    import threading

    from harness.bus import packets as p
    from harness.cli import main
    from harness.emulator.protocol_emulated import InProcessBus
    from harness.emulator.scenario import SO101_NAMES
    from harness.emulator.servos import Servo, ServoChain

    servos = [Servo(name, i + 1) for i, name in enumerate(SO101_NAMES)]
    gripper = servos[-1]
    gripper.eeprom[p.ADDR_ID] = 5
    gripper.power_cycle()
    chain = ServoChain(servos)

    def turn(name: str) -> None:
        chain.servo(name).position = (chain.servo(name).position + 400) % 4096

    def act(prompt: str) -> None:
        """What a person does at each prompt of the repair, read from the prompt itself."""
        if "Connect ONLY the gripper" in prompt:
            chain.only("gripper")
        elif "Reconnect the gripper" in prompt:
            chain.plug(*SO101_NAMES)
        elif "power-cycle" in prompt:
            chain.power_cycle()
        elif "turn the wrist_roll" in prompt:
            turn("wrist_roll")
        elif "turn the gripper" in prompt:
            turn("gripper")
        else:
            raise AssertionError(f"no scripted action for: {prompt}")

    out = io.StringIO()

    class Person(io.TextIOBase):
        """stdin: each line read is a person pressing Enter after doing what the last prompt asked."""

        def readline(self, size: int = -1) -> str:
            text = out.getvalue()
            if text.rstrip().endswith("[y/N]"):
                return "y\n"
            with bus.lock:
                act(text.rsplit(">>> ", 1)[-1])
            return "\n"

        def isatty(self) -> bool:
            return False

    with InProcessBus(chain) as bus:
        stdin, stdout = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = Person(), out
        try:
            code = main(["fix-ids", "--port", bus.port, "--ignore-calibration"])
        finally:
            sys.stdin, sys.stdout = stdin, stdout
    return {"code": code, "ids": [s.current_id for s in chain.servos], "transcript": out.getvalue(),
            "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()]}


if __name__ == "__main__":
    play_windows()
    report = import_everything() if sys.argv[1] == "import" else fix_ids_session()
    report.update(refused=sorted(set(refused)), platform=sys.platform)
    print("REPORT " + json.dumps(report))
