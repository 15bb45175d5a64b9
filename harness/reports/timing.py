"""Where a run's control-loop time went (policy, robot I/O, outside the loop, waiting), and what that
means on the robot it ran on.

A report that says "missed 98% of deadlines, worst p95 policy latency 1480 ms" points a reader at the
policy; when the time went to the simulator rendering two cameras on a busy CPU, that is the wrong
thing to blame, and in a lock-step simulation the misses did not change what the arm did at all.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import Enum

from harness.models.run_settings import RobotKind
from harness.reports.trials import TrialRow


class Culprit(Enum):
    NONE = "none"              # no step missed its deadline
    ROBOT_IO = "robot I/O"     # reading and commanding the robot alone takes longer than the budget
    POLICY = "policy"          # inference alone takes longer than the budget
    BOTH = "both"              # neither alone, together they do
    SLOW_TAIL = "slow tail"    # typical steps fit; the misses are occasional slow steps


@dataclass(frozen=True)
class TimeSplit:
    budget_ms: float
    policy_p50: float          # median over trials of each trial's p50
    policy_p95: float          # the worst trial's p95
    io_p50: float
    io_p95: float
    busy_mean: float | None    # policy + robot I/O per step, mean over trials
    wall_per_step: float | None
    missed: int
    steps: int
    lock_step: bool            # the simulator, which advances only when an action arrives

    @property
    def culprit(self) -> Culprit:
        if self.missed == 0:
            return Culprit.NONE
        if self.io_p50 > self.budget_ms and self.policy_p50 <= self.io_p50:
            return Culprit.ROBOT_IO
        if self.policy_p50 > self.budget_ms and self.io_p50 <= self.policy_p50:
            return Culprit.POLICY
        if self.policy_p50 + self.io_p50 > self.budget_ms:
            return Culprit.BOTH
        return Culprit.SLOW_TAIL


def time_split(rows: list[TrialRow], fps: float, robot: RobotKind) -> TimeSplit | None:
    timed = [r for r in rows if r.label != "pending" and r.policy_ms_p50 is not None]
    if not timed:
        return None
    busy = [r.busy_ms_mean for r in timed if r.busy_ms_mean is not None]
    wall = [r.wall_ms_per_step for r in timed if r.wall_ms_per_step is not None]
    return TimeSplit(
        budget_ms=1000 / fps,
        policy_p50=statistics.median(r.policy_ms_p50 or 0.0 for r in timed),
        policy_p95=max(r.policy_ms_p95 or 0.0 for r in timed),
        io_p50=statistics.median(r.io_ms_p50 or 0.0 for r in timed),
        io_p95=max(r.io_ms_p95 or 0.0 for r in timed),
        busy_mean=statistics.mean(busy) if busy else None,
        wall_per_step=statistics.mean(wall) if wall else None,
        missed=sum(r.missed_deadlines or 0 for r in timed),
        steps=sum(r.steps or 0 for r in timed),
        lock_step=RobotKind(robot).simulated,
    )


def timing_paragraphs(t: TimeSplit) -> list[str]:
    """The timing section's text: the split, the one thing to blame, and what the figures mean."""
    io_what = " (in the simulator: rendering the cameras, and physics)" if t.lock_step else ""
    share = t.missed / max(t.steps, 1)
    texts = [f"Missed control deadlines: {t.missed} of {t.steps} steps ({100 * share:.1f}%), against a "
             f"{t.budget_ms:.1f} ms budget per step. Typical step (median over trials of each trial's p50): policy "
             f"{t.policy_p50:.1f} ms, robot I/O {t.io_p50:.1f} ms{io_what}; worst trial's p95: policy "
             f"{t.policy_p95:.1f} ms, robot I/O {t.io_p95:.1f} ms."]
    blame = {
        Culprit.NONE: "Every step fit its budget.",
        Culprit.ROBOT_IO: (f"Robot I/O alone (p50 {t.io_p50:.1f} ms) exceeds the budget, so the misses come from "
                           "reading and commanding the robot"
                           + (", here the simulator rendering camera frames on this machine's CPU," if t.lock_step
                              else "") + f" not from the policy (p50 {t.policy_p50:.1f} ms)."),
        Culprit.POLICY: (f"The policy alone (p50 {t.policy_p50:.1f} ms) exceeds the budget: inference is what "
                         f"misses the deadlines (robot I/O p50 {t.io_p50:.1f} ms)."),
        Culprit.BOTH: (f"Neither alone exceeds the budget, together they do: policy {t.policy_p50:.1f} ms + robot "
                       f"I/O {t.io_p50:.1f} ms per typical step; the larger share is "
                       f"{'the policy' if t.policy_p50 >= t.io_p50 else 'robot I/O'}."),
        Culprit.SLOW_TAIL: ("Typical steps fit the budget; the misses are the slow tail (worst p95: policy "
                            f"{t.policy_p95:.1f} ms, robot I/O {t.io_p95:.1f} ms)."),
    }[t.culprit]
    texts.append(blame)
    if t.policy_p95 > max(5 * t.policy_p50, t.budget_ms):
        texts.append(f"The policy's slowest steps take {t.policy_p95 / max(t.policy_p50, 0.01):.0f} times its "
                     "typical one: a policy that predicts action chunks computes a new chunk only every few steps, "
                     "and otherwise such spikes mean the machine was busy with other work.")
    if t.wall_per_step is not None and t.busy_mean is not None and t.wall_per_step > t.busy_mean:
        outside = t.wall_per_step - t.busy_mean
        texts.append(f"Per step the run took {t.wall_per_step:.1f} ms of wall time on average, {t.busy_mean:.1f} ms "
                     f"of it in the policy and robot I/O; the other {outside:.1f} ms went outside the measured loop: "
                     "evidence frames, dataset recording, moving to the start pose and scoring"
                     + ("." if t.lock_step else ", and waiting for the next control tick."))
    if t.lock_step:
        texts.append("This run is a lock-step simulation: the simulator advances only when an action arrives, so "
                     "missed deadlines did not change what the arm did, and these loop figures are this machine's "
                     "rendering and inference times, not those of a real arm (whose cameras deliver frames "
                     "without rendering).")
    return texts
