"""LeRobot's own policy server (`python -m lerobot.async_inference.policy_server`) in a child process, for the
asynchronous-inference tests: started on 127.0.0.1, its log read line by line, and stopped on demand (also
after a number of inferences, which is how a test stops it mid-trial)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.helpers import wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PolicyServerProcess:
    def __init__(self, port: int, workdir: Path, inference_latency_s: float = 0.0) -> None:
        """`workdir` takes the `logs/` folder LeRobot's server writes into its working directory;
        `inference_latency_s` is the server's own floor on each answer (LeRobot's default is 1/30 s)."""
        self.port = port
        self.workdir = workdir
        self.inference_latency_s = inference_latency_s
        self.inferences = 0
        self.lines: list[str] = []
        self._kill_at: int | None = None
        self._process: subprocess.Popen[str] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self, timeout_s: float = 180.0) -> PolicyServerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # LeRobot's server leaves a tmp*.json in its temporary folder for each policy it loads: harness's own server
        # runs in its run's scratch folder, this one in the test's
        temporary = self.workdir / "tmp"
        temporary.mkdir(exist_ok=True)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "lerobot.async_inference.policy_server", "--host=127.0.0.1",
             f"--port={self.port}", "--fps=30", f"--inference_latency={self.inference_latency_s}",
             "--obs_queue_timeout=1"],
            cwd=self.workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temporary)})
        threading.Thread(target=self._read, daemon=True).start()
        def listening() -> bool:
            if self._process.poll() is not None:
                raise RuntimeError("the policy server exited:\n" + "".join(self.lines[-20:]))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return False
            return True

        try:
            wait_until(listening, timeout_s, f"the policy server listening on {self.port}", poll_s=0.2)
        except AssertionError:
            self.stop()
            raise RuntimeError(f"the policy server did not listen on {self.port} within {timeout_s} s") from None
        return self

    def kill_after(self, inferences: int) -> None:
        """Kill the server once it has run this many more inferences (counted from now)."""
        self._kill_at = self.inferences + inferences

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)
            if "Running inference for observation" in line:
                self.inferences += 1
                if self._kill_at is not None and self.inferences >= self._kill_at:
                    process.kill()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.wait(timeout=30)
