"""`harness report --json` prints the documented, versioned schema."""

from __future__ import annotations

import json
import re

from harness.cli import main
from harness.reports.summary import REPORT_SCHEMA, ReportJson
from tests.helpers import REPO, fake_attempt, locked_sheet


def test_the_documented_schema_is_the_models_schema() -> None:
    text = (REPO / "docs" / "report-json.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert json.loads(blocks[-1]) == ReportJson.model_json_schema(by_alias=True)


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
