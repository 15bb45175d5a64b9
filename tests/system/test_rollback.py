"""Decisions cannot be undone (issue 62): a scoresheet restored from an earlier copy, with or without its
`.chain`, is refused by `harness report` and by a resume, in one line, exit 2; so is one whose run's evidence
folders name attempts it lost, one downgraded to format 1, and one whose `.chain` is damaged, until
`harness sheet repair-chain` rebuilds it (and says so in the progress witness). A lost progress witness (a new
machine) leaves every sheet readable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.errors import StaleRunError
from harness.models.evidence_audit import RECORDED_FILE, evidence_folder_name, mark_recorded
from harness.models.scoresheet import Scoresheet, load_scoresheet, sha256_of
from harness.storage import journal, progress
from tests.helpers import fake_attempt, locked_sheet, refused


def _scored(folder: Path, *labels: str) -> Scoresheet:
    sheet = locked_sheet(folder)
    for index, label in enumerate(labels, start=1):
        sheet.add_attempt(fake_attempt(index, 1, label))
    return sheet


def _copy(sheet: Path, to: Path) -> None:
    to.mkdir(exist_ok=True)
    shutil.copy2(sheet, to / "sheet.yaml")
    shutil.copy2(journal.witness_path(sheet), to / "sheet.yaml.chain")


def _restore(sheet: Path, copy: Path, chain_too: bool = True) -> None:
    shutil.copy2(copy / "sheet.yaml", sheet)
    if chain_too:
        shutil.copy2(copy / "sheet.yaml.chain", journal.witness_path(sheet))


def _progress_file(sheet: Scoresheet | Path) -> Path:
    """The sheet's progress witness (a path: read from its header, however damaged its records are)."""
    if isinstance(sheet, Path):
        header = yaml.safe_load(sheet.read_text().split("\nrecords:\n")[0])
        return progress.witness_file(progress.key(header["locked"], header["lock"]))
    return progress.witness_file(progress.key(sheet.locked_data, sheet.lock))


def _drop_last_lines(path: Path, count: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-count]))


# --- rollbacks ------------------------------------------------------------------------------------------------


def test_a_sheet_rolled_back_with_its_chain_is_refused_by_report(tmp_path: Path, capsys) -> None:
    sheet = _scored(tmp_path, "success")
    _copy(sheet.path, tmp_path / "before")   # a `cp` taken before the last trials
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    sheet.add_attempt(fake_attempt(3, 1, "no_grasp"))
    _restore(sheet.path, tmp_path / "before")
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "2 recorded entries are missing" in line and "rolled back" in line, line
    with pytest.raises(StaleRunError):
        load_scoresheet(sheet.path)
    assert "missing" in refused(["sheet", "repair-chain", str(sheet.path)], tmp_path, capsys)   # no laundering


def test_a_sheet_rolled_back_alone_is_refused(tmp_path: Path, capsys) -> None:
    sheet = _scored(tmp_path, "success")
    _copy(sheet.path, tmp_path / "before")
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    _restore(sheet.path, tmp_path / "before", chain_too=False)
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "missing" in line, line


def test_the_last_record_deleted_from_both_files_is_refused(tmp_path: Path, capsys) -> None:
    sheet = _scored(tmp_path, "success", "no_grasp")
    _drop_last_lines(sheet.path, 1)
    _drop_last_lines(journal.witness_path(sheet.path), 1)
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "1 recorded entry is missing" in line and str(_progress_file(sheet)) in line, line


def test_a_record_replaced_in_both_files_is_refused(tmp_path: Path) -> None:
    """Another history of the same sheet (a copy run on elsewhere and brought back over this one)."""
    sheet = _scored(tmp_path, "success")
    _copy(sheet.path, tmp_path / "before")
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    witness = _progress_file(sheet)
    witness.rename(tmp_path / "aside")   # the fork is run on where this machine's witness is not
    load_scoresheet(tmp_path / "before" / "sheet.yaml").add_attempt(fake_attempt(2, 1, "success"))
    (tmp_path / "aside").replace(witness)
    _restore(sheet.path, tmp_path / "before")
    with pytest.raises(StaleRunError, match="is not the record the progress witness"):
        load_scoresheet(sheet.path)


def test_a_writer_killed_before_its_progress_line_loses_nothing(tmp_path: Path) -> None:
    """The crash window: the record and its `.chain` line are durable, the progress line is not."""
    sheet = _scored(tmp_path, "success", "no_grasp")
    witness = _progress_file(sheet)
    _drop_last_lines(witness, 1)
    with witness.open("ab") as handle:
        handle.write(b"attempt 2 ab")   # and a torn line, cut off by the next append
    reloaded = load_scoresheet(sheet.path)
    assert len(reloaded.attempts) == 2
    reloaded.add_attempt(fake_attempt(3, 1, "success"))
    lines = witness.read_text().splitlines()
    assert lines[0] == "format 2" and [line.split()[:2] for line in lines[1:]] == [
        ["attempt", "1"], ["attempt", "2"], ["attempt", "3"]]
    assert len(load_scoresheet(sheet.path).attempts) == 3


def test_records_the_progress_witness_never_saw_are_refused_until_repaired(tmp_path: Path, capsys) -> None:
    sheet = _scored(tmp_path, "success", "no_grasp")
    witness = _progress_file(sheet)
    _drop_last_lines(witness, 2)   # two appends: more than a kill leaves
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "did not see them" in line and "repair-chain" in line, line
    assert main(["sheet", "repair-chain", str(sheet.path)]) == 0
    assert witness.read_text().splitlines()[-1].startswith("repair 2 ")
    assert main(["report", str(sheet.path)]) == 0


def test_a_lost_progress_witness_leaves_the_sheet_readable_and_is_written_afresh(tmp_path: Path) -> None:
    """A new machine, or a deleted state folder: the sheet is read on its `.chain` and evidence alone, and its
    next append writes the witness from its own verified records."""
    sheet = _scored(tmp_path, "success", "no_grasp")
    witness = _progress_file(sheet)
    witness.unlink()
    reloaded = load_scoresheet(sheet.path)
    assert len(reloaded.attempts) == 2
    reloaded.add_attempt(fake_attempt(3, 1, "success"))
    assert [line.split()[:2] for line in witness.read_text().splitlines()] == [
        ["format", "2"], ["attempt", "1"], ["attempt", "2"], ["attempt", "3"]]


def test_the_state_folder_is_named_by_the_environment(tmp_path: Path, monkeypatch) -> None:
    from harness.storage.state_dir import STATE_DIR_ENV, state_dir

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "mine"))
    assert state_dir() == tmp_path / "mine"
    monkeypatch.delenv(STATE_DIR_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "harness"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "harness"


# --- evidence folders -----------------------------------------------------------------------------------------


def _evidence(sheet: Scoresheet, trial: int, attempt: int) -> Path:
    folder = sheet.path.parent / "runs" / sheet.path.stem / evidence_folder_name(trial, attempt)
    folder.mkdir(parents=True)
    (folder / "judge.json").write_text("{}")
    return folder


def test_evidence_folders_without_their_records_are_refused(tmp_path: Path, capsys) -> None:
    """Both witnesses lost with the rollback (a new machine): the run's own folders still show it."""
    sheet = _scored(tmp_path, "success")
    _evidence(sheet, 1, 1)
    _evidence(sheet, 2, 1)
    _evidence(sheet, 3, 1)   # two attempts the sheet no longer holds
    _progress_file(sheet).unlink()
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "trial 2 attempt 1" in line and "trial-002-a1" in line and "1 more" in line, line


def test_one_unrecorded_folder_for_the_next_attempt_is_the_crash_case(tmp_path: Path, capsys) -> None:
    """A run killed between renaming the folder into place and recording it: accepted, and resumed."""
    sheet = _scored(tmp_path, "success")
    _evidence(sheet, 1, 1)
    _evidence(sheet, 2, 1)
    assert main(["report", str(sheet.path)]) == 0
    capsys.readouterr()
    sheet.add_attempt(fake_attempt(2, 1, "void", void_reason="camera dropout"))
    _evidence(sheet, 3, 1)
    shutil.rmtree(sheet.path.parent / "runs" / "sheet" / "trial-002-a1")
    _evidence(sheet, 2, 3)   # not trial 2's next attempt (2): a record that was passed
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "trial 2 attempt 3" in line, line


def test_a_folder_marked_recorded_proves_its_record_one_rollback_included(tmp_path: Path, capsys) -> None:
    """The last record rolled back with the sheet and its `.chain`, the progress witness gone: the folder's
    marker still names the record, so even one attempt, which looks like the crash case, is refused."""
    sheet = _scored(tmp_path, "success")
    _copy(sheet.path, tmp_path / "before")
    recorded = sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    mark_recorded(_evidence(sheet, 2, 1), recorded)
    _restore(sheet.path, tmp_path / "before")
    _progress_file(sheet).unlink()
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert RECORDED_FILE in line and recorded.chain_sha256[:12] in line, line


@pytest.mark.slow
def test_a_resume_of_a_rolled_back_run_is_refused_by_its_evidence(workdir, capsys) -> None:
    """On a real (simulated) run: the sheet and its `.chain` restored from a copy taken after the first trial,
    the progress witness deleted; the resume refuses before it runs or moves anything."""
    shutil.copy(Path(__file__).parents[1] / "data" / "small.yaml", workdir / "protocols" / "small.yaml")
    argv = ["run", "protocols/small.yaml", "--policy", "expert", "--robot", "sim", "--headless", "--no-video"]
    assert main([*argv, "--max-trials", "1"]) == 0
    sheet_path = workdir / "scoresheets" / "small-expert.yaml"
    _copy(sheet_path, workdir / "before")
    assert main([*argv, "--resume", "--max-trials", "2"]) == 0
    _restore(sheet_path, workdir / "before")
    _progress_file(sheet_path).unlink()
    line = refused([*argv, "--resume"], workdir, capsys)
    assert RECORDED_FILE in line and "trial-002-a1" in line, line


@pytest.mark.slow
def test_a_comparison_rolled_back_after_its_decision_is_refused_never_resumed(workdir, capsys) -> None:
    """The battery's case: the decided comparison's sheet and `.chain` replaced by copies a few blocks earlier
    (here, its last two blocks cut from both) read as "still open" and ran on; now report and resume refuse."""
    data = yaml.safe_load((Path(__file__).parents[2] / "protocols" / "randomized.yaml").read_text())
    data["trials"] = [t for t in data["trials"] if t["dx_cm"] ** 2 + t["dy_cm"] ** 2 >= 9][:8]
    data["generator"] = None
    data["episode_time_limit_s"] = 12.0
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.6,
                             "max_trials_per_arm": 47}
    (workdir / "protocols" / "cmp.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    argv = ["run", "protocols/cmp.yaml", "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
            "--no-video"]
    assert main(argv) == 0
    sheet_path = workdir / "scoresheets" / "cmp-comparison.yaml"
    decided = load_scoresheet(sheet_path)
    assert decided.stopped_by_rule() is not None
    _drop_last_lines(sheet_path, 4)
    _drop_last_lines(journal.witness_path(sheet_path), 4)
    capsys.readouterr()
    assert "missing" in refused(["report", str(sheet_path)], workdir, capsys)
    assert "missing" in refused([*argv, "--resume"], workdir, capsys)
    _progress_file(decided).unlink()   # and with the progress witness gone too: the evidence refuses it
    assert RECORDED_FILE in refused(["report", str(sheet_path)], workdir, capsys)
    assert RECORDED_FILE in refused([*argv, "--resume"], workdir, capsys)


# --- no downgrade ---------------------------------------------------------------------------------------------


def _as_format_1(path: Path, keep: int | None = None) -> None:
    """The sheet rewritten as format 1 (whole YAML), with its first `keep` attempts (all when None)."""
    data = yaml.safe_load(path.read_text())
    attempts = [record["attempt"] | {"chain_sha256": record["chain_sha256"]} for record in data.pop("records")]
    data["format"] = journal.FORMAT_V1
    data["attempts"] = attempts[:keep] if keep is not None else attempts
    data["measurements"] = []
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize(("keep", "chain"), [(None, True), (1, False), (None, False)])
def test_a_format_2_sheet_is_never_read_as_format_1(tmp_path: Path, capsys, keep: int | None, chain: bool) -> None:
    sheet = _scored(tmp_path, "success", "no_grasp", "success")
    _as_format_1(sheet.path, keep)
    if not chain:
        journal.witness_path(sheet.path).unlink()
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "format" in line and "downgraded" in line, line


def test_a_format_2_sheet_locked_before_the_format_was_is_kept_from_format_1_by_its_witnesses(tmp_path: Path,
                                                                                               capsys) -> None:
    """A sheet locked without `locked.journal` (before this version): the progress witness, or its `.chain`,
    says it was written in format 2."""
    sheet = locked_sheet(tmp_path)
    locked = {k: v for k, v in sheet.locked_data.items() if k != "journal"}
    lock = {"sha256": sha256_of(locked), "field_sha256": {k: sha256_of(locked[k]) for k in sheet.lock["field_sha256"]
                                                         if k != "journal"}, "locked_at": sheet.lock["locked_at"]}
    _progress_file(sheet).unlink()
    sheet.path.unlink()
    old = Scoresheet(sheet.path, locked, lock, sheet.settings, [])
    old.save()
    for index in (1, 2):
        old.add_attempt(fake_attempt(index, 1, "success"))
    _as_format_1(old.path, keep=0)   # both attempts dropped
    witness = _progress_file(old)
    kept = witness.read_bytes()
    witness.unlink()   # the .chain alone: it names two records the format-1 copy lacks
    line = refused(["report", str(old.path)], tmp_path, capsys)
    assert "names other records" in line, line
    witness.write_bytes(kept)   # the progress witness alone
    journal.witness_path(old.path).unlink()
    line = refused(["report", str(old.path)], tmp_path, capsys)
    assert "progress witness" in line and "downgraded" in line, line


# --- a damaged chain stops the run ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["emptied", "garbage appended", "cut in half"])
def test_a_damaged_chain_stops_report_until_repair_chain_rebuilds_it(tmp_path: Path, capsys, how: str) -> None:
    sheet = _scored(tmp_path, "success", "no_grasp", "success")
    witness = journal.witness_path(sheet.path)
    intact = witness.read_bytes()
    if how == "emptied":
        witness.write_bytes(b"")
    elif how == "garbage appended":
        witness.write_bytes(intact + b"\x00\xffnot a witness line\n")
    else:
        witness.write_bytes(intact[: len(intact) // 2])
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert witness.name in line and "repair-chain" in line, line
    with pytest.raises(StaleRunError):
        load_scoresheet(sheet.path).add_attempt(fake_attempt(1, 2, "success"))
    assert main(["sheet", "repair-chain", str(sheet.path)]) == 0
    assert witness.read_bytes() == intact
    assert _progress_file(sheet).read_text().splitlines()[-1].startswith("repair 3 ")
    capsys.readouterr()
    assert main(["report", "--json", str(sheet.path)]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["success"]["n"] == 3


def test_a_missing_chain_is_rebuilt_by_repair_chain(tmp_path: Path, capsys) -> None:
    sheet = _scored(tmp_path, "success", "no_grasp")
    witness = journal.witness_path(sheet.path)
    intact = witness.read_bytes()
    witness.unlink()
    assert "repair-chain" in refused(["report", str(sheet.path)], tmp_path, capsys)
    assert main(["sheet", "repair-chain", str(sheet.path)]) == 0
    assert witness.read_bytes() == intact and len(load_scoresheet(sheet.path).attempts) == 2


def test_repair_chain_refuses_a_sheet_its_evidence_contradicts(tmp_path: Path, capsys) -> None:
    """The repair rebuilds from the records only where the run's own evidence agrees with them."""
    sheet = _scored(tmp_path, "success")
    _evidence(sheet, 2, 1)
    _evidence(sheet, 3, 1)
    journal.witness_path(sheet.path).write_bytes(b"")
    line = refused(["sheet", "repair-chain", str(sheet.path)], tmp_path, capsys)
    assert "trial-002-a1" in line, line
