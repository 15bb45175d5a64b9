"""Runs one of LeRobot's own command-line tools as a person would: its real entry point in a process of its own,
reading what it prints and answering its prompts on stdin. When the test hands its `harness_cli` over, the tool
(`python -u -m MODULE ARGS`: LeRobot's scripts and `harness.cli` all run `main()` as `__main__`) is forked from
the suite's preloaded server, which has imported what it would import at start (tests/cli_process.py; a
forked LeRobot tool behaves as a fresh one: test_cli_process)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.cli_process import HarnessCli


class LeRobotTool:
    def __init__(self, module: str, args: list[str], cwd: Path, env: dict[str, str] | None = None,
                 harness_cli: HarnessCli | None = None) -> None:
        self.output = ""
        self._cond = threading.Condition()
        streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "cwd": cwd,
                   "env": {**os.environ, **(env or {})}, "text": True}
        if harness_cli is not None:   # `python -u -m MODULE ARGS`, forked
            self.proc = harness_cli.popen(args, unbuffered=True, module=module, **streams)
        else:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-c", f"import sys; from {module} import main; sys.exit(main())", *args],
                **streams)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._seen = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            with self._cond:
                self.output += chunk.decode(errors="replace")
                self._cond.notify_all()

    def expect(self, text: str, timeout_s: float = 120.0) -> None:
        """Wait until `text` appears after the previous match (a prompt, a message)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (found := self.output.find(text, self._seen)) < 0:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"never saw {text!r}; output so far:\n{self.output[-3000:]}")
                self._cond.wait(min(left, 0.2))
            self._seen = found + len(text)

    def send(self, line: str = "") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout_s: float = 120.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running after {timeout_s} s; output:\n{self.output[-3000:]}") from None
        self._reader.join(timeout=5)
        return code
