"""Children that die with their parent, however it dies (SIGKILL included).

Why: a process the harness starts (an evidence-writer lane, LeRobot's policy server for a sweep cell)
must not outlive the run. A child learns of its parent's death from a pipe: it holds the read end,
only the parent holds the write end, and the read returns end-of-file the moment the kernel closes
the parent's descriptors. That works on every platform and for every way a process ends, unlike
Linux's PR_SET_PDEATHSIG, which fires when the *thread* that started the child exits. A thread in the
child waits on that end and ends the child at once with `os._exit` (nothing to flush: a child's
unfinished work is in a `.partial` folder or a scratch folder that the next start removes).

`multiprocessing` children already hold such a pipe (`parent_process().sentinel`); a subprocess is
given the read end on its stdin (`subprocess.PIPE`) and calls `exit_when_closed(0)`.
"""

from __future__ import annotations

import os
import threading
from multiprocessing.connection import wait

ORPHANED_EXIT = 75   # what a child that outlived its parent exits with (nobody waits for it: for `ps` and logs)


def _wait_then_exit(fd: int) -> None:
    try:
        wait([fd])
        while os.read(fd, 65536):   # a parent may write to the lifeline; only end-of-file means it is gone
            wait([fd])
    except OSError:
        pass
    os._exit(ORPHANED_EXIT)


def exit_when_closed(fd: int) -> threading.Thread:
    """End this process as soon as `fd` (the read end of the parent's lifeline) reads end-of-file."""
    thread = threading.Thread(target=_wait_then_exit, args=(fd,), name="lifeline", daemon=True)
    thread.start()
    return thread


def exit_with_multiprocessing_parent() -> threading.Thread | None:
    """In a `multiprocessing` child: end this process when its parent process ends (its sentinel closes)."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return None
    return exit_when_closed(parent.sentinel)
