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
    """Restored to what it was (SCHED_OTHER for a command; the test suite's main stream runs at SCHED_IDLE); what the
    loop starts gets the normal policy, not the loop's."""
    before = _policy()
    seen: dict[str, int] = {}

    def started_inside() -> None:          # torch's workers, the evidence writer: started by the loop
        seen["child"] = _policy()

    with realtime_thread() as priority:
        if not priority.realtime:
            pytest.skip(f"this OS refuses real-time priority here ({priority.why_not}); the fallback is "
                        "tested on its own below")
        seen["loop"] = _policy()
        child = threading.Thread(target=started_inside)
        child.start()
        child.join()
    assert seen == {"loop": os.SCHED_FIFO, "child": os.SCHED_OTHER}
    assert _policy() == before


def test_an_unpaced_loop_is_left_alone() -> None:
    before = _policy()
    with realtime_thread(enabled=False) as priority:
        assert not priority.realtime and _policy() == before


def test_where_the_os_refuses_the_loop_runs_as_before_and_says_why(monkeypatch) -> None:
    """No CAP_SYS_NICE, no rtprio limit: the loop keeps its normal scheduling and the reason names the fix."""
    before = _policy()
    asked = []

    def refuse(pid: int, policy: int, param: os.sched_param) -> None:
        asked.append(policy & ~getattr(os, "SCHED_RESET_ON_FORK", 0))
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with realtime_thread() as priority:
        assert asked == [os.SCHED_FIFO]
        assert not priority.realtime and _policy() == before
        assert "not permitted" in priority.why_not and "rtprio" in priority.why_not
    assert _policy() == before
