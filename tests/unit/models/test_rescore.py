"""Re-scoring a recorded attempt (the operator's undo): a superseding record; the original stays in the file."""

from __future__ import annotations

import json

import pytest

from harness.errors import HarnessInputError, StaleRunError
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from harness.reports.summary import summarize
from harness.storage import journal
from tests.helpers import fake_attempt, judge_verdict, locked_sheet


def _lines(path) -> list[dict]:
    text = path.read_bytes().split(b"\nrecords:\n", 1)[1].decode()
    return [json.loads(line[2:]) for line in text.splitlines()]


def test_a_rescore_keeps_the_original_and_the_report_counts_the_new_label(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    first = sheet.add_attempt(fake_attempt(1, 1, "success", judge=judge_verdict(), placement_error_cm=1.2))
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    redone = sheet.supersede(sheet.final_attempt(2), Label.WRONG_PLACEMENT, note="it was grasped: I misread it")
    assert (redone.trial_index, redone.attempt, redone.label) == (2, 1, Label.WRONG_PLACEMENT)

    lines = _lines(sheet.path)
    assert [line["attempt"].get("failure_mode") for line in lines] == [None, "no_grasp", "wrong_placement"]
    assert lines[2]["attempt"]["supersedes"] == lines[1]["chain_sha256"]
    assert journal.witness_path(sheet.path).read_text().count("\n") == 3

    reloaded = load_scoresheet(sheet.path)   # every link and the witness verified
    assert [a.label for a in reloaded.attempts] == [Label.SUCCESS, Label.WRONG_PLACEMENT]
    assert [a.label for a in reloaded.superseded] == [Label.NO_GRASP]
    assert len(reloaded.records) == 3
    summary = summarize(reloaded)
    assert (summary.trials_scored, summary.success.k) == (2, 1)
    assert summary.failure_modes["no_grasp"] == 0 and summary.failure_modes["wrong_placement"] == 1
    assert reloaded.final_attempt(1) == first


def test_undo_to_void_makes_the_trial_pending_again_and_resume_runs_it(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "success", judge=judge_verdict(), placement_error_cm=1.2))
    sheet.supersede(sheet.final_attempt(1), Label.VOID, void_reason="operator void: cube bumped at the start")
    resumed = load_scoresheet(sheet.path)
    assert resumed.pending_trials() == [1, 2, 3]
    assert resumed.next_attempt_number(1) == 2
    assert summarize(resumed).voids[0].reason == "operator void: cube bumped at the start"
    resumed.add_attempt(fake_attempt(1, 2, "no_grasp"))
    again = load_scoresheet(sheet.path)
    assert again.pending_trials() == [2, 3]
    assert [(a.attempt, a.label) for a in again.attempts] == [(1, Label.VOID), (2, Label.NO_GRASP)]
    with pytest.raises(HarnessInputError, match="tried again"):   # the undo window has passed for attempt 1
        again.supersede(again.attempts[0], Label.SUCCESS)


def test_a_judge_verdict_restored_by_undo_is_scored_by_the_judge(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "no_grasp", judge=judge_verdict(), note="override", scored_by="operator"))
    redone = sheet.supersede(sheet.final_attempt(1), Label.SUCCESS)
    assert (redone.scored_by, redone.placement_error_cm, redone.note) == ("judge", 1.2, None)
    assert redone.judge == sheet.superseded[0].judge and redone.started_at == sheet.superseded[0].started_at


def test_only_the_latest_record_of_an_attempt_can_be_superseded(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    original = sheet.add_attempt(fake_attempt(1, 1, "no_grasp"))
    sheet.supersede(original, Label.GRASPED_THEN_DROPPED)
    with pytest.raises(HarnessInputError, match="latest record"):
        sheet.supersede(original, Label.SUCCESS)
    sheet.supersede(sheet.final_attempt(1), Label.NO_GRASP)   # undo of the undo: a third record
    assert [a.label for a in load_scoresheet(sheet.path).attempts] == [Label.NO_GRASP]
    with pytest.raises(HarnessInputError, match="supersede"):
        sheet.add_attempt(fake_attempt(2, 1, "success", supersedes=original.chain_sha256))


def test_a_hand_made_superseding_record_is_refused(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "no_grasp"))
    sheet.supersede(sheet.final_attempt(1), Label.SUCCESS)
    raw = sheet.path.read_bytes()
    sheet.path.write_bytes(raw.replace(b'"outcome":"success"', b'"outcome":"success","note":"x"'))
    with pytest.raises(StaleRunError, match=r"attempts\[1\]"):
        load_scoresheet(sheet.path)
