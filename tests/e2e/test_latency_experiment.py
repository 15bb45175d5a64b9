"""`scripts/latency_experiment --quick`: a policy under the synchronous engine with a simulated latency
and through LeRobot's own policy server with the same floor, each cell its own scoresheet, one report."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.models.scoresheet import load_scoresheet
from tests.helpers import REPO
from tests.tiny_policy import save_tiny_act


@pytest.mark.slow
def test_quick_latency_experiment_scores_each_engine_and_reports_them_side_by_side(harness_cli, tmp_path) -> None:
    policy = save_tiny_act(tmp_path / "tiny_act")
    out = tmp_path / "latency"
    env = harness_cli.script_env({**os.environ, "LATENCIES": "100", "PORT_BASE": "47300"})
    done = subprocess.run(["bash", str(REPO / "scripts" / "latency_experiment"), "--quick", str(policy), str(out)],
                          capture_output=True, text=True, timeout=1800, env=env)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "Traceback" not in done.stdout + done.stderr
    sync, async_ = (load_scoresheet(out / "scoresheets" / f"{name}.yaml") for name in ("sync-100ms", "async-100ms"))
    assert len(sync.scored_attempts()) == 1 and len(async_.scored_attempts()) == 1
    assert sync.locked.latency_ms == 100 and async_.locked.inference.engine == "async"
    report = (out / "report.md").read_text()
    assert "| 100 ms, sync | 1 |" in report and "server round trip (127.0.0.1:47400), async | 1 |" in report
