"""Twin-assisted success rates (issue 58, `harness.stats.ppi`): the prediction-powered interval keeps its 95 %
coverage whatever the twin's agreement, a twin that always disagrees included; it is narrower than the real
trials' own when the twin agrees; the twin sheet's own trials reach the report; `harness plan` says how many real
trials a target width needs with and without the twin."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, lock_scoresheet
from harness.stats import ppi
from harness.stats.estimates import newcombe_paired, wilson_interval
from tests.generators.twin_pairs import ppi_intervals
from tests.helpers import fake_attempt, small_protocol_copy

COUNT = 2000   # per setting: the benchmark runs 10,000 (benchmarks/twin_ppi_bench.py)


def _coverage(rng: np.random.Generator, n: int, p: float, agreement: float, bias: str) -> float:
    """Simulated real/twin pairs (tests/generators/twin_pairs.py: a twin agreeing with probability `agreement`,
    unbiased, too kind or too harsh, with 1,000 trials of its own): the share of intervals that hold the real rate."""
    low, high, _ = ppi_intervals(rng, COUNT, n, p, agreement, bias)
    return float(((low <= p) & (p <= high)).mean())


@pytest.mark.parametrize("agreement", [0.0, 0.5, 0.8, 0.95, 1.0])
def test_the_twin_assisted_interval_covers_the_real_rate_however_good_or_bad_the_twin_is(agreement: float) -> None:
    rng = np.random.default_rng(int(agreement * 100) + 58)
    margin = 3 * np.sqrt(0.95 * 0.05 / COUNT)
    for n in (15, 30):
        for p in (0.15, 0.5, 0.85):
            for bias in ("either way", "too kind", "too harsh"):
                assert _coverage(rng, n, p, agreement, bias) >= 0.95 - margin, (n, p, agreement, bias)


def test_a_twin_that_always_disagrees_gives_a_valid_interval_no_narrower_than_the_real_trials_alone() -> None:
    real = [True] * 6 + [False] * 14
    found = ppi.twin_assisted(real, [not r for r in real], 700, 1000)
    assert found.low <= 0.3 <= found.high
    assert found.width >= found.real_width


def test_a_twin_that_agrees_narrows_the_interval_and_matches_the_plain_statistics() -> None:
    real = [True] * 15 + [False] * 15
    found = ppi.twin_assisted(real, real, 500, 1000)
    assert found.low <= 0.5 <= found.high and found.width < 0.7 * found.real_width
    assert (found.real_low, found.real_high) == pytest.approx(wilson_interval(15, 30))
    # the vectorised score intervals are the scalar ones the reports use
    for k, n in ((0, 10), (3, 10), (10, 10), (7, 23)):
        assert tuple(map(float, ppi.wilson(k, n))) == pytest.approx(wilson_interval(k, n))
    for cells in ((5, 2, 1, 12), (0, 3, 0, 7), (4, 0, 0, 6), (1, 6, 2, 1)):
        assert tuple(map(float, ppi.newcombe_paired(*cells))) == pytest.approx(newcombe_paired(*cells))


def test_fewer_real_trials_reach_a_width_with_a_twin_that_agrees_and_none_are_saved_by_one_that_does_not() -> None:
    alone = ppi.real_trials_for_width(0.5, None, 0.2)
    assert alone is not None
    helped = ppi.real_trials_for_width(0.5, 0.95, 0.2, twin_n=1000)
    assert helped is not None and helped <= 0.7 * alone
    useless = ppi.real_trials_for_width(0.5, 0.5, 0.2, twin_n=1000)
    assert useless is None or useless >= alone


def test_harness_plan_gives_the_real_trials_for_a_width_with_and_without_the_twin(capsys) -> None:
    assert main(["plan", "--p0", "0.5", "--width", "0.2", "--twin-agreement", "57/60"]) == 0
    out = capsys.readouterr().out
    assert "real trials alone (Wilson): 93" in out and "fewer)" in out
    assert main(["plan", "--p0", "0.5", "--width", "0.2", "--twin-agreement", "61/60"]) == 2
    assert main(["plan", "--p0", "0.5"]) == 2


def test_harness_plan_says_more_when_the_twin_costs_real_trials(capsys) -> None:
    """A poor twin needs more real trials than none: the plan says "more", never "-4% fewer"."""
    assert main(["plan", "--p0", "0.5", "--width", "0.2", "--twin-agreement", "0.8"]) == 0
    out = capsys.readouterr().out
    assert "97 real trials (4% more" in out and "fewer" not in out


@pytest.mark.parametrize("argv, flags", [
    (["--width", "0.2", "--twin-agreement", "61/60"], ["--twin-agreement"]),
    (["--width", "0.2", "--twin-agreement", "0/0"], ["--twin-agreement"]),
    (["--width", "0.2", "--twin-agreement", "abc"], ["--twin-agreement"]),
    (["--width", "0.2", "--delta", "-0.2"], ["--width", "--delta"]),
    (["--delta", "-0.2", "--twin-agreement", "0.9"], ["--twin-agreement", "--width"]),
    (["--delta", "-0.2", "--twin-trials", "50"], ["--twin-trials", "--width"]),
])
def test_harness_plan_refuses_bad_or_ignored_inputs_before_printing_anything(capsys, argv, flags) -> None:
    """One line naming the flag(s), exit 2, no half a report on stdout: a flag the plan would ignore is refused."""
    capsys.readouterr()
    assert main(["plan", "--p0", "0.5", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and all(flag in lines[0] for flag in flags), lines


def test_the_twin_sheets_own_trials_give_the_report_both_intervals_side_by_side(tmp_path: Path, capsys) -> None:
    protocol_path = small_protocol_copy(tmp_path)
    protocol = load_protocol(protocol_path)
    policy = tmp_path / "ckpt"
    policy.mkdir()
    (policy / "config.json").write_text("{}")
    real = lock_scoresheet(tmp_path / "real.yaml", build_locked(protocol, protocol_path, str(policy), "so101",
                                                                {"rehearsal": {"gap": {}}}), {"cameras": {}})
    own = [protocol.trials[k % len(protocol.trials)].model_copy(update={"index": ppi.TWIN_EXTRA_BASE + k})
           for k in range(40)]   # the twin's own trials (`harness twin --extra`), numbered apart
    twin = lock_scoresheet(tmp_path / "real-twin.yaml", build_locked(
        protocol.model_copy(update={"trials": [*protocol.trials, *own]}), protocol_path, str(policy), "sim",
        {"latency_ms": 30.0, "twin_of": {"real_sheet": str(real.path), "real_lock_sha256": real.lock["sha256"]}}),
        {"cameras": {}})
    labels = ["success", "no_grasp", "success"]
    for index, label in enumerate(labels, start=1):
        real.add_attempt(fake_attempt(index, 1, label))
        twin.add_attempt(fake_attempt(index, 1, label))
    for k in range(40):
        twin.add_attempt(fake_attempt(ppi.TWIN_EXTRA_BASE + k, 1, "success" if k % 3 else "no_grasp"))
    assert main(["report", "--json", str(twin.path)]) == 0
    fidelity = json.loads(capsys.readouterr().out)["twin_fidelity"]["twins"][0]
    assert fidelity["paired"] == 3                               # the own trials are not paired
    assisted = fidelity["twin_assisted"]
    assert assisted["twin_trials"] == 40 and assisted["twin_successes"] == 26 and assisted["real_trials"] == 3
    assert assisted["low95"] <= assisted["estimate"] <= assisted["high95"]
    assert main(["report", str(twin.path)]) == 0
    out = capsys.readouterr().out
    assert "real trials alone" in out and "with the twin" in out and "however good or bad the twin is" in out


def test_the_twins_own_trials_are_drawn_from_the_protocols_starts_the_same_way_on_every_call(tmp_path: Path) -> None:
    from harness.app.twin import twin_protocol

    protocol_path = small_protocol_copy(tmp_path)
    protocol = load_protocol(protocol_path)
    real = lock_scoresheet(tmp_path / "real.yaml", build_locked(protocol, protocol_path, "expert", "so101",
                                                                {"rehearsal": {"gap": {}}}), {"cameras": {}})
    real.add_attempt(fake_attempt(1, 1, "success"))
    first, again = twin_protocol(real, protocol, 30), twin_protocol(real, protocol, 30)
    assert first == again                                          # a resume writes the very same twin protocol
    own = [t for t in first.trials if t.index >= ppi.TWIN_EXTRA_BASE]
    assert [t.index for t in own] == list(range(ppi.TWIN_EXTRA_BASE, ppi.TWIN_EXTRA_BASE + 30))
    starts = {(t.dx_cm, t.dy_cm, t.yaw_deg) for t in protocol.trials}
    assert {(t.dx_cm, t.dy_cm, t.yaw_deg) for t in own} <= starts and len({(t.dx_cm, t.dy_cm) for t in own}) > 1
    assert len(twin_protocol(real, protocol).trials) == 1        # without --extra: the paired trials only


@pytest.mark.slow   # the twin's trials in the simulated arm
def test_harness_twin_extra_runs_the_twins_own_trials_and_the_report_uses_them(tmp_path: Path, monkeypatch,
                                                                                 capsys) -> None:
    from tests.system.test_twin import _real_sheet

    monkeypatch.chdir(tmp_path)
    real = _real_sheet(tmp_path)
    assert main(["twin", str(real.path), "--extra", "2"]) == 0
    twin_path = real.path.with_name("real-twin.yaml")
    from harness.models.scoresheet import load_scoresheet

    twin = load_scoresheet(twin_path)
    assert twin.complete and sorted(a.trial_index for a in twin.scored_attempts()) == [
        1, 2, ppi.TWIN_EXTRA_BASE, ppi.TWIN_EXTRA_BASE + 1]
    capsys.readouterr()
    assert main(["report", "--json", str(twin_path)]) == 0
    fidelity = json.loads(capsys.readouterr().out)["twin_fidelity"]["twins"][0]
    assert fidelity["paired"] == 2 and fidelity["twin_assisted"]["twin_trials"] == 2
    assert main(["twin", str(real.path), "--extra", "-1", "--scoresheet", "scoresheets/bad.yaml"]) == 2
