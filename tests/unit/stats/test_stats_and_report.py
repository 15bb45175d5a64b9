from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from harness.reports.summary import format_summary, summarize
from harness.stats.estimates import percentile, wilson_interval
from tests.helpers import fake_attempt, locked_sheet


def test_wilson_matches_published_values() -> None:
    # 46/50 (the source write-up's fixed-position result): 81.2% .. 96.8%
    low, high = wilson_interval(46, 50)
    assert low == pytest.approx(0.8115, abs=5e-4)
    assert high == pytest.approx(0.9685, abs=5e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0


def _coverage(n: int, p: float) -> float:
    """Exact coverage: the probability, over k ~ Binomial(n, p), that the interval contains p."""
    ks = np.arange(n + 1)
    inside = np.array([lo <= p <= hi for lo, hi in (wilson_interval(int(k), n) for k in ks)])
    return float(binom.pmf(ks, n, p)[inside].sum())


def test_wilson_coverage_holds_over_run_sizes_and_rates() -> None:
    grid = [_coverage(n, float(p)) for n in range(20, 201, 10) for p in np.linspace(0.05, 0.95, 19)]
    # Exact coverage oscillates with n and p; it averages near 95% and its worst points sit
    # just under 93% (n=30 p=0.3: 0.930-; n=20 p=0.05: 0.9245), never near the Wald interval's collapse.
    assert np.mean(grid) >= 0.945
    assert min(grid) >= 0.92
    assert np.mean([c >= 0.93 for c in grid]) >= 0.97


def test_wilson_coverage_near_the_edges_is_documented() -> None:
    # Wilson's known dip: at n=20, p=0.05 exactly 3 successes already excludes p, so coverage is
    # 1 - P(k >= 3) = 0.9245. The report states the interval; it does not pretend this away.
    assert _coverage(20, 0.05) == pytest.approx(0.9245, abs=1e-3)
    assert _coverage(200, 0.05) >= 0.93


def test_percentile_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile([1, 2, 3, 4], 95) == 4
    assert percentile([], 50) == 0.0


def test_summary_counts_modes_voids_and_placement(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "void", void_reason="camera dropout"))
    sheet.add_attempt(fake_attempt(1, 2, "success", placement_error_cm=2.0))
    sheet.add_attempt(fake_attempt(2, 1, "success", placement_error_cm=4.0))
    sheet.add_attempt(fake_attempt(3, 1, "no_grasp", placement_error_cm=14.0))
    summary = summarize(sheet)
    assert summary.success.k == 2 and summary.success.n == 3
    assert summary.failure_modes == {"no_grasp": 1, "grasped_then_dropped": 0, "wrong_placement": 0}
    assert summary.placement_error_cm is not None
    assert summary.placement_error_cm.mean == pytest.approx(3.0)  # successes only
    assert [v.model_dump() for v in summary.voids] == [{"trial": 1, "attempt": 1, "reason": "camera dropout"}]
    text = format_summary(summary)
    assert "2/3" in text and "camera dropout" in text
