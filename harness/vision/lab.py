"""RGB to Lab through OpenCV, with OpenCV's conversion tables built once per process, under a lock.

OpenCV builds its Lab tables at a process's first RGB to Lab conversion: about 80 ms of CPU, 0.3-0.9 s of wall
time on a loaded two-core machine, which the first cube prompt of a real arm's run waited for (the placement
guide converts the empty-scene references right after the operator has cleared the table; issue 40). A run
builds them on a thread of its own while the check screen waits (`build_tables_in_background`). OpenCV guards
that build with a plain flag, not a lock, so a conversion on another thread meanwhile could read half-built
tables: every conversion here waits for a build in progress.
"""

from __future__ import annotations

import threading

import cv2
import numpy as np

_lock = threading.Lock()
_built = False


def build_tables() -> None:
    """Have OpenCV build its Lab tables now (once per process; a later call returns at once)."""
    global _built
    if _built:
        return
    with _lock:
        if not _built:
            cv2.cvtColor(np.zeros((1, 1, 3), np.uint8), cv2.COLOR_RGB2LAB)
            _built = True


def tables_built() -> bool:
    return _built


def build_tables_in_background() -> threading.Thread:
    """Build the tables on a daemon thread (started here), so the first conversion that counts does not."""
    thread = threading.Thread(target=build_tables, name="harness-lab-tables", daemon=True)
    thread.start()
    return thread


def rgb_to_lab(frame: np.ndarray) -> np.ndarray:
    """`cv2.cvtColor(frame, cv2.COLOR_RGB2LAB)`, once the tables are built."""
    build_tables()
    lab: np.ndarray = cv2.cvtColor(frame, cv2.COLOR_RGB2LAB)
    return lab
