"""`--workers auto`: the model's choice never loses to serial, and parallel is chosen where it wins."""

from __future__ import annotations

import pytest

from harness.app.parallel.scaling import MARGIN, MEASURED, TrialCosts, auto_workers, predicted_s
from harness.run.evidence import VideoMode


@pytest.mark.parametrize("mode", list(VideoMode))
def test_auto_never_picks_a_count_predicted_slower_than_serial(mode: VideoMode) -> None:
    costs = MEASURED[mode]
    for cores in (1, 2, 3, 4, 8, 16, 64):
        for trials in (1, 5, 20, 50, 200, 1000):
            chosen = auto_workers(trials, cores, mode)
            serial = predicted_s(1, trials, cores, costs)
            assert 1 <= chosen <= max(1, min(trials, 2 * cores))
            assert chosen == 1 or predicted_s(chosen, trials, cores, costs) <= MARGIN * serial, (cores, trials)


def test_two_cores_and_the_50_trial_job_run_serially() -> None:
    # the start-up's CPU (Ray, one worker) against a serial run that already keeps 1.3 cores busy
    assert auto_workers(50, 2, VideoMode.FAILURES) == 1
    assert auto_workers(2, 64, VideoMode.FAILURES) == 1   # over before any Ray worker could join


def test_parallel_is_chosen_where_cores_and_trials_are_plenty() -> None:
    assert auto_workers(50, 8, VideoMode.FAILURES) > 2
    assert auto_workers(1000, 2, VideoMode.FAILURES) == 2   # long enough to pay for the start-up on two cores
    assert auto_workers(50, 4, VideoMode.ALL) >= 2   # every video: CPU-bound, so no more workers than cores


def test_more_workers_than_the_driver_can_record_for_are_not_predicted_faster() -> None:
    costs = TrialCosts(wall_s=0.2, cpu_s=0.2, record_s=0.05)   # the driver records 20 trials a second at most
    assert predicted_s(64, 10_000, 64, costs) >= 10_000 * costs.record_s


def test_a_learned_policy_sweep_scales_with_cores_until_the_driver_records_at_its_limit() -> None:
    from harness.app.parallel.scaling import SweepCosts, best_sweep_workers, predicted_sweep_s

    costs = SweepCosts(TrialCosts(wall_s=8.0, cpu_s=9.0), policy_load_s=2.0, scene_build_s=3.0)
    serial = predicted_sweep_s(10, 50, 1, 2, costs)
    assert serial == pytest.approx(10 * (2.0 + 50 * 8.0) + 3.0)   # the scene built once, each checkpoint loaded
    times = [best_sweep_workers(10, 50, cores, costs)[1] for cores in (2, 8, 32, 64)]
    assert times == sorted(times, reverse=True) and times[0] <= serial
    assert times[-1] < serial / 10   # 64 cores: far faster, yet never below each cell's own load and first trial
    assert times[-1] >= 10 * (2.0 + 8.0)
    cluster = best_sweep_workers(10, 50, 64, costs, cluster=True)[1]
    assert cluster <= times[-1]   # a cluster's runtime is up already
    assert predicted_sweep_s(10, 50, 1, 2, costs, kept=False) > serial   # a scene built per cell costs more
    # kept Ray workers join each later cell after a checkpoint's load, not a process start, load and build: more
    # saved than the driver's 9 scene builds
    saved = predicted_sweep_s(10, 50, 8, 8, costs, kept=False) - predicted_sweep_s(10, 50, 8, 8, costs)
    assert saved > 9 * 3.0 * 2
