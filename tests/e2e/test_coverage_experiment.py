"""`scripts/coverage_experiment --quick`: the whole loop's plumbing on a CPU (collect fixed and
scattered demonstrations, train the same tiny ACT on each with lerobot-train, score both on the
randomized protocol, one report). Two training steps learn nothing: this checks that every piece
connects, not the result."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from harness.models.scoresheet import load_scoresheet
from tests.helpers import REPO


@pytest.mark.slow
def test_quick_coverage_experiment_runs_end_to_end(harness_cli, tmp_path) -> None:
    out = tmp_path / "coverage"
    done = subprocess.run(["bash", str(REPO / "scripts" / "coverage_experiment"), "--quick", str(out)],
                          capture_output=True, text=True, timeout=3000, env=harness_cli.script_env())
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    for kind in ("fixed", "scattered"):
        selection = json.loads((out / "data" / kind / "meta" / "selection.json").read_text())
        assert selection["totals"]["accepted"] == 2
        assert (out / "train" / kind / "checkpoints" / "last" / "pretrained_model" / "config.json").is_file()
        sheet = load_scoresheet(out / "scoresheets" / f"{kind}.yaml")
        assert len(sheet.scored_attempts()) == 2
    fixed = json.loads((out / "data" / "fixed" / "meta" / "selection.json").read_text())["accepted"]
    assert {(a["dx_cm"], a["dy_cm"]) for a in fixed} == {(0.0, 0.0)}
    warnings = [line for line in done.stdout.splitlines() if line.startswith("WARNING") and "one spot" in line]
    assert len(warnings) == 1  # the fixed data cover one spot; the scattered data do not
    trained = load_scoresheet(out / "scoresheets" / "fixed-trained.yaml")
    assert len(trained.scored_attempts()) == 1 and trained.locked.trial_count == 1
    assert re.search(r"\[step 2/2, about \d+ min \d+ s left\]", done.stdout), done.stdout[-2000:]
    report = (out / "report.md").read_text()
    assert "fixed" in report and "scattered" in report
    runs = report.split("## Run 1")[1].split("## Run 2")
    assert all("and the training episodes' start positions (x)" in run for run in runs)   # each map, its own starts
