"""A damaged chain witness (`<sheet>.chain`) is said, in words and in `report --json`, and rebuilt from the
sheet on the next append; the sheet's own hashes still prove its records. A torn sheet's warning is in
`report --json` too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.models import journal
from harness.models.scoresheet import load_scoresheet
from tests.helpers import fake_attempt, locked_sheet


def _four(tmp_path: Path):
    """Four records on the small protocol's three trials: a void and its retry for trials 1 and 2."""
    sheet = locked_sheet(tmp_path)
    for trial, attempt, label in [(1, 1, "void"), (1, 2, "success"), (2, 1, "void"), (2, 2, "no_grasp")]:
        extra = {"void_reason": "camera dropout"} if label == "void" else {}
        sheet.add_attempt(fake_attempt(trial, attempt, label, **extra))
    return sheet


def _damage(witness: Path, how: str) -> None:
    raw = witness.read_bytes()
    if how == "cut in half":
        witness.write_bytes(raw[: len(raw) // 2])
    elif how == "garbage in the middle":
        lines = raw.splitlines(keepends=True)
        witness.write_bytes(b"".join([*lines[:2], b"\x00\xffnot a witness line\n", *lines[3:]]))
    elif how == "emptied":
        witness.write_bytes(b"")


@pytest.mark.parametrize("how", ["cut in half", "garbage in the middle", "emptied"])
def test_a_damaged_witness_is_reported_and_rebuilt_on_the_next_append(tmp_path: Path, capsys, caplog,
                                                                      how: str) -> None:
    sheet = _four(tmp_path)
    witness = journal.witness_path(sheet.path)
    intact = witness.read_bytes()
    _damage(witness, how)
    capsys.readouterr()
    assert main(["report", "--json", str(sheet.path)]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert len(report["warnings"]) == 1 and witness.name in report["warnings"][0], report["warnings"]
    assert "rebuilt" in report["warnings"][0] and witness.name in caplog.text   # every command says it
    assert report["runs"][0]["success"]["n"] == 2   # every record still counted: the sheet proves them
    reloaded = load_scoresheet(sheet.path)
    assert len(reloaded.attempts) == 4 and reloaded.stored is not None and reloaded.stored.warnings
    reloaded.add_attempt(fake_attempt(3, 1, "success"))
    rebuilt = witness.read_bytes()
    assert rebuilt.startswith(intact) and rebuilt.count(b"\n") == 5
    again = load_scoresheet(sheet.path)
    assert len(again.attempts) == 5 and again.stored is not None and again.stored.warnings == []


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
