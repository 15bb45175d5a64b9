"""`--workers auto`: how many Ray workers make a simulated run fastest, from a model of its costs.

Why a model: on two cores `--workers 2` lost to a serial run (Ray's start-up and each worker's set-up,
about 10 s, against trials that already kept both cores busy with the writer's lanes). Whether
parallel wins depends on the cores, the trials left and what one trial costs, so the choice is
computed, never guessed:

    serial:     T(1) = N * w
    W workers:  T(W) = S + W * s + N / min(W / w, K / C, 1 / d)

N trials, K cores, w one trial's wall time alone, C its CPU seconds (loop and writer lanes), S Ray's
start-up, s one worker's set-up (its own simulator, policy, writer lanes; paid once per run), d the
driver's recording cost per trial (evidence written, scoresheet appended: serial, in trial order).
The constants are measured on the simulated arm with the expert (`benchmarks/parallel_bench.py`,
docs/benchmarks.md); `auto` picks the W with the smallest T(W), which is 1 (serial, no Ray) whenever
parallel would not win.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.run.evidence import VideoMode


@dataclass(frozen=True)
class TrialCosts:
    wall_s: float        # w: one trial alone, writer lanes included
    cpu_s: float         # C: CPU seconds per trial, every process
    ray_start_s: float = 6.0     # S
    worker_setup_s: float = 4.0  # s, per worker (they start in parallel only as far as cores allow)
    record_s: float = 0.03       # d


# measured on the 2-core machine of docs/benchmarks.md (expert on the simulated arm, randomized protocol)
MEASURED = {
    VideoMode.NONE: TrialCosts(wall_s=0.45, cpu_s=0.55),   # 0.28 CPU s steady + start-up share (sim_bench)
    VideoMode.FAILURES: TrialCosts(wall_s=0.45, cpu_s=0.55),   # the expert rarely fails
    VideoMode.ALL: TrialCosts(wall_s=2.2, cpu_s=4.2),
}


def predicted_s(workers: int, trials: int, cores: int, costs: TrialCosts) -> float:
    """T(W): the run's predicted wall time with `workers` Ray workers (1: the serial engine, no Ray)."""
    if workers <= 1:
        return trials * costs.wall_s
    setup = costs.ray_start_s + costs.worker_setup_s * workers / min(workers, cores)
    rate = min(workers / costs.wall_s, cores / costs.cpu_s, 1 / costs.record_s)
    return setup + trials / rate


def auto_workers(trials: int, cores: int | None = None, mode: VideoMode = VideoMode.FAILURES,
                 costs: TrialCosts | None = None, most: int = 256) -> int:
    """The worker count with the smallest predicted wall time; 1 (serial) unless parallel wins."""
    cores = cores or _cores()
    costs = costs or MEASURED[mode]
    candidates = range(1, max(1, min(trials, most, 2 * cores)) + 1)
    return min(candidates, key=lambda w: (predicted_s(w, trials, cores, costs), w))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1
