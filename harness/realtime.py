"""Real-time scheduling for the paced control loop of a real arm.

On a busy machine a normal thread that wakes for its next 30 Hz step waits for a core: measured over
the emulated bus with both simulated cameras rendering, steps started up to 24 ms late (p99). A thread
under SCHED_FIFO runs as soon as it wakes (p99 0.01 ms in the same measurement), which is what
robot control stacks do for their control loops. Only the calling thread is raised, and with
SCHED_RESET_ON_FORK, so the threads and processes it starts (torch's workers, the evidence writer)
stay at normal priority. Where the OS refuses (no CAP_SYS_NICE, no rtprio limit), the loop runs as
before and the reason is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

LOOP_PRIORITY = 10   # low among real-time priorities: above every normal thread, below kernel IRQ threads
# The emulated devices (servo bus, camera poses) stand in for hardware, which answers whatever the host
# does: above the loop, so a loop thread that spins while it waits for a reply (scservo_sdk polls the
# port) can never hold the emulator's thread off the core it woke on. With equal priorities it did, for
# the whole 50 ms reply window, and LeRobot reported a servo missing.
DEVICE_PRIORITY = 20
# The simulated cameras (`emulate-bus --sim`, `harness rehearse`) stand in for cameras, which deliver frames
# whatever the host does: their rendering and delivery run above every normal thread (a policy's inference
# included), below the loop and the servo bus. A desk's cameras cost the host nothing; these cost a core, which
# under load comes out of the policy's time (slower inference, as a slower machine), never out of the frames'
# age, whose limit voids a real arm's trial.
CAMERA_PRIORITY = 5


@dataclass(frozen=True)
class LoopPriority:
    realtime: bool
    why_not: str | None = None


NOT_ASKED = LoopPriority(False, "not asked for")


@contextmanager
def realtime_thread(enabled: bool = True, priority: int = LOOP_PRIORITY) -> Iterator[LoopPriority]:
    """Run the calling thread under SCHED_FIFO for the duration of the block, then restore it."""
    if not enabled:
        yield NOT_ASKED
        return
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_FIFO"):
        yield LoopPriority(False, "this OS has no POSIX real-time scheduling")
        return
    policy_before, param_before = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0), os.sched_param(priority))
    except PermissionError:
        yield LoopPriority(False, "not permitted: give the user an rtprio limit (/etc/security/limits.conf) "
                                  "or the interpreter CAP_SYS_NICE")
        return
    try:
        yield LoopPriority(True)
    finally:
        os.sched_setscheduler(0, policy_before, param_before)
