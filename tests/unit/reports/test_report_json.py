"""`harness report --json` prints the documented, versioned schema."""

from __future__ import annotations

import json
import re
import runpy

import pytest

from harness.cli import main
from harness.reports.analysis import ReportJson
from harness.reports.summary import REPORT_SCHEMA
from tests.helpers import REPO, fake_attempt, locked_sheet


def test_the_documented_schema_is_the_models_schema() -> None:
    text = (REPO / "docs" / "report-json.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert json.loads(blocks[-1]) == ReportJson.model_json_schema(by_alias=True)


def test_the_schema_on_the_page_is_what_its_script_writes() -> None:
    """The page's schema block is generated (scripts/report_json_doc.py), never edited by hand: a model change
    fails here with the command that fixes it, and the script leaves the prose above the block as it is."""
    generator = runpy.run_path(str(REPO / "scripts" / "report_json_doc.py"))
    page = (REPO / "docs" / "report-json.md").read_text()
    assert page == generator["render"](page), "docs/report-json.md is stale: run `python scripts/report_json_doc.py`"
    edited = page.replace('"title": "ReportJson"', '"title": "Edited by hand"')
    assert edited != page and generator["render"](edited) == page


def test_report_json_round_trips_through_the_model(tmp_path, capsys) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "void", void_reason="camera dropout: top repeated the same frame"))
    sheet.add_attempt(fake_attempt(1, 2, "success", placement_error_cm=2.0))
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    assert main(["report", "--json", str(sheet.path), str(sheet.path)]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert raw["schema"] == REPORT_SCHEMA
    report = ReportJson.model_validate(raw)
    assert len(report.runs) == 2
    run = report.runs[0]
    assert (run.success.k, run.success.n, run.failure_modes["no_grasp"]) == (1, 2, 1)
    assert run.placement_error_cm is not None and run.placement_error_cm.mean == 2.0
    assert [(v.trial, v.attempt) for v in run.voids] == [(1, 1)]


@pytest.mark.slow
def test_report_json_carries_what_the_html_report_shows(tmp_path, capsys) -> None:
    """Two runs on one protocol: the paired comparison, success by distance with its fit, every trial, the
    loop timing, the latency and the fingerprints are all in the JSON, with the numbers the HTML prints."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    a, b = locked_sheet(first), locked_sheet(second)
    for sheet, labels in ((a, ["success", "success", "no_grasp"]), (b, ["success", "no_grasp", "no_grasp"])):
        for trial, label in enumerate(labels, start=1):
            sheet.add_attempt(fake_attempt(trial, 1, label, placement_error_cm=1.0 if label == "success" else None))
    html = tmp_path / "report.html"
    assert main(["report", str(a.path), str(b.path), "-o", str(html)]) == 0
    capsys.readouterr()
    assert main(["report", "--json", str(a.path), str(b.path)]) == 0
    report = ReportJson.model_validate(json.loads(capsys.readouterr().out))
    page = html.read_text()
    comparison = report.comparison
    assert comparison is not None and comparison.paired and comparison.test == "exact McNemar"
    assert (comparison.both, comparison.only_first, comparison.only_second, comparison.neither) == (1, 1, 0, 1)
    assert f"p = {comparison.p_value:.3g}" in page
    run = report.runs[0]
    assert [t.trial for t in run.trials] == [1, 2, 3] and [t.label for t in run.trials] == [
        "success", "success", "no_grasp"]
    assert run.by_distance is not None and not run.by_distance.one_spot
    assert sum(b.n for b in run.by_distance.bins) == 3
    for b in run.by_distance.bins:
        assert f"{b.k}/{b.n}" in page
    assert run.loop_timing is not None and run.latency is not None and run.latency.engine == "sync"
    assert run.fingerprints is not None and run.fingerprints.lock_sha256[:16] in page
