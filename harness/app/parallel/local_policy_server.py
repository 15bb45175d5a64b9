"""LeRobot's policy server (`python -m lerobot.async_inference.policy_server`) started by `harness sweep` for a
`policy_server: local` cell: a child process on 127.0.0.1 that loads the cell's checkpoint when the run asks,
its output in a log file beside the cell's scoresheet, stopped when the cell ends, however it ends, and gone
when the sweep is gone (SIGKILL included): the child runs LeRobot's server module behind this module's own
`__main__`, which first ties its life to a lifeline on stdin (`harness.lifeline`)."""

from __future__ import annotations

import os
import runpy
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from harness.errors import HarnessError

START_TIMEOUT_S = 180.0   # importing LeRobot and torch on a loaded 2-core machine
STOP_TIMEOUT_S = 10.0


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPolicyServer:
    def __init__(self, address: str, log_path: Path, fps: int = 30,
                 timeout_s: float = START_TIMEOUT_S) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self.host, self.port = host, int(port)
        self.log_path = log_path
        self.fps = fps
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LocalPolicyServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:   # the child keeps its own descriptor
            self._process = subprocess.Popen(
                [sys.executable, "-m", "harness.app.parallel.local_policy_server", f"--host={self.host}",
                 f"--port={self.port}", f"--fps={self.fps}"],
                cwd=self.log_path.parent, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                env=_env_finding_this_package())
        try:
            self._wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise HarnessError(f"LeRobot's policy server for this cell exited ({self._process.returncode}); "
                                   f"see {self.log_path}")
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise HarnessError(f"LeRobot's policy server did not listen on {self.address} within "
                                       f"{self.timeout_s:g} s; see {self.log_path}") from None
                time.sleep(0.2)   # the server is importing torch: ask again shortly

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


def _env_finding_this_package() -> dict[str, str]:
    """This `harness` first on the child's path, installed or not, whatever folder the child runs in."""
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}


if __name__ == "__main__":
    from harness.lifeline import exit_when_closed

    exit_when_closed(sys.stdin.fileno())
    sys.argv = ["lerobot.async_inference.policy_server", *sys.argv[1:]]
    runpy.run_module("lerobot.async_inference.policy_server", run_name="__main__", alter_sys=True)
