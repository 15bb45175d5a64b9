"""A chain witness (`<sheet>.chain`) that names another record is refused; a torn sheet's warning is in
`report --json`. A damaged witness stops report and resume until `harness sheet repair-chain` rebuilds it
(tests/system/test_rollback.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from harness.storage import journal
from tests.helpers import fake_attempt, locked_sheet


def _four(tmp_path: Path):
    """Four records on the small protocol's three trials: a void and its retry for trials 1 and 2."""
    sheet = locked_sheet(tmp_path)
    for trial, attempt, label in [(1, 1, "void"), (1, 2, "success"), (2, 1, "void"), (2, 2, "no_grasp")]:
        extra = {"void_reason": "camera dropout"} if label == "void" else {}
        sheet.add_attempt(fake_attempt(trial, attempt, label, **extra))
    return sheet


def test_a_witness_that_disagrees_with_a_record_is_still_refused(tmp_path: Path) -> None:
    from harness.errors import StaleRunError

    sheet = _four(tmp_path)
    witness = journal.witness_path(sheet.path)
    lines = witness.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:-65] + "0" * 64 + "\n"   # a well-formed line naming another chain head
    witness.write_text("".join(lines))
    with pytest.raises(StaleRunError):
        load_scoresheet(sheet.path)


def test_report_json_carries_the_torn_tail_warning(tmp_path: Path, capsys) -> None:
    sheet = _four(tmp_path)
    with sheet.path.open("ab") as handle:
        handle.write(b'- {"attempt":{"trial_index":3,"torn')
    capsys.readouterr()
    assert main(["report", "--json", str(sheet.path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any("not a complete record" in said for said in report["warnings"]), report["warnings"]


def test_a_chain_larger_than_any_sheet_is_refused_in_one_line_without_reading_it(tmp_path: Path, capsys) -> None:
    """A `.chain` grown past the sheet size limit (sparse here: no disk is used) is refused by its size, before a
    byte is read, naming the chain; the sheet itself is untouched."""
    sheet = _four(tmp_path)
    before = sheet.path.read_bytes()
    with journal.witness_path(sheet.path).open("r+b") as chain:
        chain.truncate(journal.MAX_SHEET_BYTES + 1)
    assert main(["report", str(sheet.path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".chain" in err[0] and "scoresheet chain" in err[0], err
    assert sheet.path.read_bytes() == before
