"""The report says which latency a run was scored under, what each trial's arm saw, and success against
latency when runs or sweep cells vary it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.models.protocol import load_protocol
from harness.models.scoresheet import Scoresheet, build_locked, lock_scoresheet
from harness.models.sheet_records import LoopStats
from harness.reports.blocks import Heading, Table
from harness.reports.document import report_blocks
from harness.reports.sweep_report import SweepCell, sweep_blocks
from tests.helpers import fake_attempt, small_protocol_copy


def _sheet(folder: Path, name: str, latency_ms: float | None, labels: list[str], seen_ms: float | None) -> Scoresheet:
    protocol_path = small_protocol_copy(folder)
    optional = {"latency_ms": latency_ms, "inference": {"engine": "sync"}}
    locked = build_locked(load_protocol(protocol_path), protocol_path, "expert", "sim", optional)
    sheet = lock_scoresheet(folder / f"{name}.yaml", locked, {"latency_ms": latency_ms})
    for index, label in enumerate(labels, start=1):
        loop = LoopStats(steps=90) if seen_ms is None else LoopStats(
            steps=90, obs_to_action_ms_p50=seen_ms, obs_to_action_ms_p95=seen_ms, obs_to_action_ms_max=seen_ms,
            obs_to_action_clock="simulated", queue_underruns=90 if seen_ms > 1000 / 30 else 0, chunk_switches=None)
        sheet.add_attempt(fake_attempt(index, 1, label, loop=loop))
    return sheet


def _table_after(blocks: list, heading: str) -> Table:
    at = next(i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.text.startswith(heading))
    return next(b for b in blocks[at:] if isinstance(b, Table))


def test_each_trial_shows_the_latency_its_arm_saw(tmp_path: Path) -> None:
    sheet = _sheet(tmp_path, "s", 250.0, ["success", "no_grasp", "success"], 250.0)
    blocks = report_blocks([sheet])
    table = _table_after(blocks, "Latency the arm saw")
    assert table.rows[1] == ["2", "no_grasp", "250", "250", "250", "simulated", "90/90", "-"]
    fingerprints = _table_after(blocks, "Fingerprints")
    assert ["latency", "latency 250 ms, inference engine sync (locked)"] in fingerprints.rows


def test_a_sheet_without_the_arms_experience_shows_no_such_table(tmp_path: Path) -> None:
    blocks = report_blocks([_sheet(tmp_path, "s", None, ["success"], None)])
    assert not any(isinstance(b, Heading) and b.text.startswith("Latency the arm saw") for b in blocks)
    assert ["latency", "latency lock-step (the simulator waits for every action), inference engine sync (locked)"] \
        in _table_after(blocks, "Fingerprints").rows


@pytest.mark.slow
def test_runs_at_several_latencies_show_success_against_latency(tmp_path: Path) -> None:
    slow = _sheet(tmp_path, "slow", 500.0, ["no_grasp", "success", "no_grasp"], 500.0)
    fast = _sheet(tmp_path, "fast", 0.0, ["success", "success", "success"], 0.0)
    lock_step = _sheet(tmp_path, "lock", None, ["success", "success", "no_grasp"], 0.0)
    table = _table_after(report_blocks([slow, fast, lock_step]), "Success against latency")
    assert [row[:3] for row in table.rows] == [["lock-step, sync", "1", "2/3"], ["0 ms, sync", "1", "3/3"],
                                               ["500 ms, sync", "1", "1/3"]]
    assert table.rows[2][4] == "500"
    runs = _table_after(report_blocks([slow, fast, lock_step]), "Comparison")
    assert [row[0] for row in runs.rows] == ["expert (slow)", "expert (fast)", "expert (lock)"]   # one policy


@pytest.mark.slow
def test_runs_at_one_latency_show_no_latency_curve(tmp_path: Path) -> None:
    a = _sheet(tmp_path, "a", 100.0, ["success"], 100.0)
    b = _sheet(tmp_path, "b", 100.0, ["no_grasp"], 100.0)
    assert not any(isinstance(x, Heading) and x.text.startswith("Success against latency")
                   for x in report_blocks([a, b]))


def test_a_sweep_over_latency_shows_each_checkpoints_curve(tmp_path: Path) -> None:
    cells = [SweepCell("ckpt", "small", f"latency_ms={ms:g}",
                       _sheet(tmp_path, f"c{ms:g}", ms, labels, ms))
             for ms, labels in ((0.0, ["success", "success"]), (250.0, ["success", "no_grasp"]))]
    table = _table_after(sweep_blocks(cells, "ckpt", {}), "Success against latency (ckpt, protocol small)")
    assert [row[:3] for row in table.rows] == [["0 ms, sync", "1", "2/2"], ["250 ms, sync", "1", "1/2"]]
