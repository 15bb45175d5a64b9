"""A command that a shell script under test runs in place of `harness` or `lerobot-train`: it has the e2e test's CLI
server (tests/cli_process.py) fork the command, so each of a script's commands costs its own work, not 3-10 CPU
seconds of importing torch, LeRobot and transformers again (scripts/coverage_experiment calls `harness` 15 times and
`lerobot-train` twice).

    python -S tests/cli_client.py SOCKET MODULE [ARGS...]     # what `harness_cli.script_env()`'s wrappers run

It stands where the real command would, so the script sees what it would see: the client hands the server its argv,
folder, environment and its own stdin, stdout and stderr (the descriptors themselves: a pipe into `tee`, a
redirection to a file, a terminal), passes the signals a shell or a test sends it (SIGINT, SIGTERM, SIGHUP) on to
the forked CLI, and ends as the CLI ended: its exit status, or killed by the same signal (a shell reads 128 + n).
Where the server cannot fork the command with a subprocess's isolation (`fresh_reason`: an environment variable
read at import that differs from the server's), or the server is gone, or HARNESS_TEST_CLI_SERVER=0, it becomes the
real command (`exec python -m MODULE`), so a script runs the same either way, only slower.

Not passed on: SIGKILL (it ends the client alone, and the CLI runs on, as a killed wrapper's child would) and
signals sent to the client's process group (the CLI is in the server's group: the client forwards what it gets).
Stdlib only, started with `-S`: the client's own start costs tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys

if __package__ in (None, ""):   # run by path: the checkout's tests package, for the wire shared with the server
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from tests.cli_process import SERVER_ENV, _receive, _send, python_path

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def become_real(module: str, args: list[str], env: dict[str, str]) -> None:
    """Replace this process by `python -m MODULE ARGS`, this checkout on the path (as the server has it)."""
    for signum in FORWARDED:
        signal.signal(signum, signal.SIG_DFL)
    os.execve(sys.executable, [sys.executable, "-m", module, *args],
              {**env, "PYTHONPATH": os.pathsep.join(python_path(env))})


def _standard_fds() -> list[int]:
    """Descriptors 0, 1 and 2 to hand over; a closed one is /dev/null, as the child would find nothing there."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY))
    return fds


def end_as(code: int) -> None:
    """Exit as the forked CLI did: its status, or by its signal (128 + n if the signal does not end this process)."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        os._exit(128 - code)
    os._exit(code & 0xFF)


def main(argv: list[str]) -> None:
    socket_path, module, *args = argv
    env = dict(os.environ)
    if env.get(SERVER_ENV) == "0":
        become_real(module, args, env)
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):   # it has ended: its status is on its way
                os.kill(child[0], signum)
        else:
            pending.append(signum)

    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:   # ignored (bash's `&` ignores SIGINT): left so, as in Python
            signal.signal(signum, forward)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
        _send(sock, {"module": module, "argv": args, "cwd": os.getcwd(), "env": env, "unbuffered": False,
                     "new_session": False, "rlimits": [], "process_group": None, "client": True}, _standard_fds())
        reply, _ = _receive(sock)
    except OSError:
        reply = None
    if reply is None or "pid" not in reply:   # refused (and why), or no server: the real command
        sock.close()
        if pending:   # a signal that came before the command started ends the client as it would have the command
            end_as(-pending[0])
        become_real(module, args, env)
        return
    child.append(reply["pid"])
    for early in pending:
        forward(early, None)
    status, _ = _receive(sock)   # interrupted by a forwarded signal, the read carries on (PEP 475)
    if status is None:
        os.write(2, f"cli_client: the test's CLI server went away before pid {child[0]} ended\n".encode())
        os._exit(1)
    end_as(status["returncode"])


if __name__ == "__main__":
    main(sys.argv[1:])
