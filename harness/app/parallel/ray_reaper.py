"""A watchman that ends this run's Ray processes when the driver dies, however it dies.

Why: when the driver is SIGKILLed, Ray's GCS server, raylet and workers follow it within seconds
(fate sharing), but its dashboard and runtime-env agents notice the raylet's death and then spend
a hard-coded 60 s trying to tell the dead GCS server about it before exiting, one still listening
on a port. Nothing in Ray 2.60 shortens that. So `start_ray` starts this small process first; it
holds the read end of a pipe whose write end only the driver has. While the driver lives, it
notes the driver's descendants (each by pid and start time, so a reused pid is never touched);
once the pipe reads end-of-file (the driver exited, cleanly or not), it terminates every noted
process still alive, then kills what ignored the request within two seconds.

Run as `python -m harness.app.parallel.ray_reaper DRIVER_PID` with the pipe on stdin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

import psutil

POLL_S = 0.5          # how often the driver's family is noted while it lives
GRACE_S = 2.0         # between SIGTERM and SIGKILL


def start(driver_pid: int | None = None) -> subprocess.Popen[bytes]:
    """Start the watchman for `driver_pid` (this process by default); it lives until this process does."""
    return subprocess.Popen([sys.executable, "-m", "harness.app.parallel.ray_reaper", str(driver_pid or os.getpid())],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)   # out of the terminal's group: Ctrl-C reaches the driver only


def _family(driver: psutil.Process, me: int) -> dict[int, psutil.Process]:
    try:
        return {p.pid: p for p in driver.children(recursive=True) if p.pid != me}
    except psutil.Error:
        return {}


def watch(driver_pid: int, pipe_fd: int = 0) -> int:
    """Note the driver's descendants until `pipe_fd` reads end-of-file, then end those still alive."""
    me = os.getpid()
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        return 0
    noted: dict[int, psutil.Process] = {}
    closed = threading.Event()

    def until_end_of_file() -> None:   # a blocking read in a thread: Windows' select() takes no pipe
        with contextlib.suppress(OSError):
            while os.read(pipe_fd, 4096):
                pass
        closed.set()

    threading.Thread(target=until_end_of_file, name="driver-pipe", daemon=True).start()
    while not closed.is_set():
        noted.update(_family(driver, me))
        closed.wait(POLL_S)
    alive = [p for p in noted.values() if p.is_running()]   # is_running compares start times: no reused pid
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, still = psutil.wait_procs(alive, timeout=GRACE_S)
    for process in still:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(watch(int(sys.argv[1])))
