"""`python -m harness.cli` for the e2e tests, forked from a process that has already imported it.

Why: a fresh `harness` command that runs a policy spends 2.5-6 CPU seconds importing torch, LeRobot (its policies
pull in transformers), MuJoCo, OpenCV and pyarrow, and CI's two cores are CPU-bound (docs/benchmarks.md: a one-trial
run of a tiny ACT costs 10.5 CPU s fresh, 4.5 forked). One **server** per pytest process (each xdist worker) imports
all of that once (6.2 CPU s, 860 MiB), freezes it out of the garbage collector (a child's full collection would walk
it and copy the pages the fork shares), then forks a fresh CLI for every request.

What a forked CLI shares with a real subprocess, and so what a test may still assert:
- its own pid, a child of the server (not of the test): signals the test sends (SIGINT, SIGTERM, SIGKILL) reach
  it alone; its exit status (a negative signal number if a signal ended it, as `Popen` says) comes back over the
  request's socket, so `wait(timeout)`, `poll`, `returncode`, `send_signal`, `kill`, `communicate` behave as
  `subprocess.Popen`'s do (`CliProcess` *is* a `Popen`, only its start and its wait differ);
- its own argv (`sys.argv` as `python -m harness.cli` sets it, `harness/cli.py` run as `__main__` by runpy),
  cwd, environment (`os.environ` replaced whole), and stdin/stdout/stderr: the test's file descriptors are passed
  over a Unix socket (SCM_RIGHTS) and become the child's 0, 1 and 2, and `sys.std*` are rebuilt over them as a
  fresh interpreter builds them (line-buffered on a terminal, `-u` honoured);
- a fresh interpreter's exit: non-daemon threads joined, atexit handlers run, streams flushed; an uncaught
  exception prints its traceback and exits 1, an uncaught KeyboardInterrupt ends the process by SIGINT.

What it cannot share, and so where `HarnessCli` starts a real subprocess instead (`fresh_reason` says why):
- an environment that differs from the server's in a variable read at import time (`IMPORT_TIME`: Hugging Face's
  `HF_HOME`/`HF_HUB_CACHE`/`HF_HUB_OFFLINE` constants and LeRobot's `HF_LEROBOT_HOME`, `MUJOCO_GL` and
  `PYOPENGL_PLATFORM`, `TMPDIR` up to the `harness-*` scratch folders an in-process `harness` call adds (harness.scratch
  reads it once: `temporary_root`), `HOME`, the locale, `PYTHON*` flags, torch's and
  OpenMP's thread settings). Variables read when used (`HARNESS_STATE_DIR`, `RAY_*`, `HF_DATASETS_*` set by the
  command itself) are honoured. `PYTHONPATH` counts as the same when it names the same folders once this checkout
  is on it (the server imports harness from this checkout, as the tests do);
- `fresh=True`, which a test asks for when a fresh interpreter is what it tests: an install, a README command, the
  no-egress and orphan audits (which count every process of a run), anything about what gets imported.

Also shared with the server, unlike a fresh interpreter: the modules imported (the child starts with the server's
`sys.modules`), the string-hash seed, and torch's default generator state (untouched in the server, so the same).
The server starts no thread, thread pool, GL context or Ray before forking, and checks that it has only one Python
thread (the native threads the imports start, OpenBLAS's and jemalloc's, a fresh process has too, and those
libraries remake them after a fork); numpy's global generator is reseeded in each child, as Python's `random` is by
Python itself. A `harness run` unfreezes the collector when it ends (run_command.py), the server's objects with it.

A shell script under test (scripts/coverage_experiment, latency_experiment, train_reference) reaches a server of its
own through `HarnessCli.script_env()`: its PYTHON_BIN's `harness`, `lerobot-train` and `python -m` are
tests/cli_client.py, which hands the script's argv, folder, environment and descriptors over the same socket (a
request marked `client`: the server itself checks `fresh_reason`, refuses, and the client execs the real command) and
ends as the forked command ended. That server starts with the environment the scripts export on a CPU before their
first command (`SCRIPT_THREADS`: one torch thread, read at import), so their commands are forked, not refused.

The server (`python -m tests.cli_process SOCKET`) dies with its pytest process: its stdin is a pipe whose other end
only that process holds (end-of-file: it exits, as `harness.lifeline` children do), and it asks Linux for SIGKILL
when its parent dies (PR_SET_PDEATHSIG). The CLIs it forked are left running as a killed test's subprocesses would
be; the test that started one ends it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODULE = "harness.cli"

# What the server imports before it forks: every heavy library a `harness` command imports (a learned policy's
# run, a collection, a dataset check), so no child pays for them. Importing is all it does: nothing here starts a
# thread, a thread pool (torch makes its own on the first operation), a GL context or a Ray cluster.
PRELOAD = (
    "harness.cli",
    "harness.app.run_command",
    "harness.app.collect_command",
    "harness.app.dataset_command",
    "harness.app.parts",
    "harness.sim",
    "harness.sim.world",
    "torch",
    "cv2",
    "pandas",
    "pyarrow.parquet",
    "lerobot.policies.factory",
    "lerobot.policies.act.modeling_act",
    "lerobot.datasets.lerobot_dataset",
)

# What a server needs whose forks only run tests/cli_process_probe.py or a light `harness` command (`protocol new`):
# the harness's command line, nothing heavy.
LIGHT_PRELOAD = ("harness.cli",)

# Environment variables a preloaded module reads once, at import (or the interpreter at start): a request whose
# environment differs from the server's in one of them gets a real subprocess. Names, and prefixes ending in "_".
IMPORT_TIME = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH_", "OMP_", "MKL_", "OPENBLAS_", "CUDA_", "LEROBOT_",
               "MUJOCO_GL", "PYOPENGL_PLATFORM", "TMPDIR", "HOME", "LANG", "LC_", "PYTHON")
HONOURED = frozenset({"PYTHONUNBUFFERED", "PYTHONPATH", "HF_DATASETS_DISABLE_PROGRESS_BARS", "TMPDIR"})
SERVER_ENV = "HARNESS_TEST_CLI_SERVER"   # "0": every request a real subprocess (to compare, or to rule the server out)
READY_TIMEOUT_S = 300.0
CLIENT_CPU = "clients.cpu"   # beside the socket: the CPU seconds of each CLI a script's client had forked, a line each
# The commands a script under test takes from PYTHON_BIN (`harness_cli.script_env()`), and what the client forks
SCRIPT_COMMANDS = {"harness": MODULE, "lerobot-train": "lerobot.scripts.lerobot_train"}
# What scripts/coverage_experiment, latency_experiment and train_reference export on a CPU before their first command
# (one torch thread a process on two shared cores): read at import, so their server starts with it too
SCRIPT_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def import_time_names(env: Mapping[str, str]) -> set[str]:
    return {name for name in env if name not in HONOURED
            and any(name == p or (p.endswith("_") and name.startswith(p)) for p in IMPORT_TIME)}


def python_path(env: Mapping[str, str]) -> list[str]:
    """`PYTHONPATH`'s folders, resolved, this checkout first: harness comes from here either way (the tests import
    it from here, and a clean clone installs it editable from here)."""
    folders = [str(Path(entry).resolve()) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return list(dict.fromkeys([str(REPO), *folders]))


def temporary_root(env: Mapping[str, str]) -> str:
    """The temporary folder harness.scratch settles on at import (`SYSTEM_ROOT`) under `env`: TMPDIR without the
    `harness-*` scratch folders at its end. A `harness` command run in-process (`main`) points this process's TMPDIR
    at a scratch folder of its own; a CLI started after it sees the same root, and makes its own folder there."""
    path = Path(env.get("TMPDIR") or env.get("TEMP") or env.get("TMP") or "/tmp")
    while path.name.startswith("harness-") and path.parent != path:
        path = path.parent
    return str(path)


def fresh_reason(request: Mapping[str, str], server: Mapping[str, str]) -> str | None:
    """Why a CLI with environment `request` cannot be forked from a server started with `server`; None if it can."""
    differ = sorted(name for name in import_time_names(request) | import_time_names(server)
                    if request.get(name) != server.get(name))
    if differ:
        return f"read at import, and not the server's: {', '.join(differ)}"
    if python_path(request) != python_path(server):
        return "PYTHONPATH names other folders than the server's"
    if temporary_root(request) != temporary_root(server):
        return "read at import, and not the server's: TMPDIR (another temporary folder)"
    return None


# --- the wire: one request a connection --------------------------------------------------------------------------
def _send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    frame = struct.pack("!I", len(data)) + data
    sent = socket.send_fds(sock, [frame], list(fds)) if fds else sock.send(frame)
    if sent < len(frame):
        sock.sendall(frame[sent:])


def _receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors that came with it (they come with its first byte); (None, []) at end-of-file.
    Reads exactly one frame: the server's two messages (the pid, then the exit status) may already be queued."""
    fds: list[int] = []
    data = b""
    while len(data) < 4:
        if max_fds and not fds:
            more, fds, _, _ = socket.recv_fds(sock, 4 - len(data), max_fds)
        else:
            more = sock.recv(4 - len(data))
        if not more:
            for fd in fds:
                os.close(fd)
            return None, []
        data += more
    size = struct.unpack("!I", data)[0]
    body = b""
    while len(body) < size:
        more = sock.recv(size - len(body))
        if not more:
            for fd in fds:
                os.close(fd)
            return None, []
        body += more
    return json.loads(body), fds


_reported = [0.0]
_servers: list[CliServer] = []   # started and not yet closed: their scripts' CLIs are counted from their files


def _children_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reported_cpu_s() -> float:
    """CPU seconds of every server's start and of the CLIs they forked that have ended, in this process so far: the
    test process does not wait for them itself, so its RUSAGE_CHILDREN misses them (benchmarks/suite_cpu_plugin.py
    adds this). A script's CLIs (tests/cli_client.py) are included: the server writes theirs down. Less, once a
    server is closed, what reaping it added to RUSAGE_CHILDREN that had been reported already: counted once."""
    return _reported[0] + sum(server.clients_cpu_s() for server in _servers)


# --- the test's side ---------------------------------------------------------------------------------------------
class CliServer:
    """The server of one pytest process, started on the first request that needs it."""

    def __init__(self, env: Mapping[str, str] | None = None, preload: Sequence[str] = PRELOAD) -> None:
        """`env`: the environment the server starts with (default: this process's when it starts). The suite passes
        the session's, so a test that has patched the environment when it first needs the server does not leave
        its patch in every later CLI (or make every later request a real subprocess). `preload`: what it imports
        before it forks; a test of the server's own life (its death, its CPU's accounting) gives it `LIGHT_PRELOAD`
        rather than pay ~7 CPU s for imports nothing it forks uses."""
        self._base_env = dict(env) if env is not None else None
        self._preload = tuple(preload)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None
        self.env: dict[str, str] = {}
        self.started: dict[str, Any] = {}
        self.cpu_s = 0.0   # the server's start and its children's CPU, as they are reported

    @property
    def socket_path(self) -> Path:
        assert self._folder is not None
        return self._folder / "cli.sock"

    def environment(self) -> dict[str, str]:
        """The environment the server runs with (started if it is not yet): what a request is compared with."""
        with self._lock:
            if self._process is None:
                self._start()
            return self.env

    def _start(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="cli-server-"))
        base = self._base_env if self._base_env is not None else dict(os.environ)
        self.env = {**base, "PYTHONPATH": os.pathsep.join(python_path(base))}
        log = open(self._folder / "server.log", "wb")   # noqa: SIM115  (the server's, kept for a failure's message)
        with log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.cli_process", str(self.socket_path), ",".join(self._preload),
                 # Linux's parent-death signal fires when the *thread* that started the server ends: asked for only
                 # from the main thread (pytest's), which lasts the session
                 *(["--die-with-parent"] if threading.current_thread() is threading.main_thread() else [])],
                cwd=REPO, env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], READY_TIMEOUT_S)
        line = self._process.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"the CLI server did not start: {self.log_tail()}")
        self.started = json.loads(line)
        self._count(self.started["cpu_s"])
        _servers.append(self)

    def clients_cpu(self) -> list[float]:
        """CPU seconds of each CLI that scripts' clients had this server fork, and that has ended."""
        path = self._folder / CLIENT_CPU if self._folder else None
        try:
            return [float(line) for line in path.read_text().split()] if path else []
        except FileNotFoundError:
            return []

    def clients_cpu_s(self) -> float:
        return sum(self.clients_cpu())

    def client_command(self, module: str = MODULE) -> list[str]:
        """The command that has this server fork `python -m MODULE` with the arguments that follow it (the server
        started first if it is not yet: the command names its socket)."""
        self.environment()
        return [sys.executable, "-S", str(REPO / "tests" / "cli_client.py"), str(self.socket_path), module]

    def script_bin(self) -> Path:
        """A folder of `harness`, `lerobot-train` and `python` for a script's PYTHON_BIN: the first two hand their
        command to this server (tests/cli_client.py), and so does `python -m MODULE ...` (LeRobot's policy server in
        scripts/latency_experiment); any other `python` command is this interpreter."""
        self.environment()
        assert self._folder is not None
        folder = self._folder / "bin"
        if not folder.is_dir():
            folder.mkdir()
            client = shlex.join(self.client_command(MODULE)[:-1])   # then the module, then its arguments
            wrappers = {name: f'exec {client} {module} "$@"' for name, module in SCRIPT_COMMANDS.items()}
            python = (f'if [ "$1" = -m ] && [ $# -ge 2 ]; then module=$2; shift 2; exec {client} "$module" "$@"; fi'
                      f'\nexec {shlex.quote(sys.executable)} "$@"')
            for name, body in {**wrappers, "python": python}.items():
                (folder / name).write_text(f"#!/bin/sh\n{body}\n")
                (folder / name).chmod(0o755)
        return folder

    def _count(self, cpu_s: float) -> None:
        self.cpu_s += cpu_s
        _reported[0] += cpu_s

    def log_tail(self) -> str:
        path = self._folder / "server.log" if self._folder else None
        return path.read_text(errors="replace")[-3000:] if path and path.exists() else "(no log)"

    def connect(self) -> socket.socket:
        self.environment()
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"the CLI server exited ({self._process.returncode}): {self.log_tail()}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(self.socket_path))
        return sock

    def close(self) -> None:
        """End the server (its stdin closes: it exits at once) and wait for it; the CLIs it forked are not touched."""
        with self._lock:
            if self in _servers:
                _servers.remove(self)
                self._count(self.clients_cpu_s())
            if self._process is not None:
                assert self._process.stdin is not None
                self._process.stdin.close()
                waited = _children_cpu_s()
                try:
                    self._process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
                # reaped, the server brings its start and every CLI it reaped into this process's RUSAGE_CHILDREN:
                # those were counted as they were reported, so they come off here (its own serving stays counted)
                _reported[0] -= min(self.cpu_s, max(0.0, _children_cpu_s() - waited))
                if self._process.stdout is not None:
                    self._process.stdout.close()
                self._process = None
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None


class CliProcess(subprocess.Popen):  # type: ignore[type-arg]
    """A `harness` CLI forked by the server: a `subprocess.Popen` whose start is a request to the server and whose
    exit status the server sends back (the CLI is the server's child, not this process's)."""

    def __init__(self, server: CliServer, args: Sequence[str], unbuffered: bool = False, module: str = MODULE,
                 rlimits: Mapping[int, tuple[int, int]] | None = None, **popen: Any) -> None:
        for unsupported in ("preexec_fn", "pass_fds", "shell", "executable", "user", "group", "extra_groups",
                            "umask"):
            if popen.get(unsupported):
                raise TypeError(f"CliProcess does not take {unsupported}=")
        self._server = server
        self._unbuffered = unbuffered
        self._cli_args = [str(a) for a in args]
        self._module = module   # another module than the CLI: tests/e2e/test_cli_process.py's probe
        self._rlimits = [[which, *limits] for which, limits in (rlimits or {}).items()]
        self._status: socket.socket | None = None
        self.cpu_s = 0.0
        command = [sys.executable, *(["-u"] if unbuffered else []), "-m", module, *self._cli_args]
        super().__init__(command, **popen)

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any, pass_fds: Any,
                       cwd: Any, env: Any, startupinfo: Any, creationflags: Any, shell: Any,
                       p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       restore_signals: Any, gid: Any, gids: Any, uid: Any, umask: Any, start_new_session: bool,
                       process_group: int | None) -> None:
        folder = os.fspath(cwd) if cwd is not None else os.getcwd()
        if not os.path.isdir(folder):   # as Popen raises it, in the test rather than in the child
            raise FileNotFoundError(2, "No such file or directory", folder)
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
        request = {"module": self._module, "argv": self._cli_args, "cwd": os.path.abspath(folder),
                   "env": {os.fsdecode(k): os.fsdecode(v) for k, v in (env if env is not None else os.environ).items()},
                   "unbuffered": self._unbuffered, "new_session": bool(start_new_session), "rlimits": self._rlimits,
                   "process_group": process_group}
        try:
            sock = self._server.connect()
            _send(sock, request, fds)
            reply, _ = _receive(sock)
            if reply is None or "pid" not in reply:
                sock.close()
                raise RuntimeError(f"the CLI server did not fork: {reply}; {self._server.log_tail()}")
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        self._status = sock
        self.pid = reply["pid"]
        self._child_created = True

    def _exit_status(self, timeout: float | None) -> int | None:
        """The CLI's exit status if it arrives within `timeout` seconds (None: wait as long as it takes)."""
        with self._waitpid_lock:
            if self.returncode is not None:
                return self.returncode
            assert self._status is not None
            ready, _, _ = select.select([self._status], [], [], timeout)
            if not ready:
                return None
            reply, _ = _receive(self._status)
            self._status.close()
            self._status = None
            if reply is None:
                raise RuntimeError(f"the CLI server went away before pid {self.pid} ended: {self._server.log_tail()}")
            self.cpu_s = reply["cpu_s"]
            self._server._count(self.cpu_s)
            self.returncode = reply["returncode"]
            return self.returncode

    def _internal_poll(self, _deadstate: Any = None, _waitpid: Any = None, _WNOHANG: Any = None,
                       _ECHILD: Any = None) -> int | None:
        if self.returncode is None and self._status is None:
            return None
        if self.returncode is None and self._status is not None and self._status.fileno() < 0:
            # Collected unwaited in a reference cycle: Popen.__del__ put it on subprocess._active, whose every later
            # Popen polls it, but its status socket was finalised in the same collection, so no status can come.
            # As Popen does for a child it cannot wait for: the dead state (which drops it from _active).
            self.returncode = _deadstate
            return _deadstate
        return self._exit_status(0)

    def _wait(self, timeout: float | None) -> int:
        code = self._exit_status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        return code


class HarnessCli:
    """Starts `python -m harness.cli ARGS` for a test: forked from the server where isolation allows, a real
    subprocess where it does not (see the module's docstring). `popen` takes `subprocess.Popen`'s keyword arguments
    and `run` `subprocess.run`'s; `fresh=True` asks for a real subprocess; `last_fresh_reason` says why the last one
    was (None: it was forked)."""

    def __init__(self, server: CliServer) -> None:
        """The scripts' server, when one is needed, preloads what `server` does."""
        self.server = server
        self.last_fresh_reason: str | None = None
        self._script_server: CliServer | None = None

    def script_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment to run a script under test with (scripts/coverage_experiment, latency_experiment,
        train_reference: they take their commands from PYTHON_BIN): `env` (default: this process's) with PYTHON_BIN
        a folder whose `harness` and `lerobot-train` are forked by a server of the scripts' own (tests/cli_client.py),
        and the one torch thread the scripts export on a CPU (read at import, so that server starts with it too)."""
        base = {**(os.environ if env is None else env), **SCRIPT_THREADS}
        base["PYTHONPATH"] = os.pathsep.join(python_path(base))   # this checkout's harness, as the server has it
        if os.environ.get(SERVER_ENV) == "0":
            return {**base, "PYTHON_BIN": str(Path(sys.executable).parent)}
        return {**base, "PYTHON_BIN": str(self.script_server.script_bin())}

    @property
    def script_server(self) -> CliServer:
        """The scripts' server: the session's environment with SCRIPT_THREADS (created here, started on first use).
        Where the session's environment has them already (tests/conftest.py sets one OpenMP thread unless the shell
        sets another count), that is the session's own server: a second would import the same ~7 CPU s again."""
        with self.server._lock:
            if self._script_server is None:
                base = dict(self.server._base_env or os.environ)
                env = {**base, **SCRIPT_THREADS}
                self._script_server = self.server if env == base else CliServer(env=env, preload=self.server._preload)
            return self._script_server

    def close(self) -> None:
        for server in {self.server, self._script_server}:
            if server is not None:
                server.close()

    @staticmethod
    def command(args: Sequence[str], unbuffered: bool = False, module: str = MODULE) -> list[str]:
        return [sys.executable, *(["-u"] if unbuffered else []), "-m", module, *map(str, args)]

    def why_fresh(self, env: Mapping[str, str] | None, fresh: bool = False) -> str | None:
        if fresh:
            return "asked for a fresh interpreter"
        if os.environ.get(SERVER_ENV) == "0":
            return f"{SERVER_ENV}=0"
        return fresh_reason(os.environ if env is None else env, self.server.environment())

    def popen(self, args: Sequence[str], *, unbuffered: bool = False, fresh: bool = False, module: str = MODULE,
              rlimits: Mapping[int, tuple[int, int]] | None = None,
              **popen: Any) -> subprocess.Popen:  # type: ignore[type-arg]
        """`subprocess.Popen` of `python [-u] -m MODULE ARGS` (`module`: the CLI, or a probe that tests the server);
        `rlimits`: `resource.setrlimit`'s limits the process starts with (a file-size limit for a full disk), where a
        subprocess would take a `preexec_fn`, which cannot cross to the server."""
        self.last_fresh_reason = self.why_fresh(popen.get("env"), fresh)
        if self.last_fresh_reason is not None:
            if rlimits:
                popen["preexec_fn"] = functools.partial(_set_limits, dict(rlimits))
            # this checkout on the path, as the server has it: a probe under tests/ (and this tree's harness, not an
            # installed one) must be found from any folder, not only where pytest was started with PYTHONPATH set
            env = dict(os.environ if popen.get("env") is None else popen["env"])
            popen["env"] = {**env, "PYTHONPATH": os.pathsep.join(python_path(env))}
            return subprocess.Popen(self.command(args, unbuffered, module), **popen)
        return CliProcess(self.server, args, unbuffered=unbuffered, module=module, rlimits=rlimits, **popen)

    def run(self, args: Sequence[str], *, input: Any = None, capture_output: bool = False,
            timeout: float | None = None, check: bool = False, **popen: Any) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        """`subprocess.run` of the CLI (its body, over `popen`, which takes the other keyword arguments)."""
        if input is not None:
            popen["stdin"] = subprocess.PIPE
        if capture_output:
            popen["stdout"] = popen["stderr"] = subprocess.PIPE
        with self.popen(args, **popen) as process:
            try:
                stdout, stderr = process.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                process.kill()
                exc.stdout, exc.stderr = process.communicate()
                raise
            except BaseException:
                process.kill()
                raise
            code = process.poll()
            assert code is not None
            if check and code:
                raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(process.args, code, stdout, stderr)


def _set_limits(limits: dict[int, tuple[int, int]]) -> None:
    import resource

    for which, values in limits.items():
        resource.setrlimit(which, values)


# --- the server's side -------------------------------------------------------------------------------------------
def _die_with_parent() -> None:
    """SIGKILL when the pytest process dies (Linux); the stdin lifeline covers the rest."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getppid()
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
        if os.getppid() != parent:   # it died before the request took effect
            os._exit(0)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def serve(socket_path: str, preload: Sequence[str], die_with_parent: bool) -> None:
    if die_with_parent:
        _die_with_parent()
    environment = dict(os.environ)   # as started: what a script's client request is compared with (fresh_reason)
    client_cpu = Path(socket_path).with_name(CLIENT_CPU)
    import importlib
    import resource

    for name in preload:
        importlib.import_module(name)
    if threading.active_count() != 1:
        raise RuntimeError(f"a preloaded module started threads: {threading.enumerate()}")
    torch = sys.modules.get("torch")   # not preloaded by a light server
    if torch is not None and torch.cuda.is_initialized():   # a forked child could not use CUDA (lerobot-train on a GPU)
        raise RuntimeError("a preloaded module initialised CUDA")
    import gc

    gc.collect()
    gc.freeze()   # the preloaded half a million objects out of every child's collections: a full collection would
    #               walk them all, and touching them copies the pages a fork shares (Python's own advice for forks)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    sys.stdout.write(json.dumps({"pid": os.getpid(), "cpu_s": usage.ru_utime + usage.ru_stime,
                                 "threads": _threads(), "modules": len(sys.modules)}) + "\n")
    sys.stdout.flush()
    children: dict[int, tuple[int, socket.socket, bool]] = {}   # pidfd -> (pid, the request's connection, client?)
    while True:
        ready, _, _ = select.select([listener, sys.stdin.fileno(), *children], [], [])
        if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 4096):
            listener.close()
            return   # the pytest process closed the lifeline (or died)
        if listener in ready:
            conn, _ = listener.accept()
            request, fds = _receive(conn, max_fds=3)
            refused = request is not None and request.get("client") and fresh_reason(request["env"], environment)
            if request is None or len(fds) != 3 or refused:
                if refused:   # tests/cli_client.py runs the real command instead; the log says why
                    print(f"refused {request['module']} {request['argv'][:2]}: {refused}", file=sys.stderr, flush=True)
                    with contextlib.suppress(OSError):
                        _send(conn, {"refused": refused})
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            with warnings.catch_warnings():   # the threads the preloaded libraries start at import (see PRELOAD)
                warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                _child(request, fds, [listener, conn, *(c for _, c, _ in children.values())], list(children))
            for fd in fds:
                os.close(fd)
            _send(conn, {"pid": pid})
            children[os.pidfd_open(pid)] = (pid, conn, bool(request.get("client")))
        for pidfd in [fd for fd in ready if isinstance(fd, int) and fd in children]:
            pid, conn, client = children.pop(pidfd)
            _, status, usage = os.wait4(pid, 0)
            os.close(pidfd)
            if client:   # the test does not hear from a script's client: its CPU is counted from this file
                with open(client_cpu, "a") as record:
                    record.write(f"{usage.ru_utime + usage.ru_stime}\n")
            with contextlib.suppress(OSError):
                _send(conn, {"returncode": os.waitstatus_to_exitcode(status),
                             "cpu_s": usage.ru_utime + usage.ru_stime})
            conn.close()


def _stdio(fd: int, unbuffered: bool, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """`sys.stdin`/`stdout`/`stderr` over `fd` as a fresh interpreter makes them (Python/pylifecycle.c)."""
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    buffer: Any = raw if unbuffered and fd != 0 else (io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw))
    line = not unbuffered and (fd == 2 or raw.isatty())
    return io.TextIOWrapper(buffer, encoding=like.encoding, errors=like.errors, newline="\n", line_buffering=line,
                            write_through=unbuffered)


_kept: list[Any] = []


def _child(request: dict[str, Any], fds: list[int], sockets: list[socket.socket], pidfds: list[int]) -> None:
    """In the forked child: become `python -m harness.cli ARGV` in the request's folder, environment and streams.
    Never returns: it ends the process, as the interpreter would."""
    code = 1
    try:
        for sock in sockets:
            sock.close()
        for fd in pidfds:
            os.close(fd)
        if request["new_session"]:
            os.setsid()
        elif request["process_group"] is not None and request["process_group"] >= 0:
            os.setpgid(0, request["process_group"])
        import resource

        for which, soft, hard in request["rlimits"]:
            resource.setrlimit(which, (soft, hard))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None   # read again from TMPDIR, as a fresh interpreter does (its root is the server's)
        unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
        _kept.extend([sys.stdin, sys.stdout, sys.stderr])   # the server's: never flushed or closed into these fds
        sys.stdin = sys.__stdin__ = _stdio(0, unbuffered, sys.__stdin__)  # type: ignore[arg-type]
        sys.stdout = sys.__stdout__ = _stdio(1, unbuffered, sys.__stdout__)  # type: ignore[arg-type]
        sys.stderr = sys.__stderr__ = _stdio(2, unbuffered, sys.__stderr__)  # type: ignore[arg-type]
        sys.path[0] = request["cwd"]   # `python -m` puts the working folder first
        sys.argv = ["-m", *request["argv"]]
        module = request["module"]
        sys.orig_argv = [sys.executable, *(["-u"] if request["unbuffered"] else []), "-m", module, *request["argv"]]
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()   # a fresh process draws its own; Python's `random` reseeds at fork
        import runpy
        import types

        sys.modules["__main__"] = types.ModuleType("__main__")
        sys.modules.pop(module, None)   # as in a fresh `python -m`: the module runs as __main__, and only there
        try:
            runpy._run_module_as_main(module, True)  # type: ignore[attr-defined]  # what `python -m` calls
            code = 0
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            import traceback

            traceback.print_exc()
            code = -signal.SIGINT
        except BaseException:   # the interpreter's last word: a traceback and exit 1
            import traceback

            traceback.print_exc()
            code = 1
        _finish()
    except BaseException:   # the set-up failed: say so where the test reads stderr
        import traceback

        os.write(2, traceback.format_exc().encode(errors="replace"))
        code = 1
    finally:
        if code == -signal.SIGINT:   # as CPython ends on an uncaught KeyboardInterrupt: by the signal itself
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)


def _finish() -> None:
    """A fresh interpreter's shutdown: non-daemon threads joined, atexit handlers, streams flushed."""
    import atexit

    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2].split(","), "--die-with-parent" in sys.argv[3:])
