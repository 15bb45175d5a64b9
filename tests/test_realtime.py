"""The real arm's paced loop asks for real-time scheduling for itself only, and gives it back."""

from __future__ import annotations

import os
import threading

import pytest

from harness.realtime import realtime_thread

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="POSIX real-time scheduling only")


def _policy() -> int:
    return os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)


def test_only_the_loop_thread_is_raised_and_it_is_restored_after() -> None:
    seen: dict[str, int] = {}

    def started_inside() -> None:          # torch's workers, the evidence writer: started by the loop
        seen["child"] = _policy()

    with realtime_thread() as priority:
        if not priority.realtime:
            assert priority.why_not and "not permitted" in priority.why_not
            return
        seen["loop"] = _policy()
        child = threading.Thread(target=started_inside)
        child.start()
        child.join()
    assert seen == {"loop": os.SCHED_FIFO, "child": os.SCHED_OTHER}
    assert _policy() == os.SCHED_OTHER


def test_an_unpaced_loop_is_left_alone() -> None:
    with realtime_thread(enabled=False) as priority:
        assert not priority.realtime and _policy() == os.SCHED_OTHER
