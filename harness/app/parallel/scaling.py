"""`--workers auto`: how many workers make a simulated run fastest, from a model of its costs.

Why a model: whether parallel wins depends on the cores, the trials left and what one trial costs, so
the choice is computed, never guessed. A parallel run starts its first trial as soon as a serial run
would (the driver is worker 1), while Ray and the other W-1 workers start beside it; they join when
ready. So parallel loses to serial only through the CPU that Ray's start-up and the workers' set-up
take from the driver's trials, and wins once enough trials are left to run on the cores it adds:

    serial:     T(1) = N * w
    W workers:  T(W) = max(R + (N - R / w) / rate,  (N * C + X) / K)     (T(1) when R / w >= N)
                R = S + s * ceil((W - 1) / K)                  when the first Ray workers are ready
                rate = min(W / w, K / C, 1 / d)                trials a second once all are up
                X = S_cpu + (W - 1) * s_cpu                    CPU seconds of the start-up

N trials, K cores, w one trial's wall time alone (serial engine), C its CPU seconds (every process),
S and S_cpu Ray's start-up (wall, CPU of its own processes), s and s_cpu one Ray worker's set-up
(import, simulator, policy, its first trial's renderer), d the driver's recording cost per trial
(evidence written, scoresheet appended: serial, in trial order). The first term is the critical
path (the driver alone until R, then all workers), the second the CPU the run needs spread over the
cores. Start-up counts as wall time only while cores are free; on a loaded machine it stretches.
The constants are measured on the simulated arm with the expert (`benchmarks/parallel_bench.py`,
docs/benchmarks.md). `auto` picks the W with the smallest T(W), and parallel only where it is
predicted to win by `MARGIN` (the model's error on the measured points), so it never loses to serial.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from harness.run.evidence import VideoMode

MARGIN = 0.9   # parallel is chosen only where predicted at most 90 % of serial: the model is good to ~10 %


@dataclass(frozen=True)
class TrialCosts:
    wall_s: float                  # w: one trial alone, serial engine (writer lanes included)
    cpu_s: float                   # C: CPU seconds per trial, every process
    ray_start_s: float = 3.5       # S: wall until the local Ray runtime answers, cores free (its CPU on one core)
    ray_start_cpu_s: float = 3.5   # S_cpu: CPU of Ray's own processes (GCS, raylet, agents, monitors, reaper)
    worker_setup_s: float = 3.1    # s: one Ray worker from its process to its first trial, cores free
    worker_setup_cpu_s: float = 3.1   # s_cpu: that worker's CPU for it (imports, simulator, policy, renderer)
    record_s: float = 0.04         # d: the driver's recording per trial (evidence written and synced, appended)


# measured on the 2-core machine of docs/benchmarks.md (expert on the simulated arm, randomized protocol)
MEASURED = {
    VideoMode.NONE: TrialCosts(wall_s=0.22, cpu_s=0.28),
    VideoMode.FAILURES: TrialCosts(wall_s=0.22, cpu_s=0.28),   # the expert rarely fails
    VideoMode.ALL: TrialCosts(wall_s=1.63, cpu_s=3.3),
}


def ready_s(workers: int, cores: int, costs: TrialCosts) -> float:
    """R: when the Ray workers have joined (they set up side by side only as far as the cores allow)."""
    return costs.ray_start_s + costs.worker_setup_s * math.ceil((workers - 1) / max(cores, 1))


def predicted_s(workers: int, trials: int, cores: int, costs: TrialCosts) -> float:
    """T(W): the run's predicted wall time with `workers` workers (1: the serial engine, no Ray)."""
    serial = trials * costs.wall_s
    if workers <= 1:
        return serial
    ready = ready_s(workers, cores, costs)
    alone = ready / costs.wall_s   # trials the driver finishes before the first Ray worker joins
    start_cpu = costs.ray_start_cpu_s + (workers - 1) * costs.worker_setup_cpu_s
    cpu_bound = (trials * costs.cpu_s + start_cpu) / cores
    if alone >= trials:
        return max(serial, cpu_bound)
    rate = min(workers / costs.wall_s, cores / costs.cpu_s, 1 / costs.record_s)
    return max(ready + (trials - alone) / rate, cpu_bound)


def auto_workers(trials: int, cores: int | None = None, mode: VideoMode = VideoMode.FAILURES,
                 costs: TrialCosts | None = None, most: int = 256) -> int:
    """The worker count with the smallest predicted wall time; 1 (serial) unless parallel wins by `MARGIN`."""
    cores = cores or _cores()
    costs = costs or MEASURED[mode]
    candidates = range(2, max(1, min(trials, most, 2 * cores)) + 1)
    serial = predicted_s(1, trials, cores, costs)
    best = min(candidates, key=lambda w: (predicted_s(w, trials, cores, costs), w), default=1)
    return best if best > 1 and predicted_s(best, trials, cores, costs) <= MARGIN * serial else 1


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


# --- learned-policy sweeps (issue 42) -------------------------------------------------------------------------
#
# A sweep runs its cells one after another (`harness sweep`), each a `harness run --workers W` over N trials
# of one checkpoint. A learned policy's trial costs far more than the expert's (rendering its cameras and its
# inference every step). Every worker keeps what it loaded from cell to cell (`app.worker_cache` in the sweep's
# own process; `app.parallel.workers`: each Ray worker is an actor with its own cache, lent to each cell), and
# the sweep's process keeps the Ray runtime. For a sweep whose cells each bring a new checkpoint:
#
#     first cell:   L + B + T(W)   with S, and s raised by L + B (each Ray worker starts, loads and builds)
#     later cells:  L + T(W)       with S = 0, and s = L (each worker loads the cell's checkpoint, nothing else)
#
# M checkpoints, L one checkpoint's load (torch weights and LeRobot's processors), B the scene build
# (the MuJoCo model with both mesh sets, its renderers), s a Ray worker's process start. Without kept
# workers (`kept=False`, the code before issue 42), every cell pays L + B in the driver and s + L + B in each
# Ray worker; the runtime was kept even then (S once). On a Ray cluster (`--address`) the runtime is already up
# (S = 0, its start-up CPU elsewhere) and K is the cluster's cores.


@dataclass(frozen=True)
class SweepCosts:
    trial: TrialCosts         # one learned-policy trial (benchmarks/floor_bench.py, docs/benchmarks.md)
    policy_load_s: float      # L: one checkpoint loaded (CPU about the same)
    scene_build_s: float      # B: the simulated world built (its model, its first renderers)


def predicted_sweep_s(checkpoints: int, trials: int, workers: int, cores: int, costs: SweepCosts,
                      cluster: bool = False, kept: bool = True) -> float:
    """The predicted wall time of `checkpoints` cells of `trials` trials each, `workers` per cell, on `cores`
    cores (a Ray cluster's total with `cluster`); `kept`: every worker keeps its process, scene and loaded
    checkpoints from cell to cell."""
    trial, load, build = costs.trial, costs.policy_load_s, costs.scene_build_s

    def cell(first: bool) -> float:
        fresh = first or not kept
        start = 0.0 if cluster or not first else 1.0
        per_worker = TrialCosts(
            wall_s=trial.wall_s, cpu_s=trial.cpu_s,
            ray_start_s=trial.ray_start_s * start, ray_start_cpu_s=trial.ray_start_cpu_s * start,
            worker_setup_s=(trial.worker_setup_s + load + build) if fresh else load,
            worker_setup_cpu_s=(trial.worker_setup_cpu_s + load + build) if fresh else load,
            record_s=trial.record_s)
        return load + (build if fresh else 0.0) + predicted_s(workers, trials, cores, per_worker)

    return cell(True) + (checkpoints - 1) * cell(False)


def best_sweep_workers(checkpoints: int, trials: int, cores: int, costs: SweepCosts,
                       cluster: bool = False) -> tuple[int, float]:
    """(workers per cell, predicted seconds) with the smallest predicted wall time."""
    options = range(1, max(1, min(trials, 2 * cores)) + 1)
    best = min(options, key=lambda w: (predicted_sweep_s(checkpoints, trials, w, cores, costs, cluster), w))
    return best, predicted_sweep_s(checkpoints, trials, best, cores, costs, cluster)
