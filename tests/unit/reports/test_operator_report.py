"""A real arm's attempts keep their measured start and proposal through the hash chain, and the report uses them."""

from __future__ import annotations

import pytest

from harness.models.scoresheet import load_scoresheet
from harness.reports.blocks import Figure, Para, Table
from harness.reports.document import run_blocks
from harness.reports.trials import trial_rows
from tests.helpers import fake_attempt, locked_sheet


def _start(dx: float, dy: float) -> dict:
    return {"dx_cm": dx, "dy_cm": dy, "yaw_deg": 0.0, "error_cm": 0.3, "yaw_error_deg": 1.0,
            "uncertainty_cm": 0.3, "within_tolerance": True, "settle_s": 0.2}


@pytest.mark.slow  # draws the report's figures
def test_measured_starts_and_proposals_survive_the_chain_and_reach_the_report(workdir) -> None:
    sheet = locked_sheet(workdir)
    older = fake_attempt(1, 1, "success")   # written before these fields existed: stored exactly as before
    assert "measured_start" not in older.model_dump(mode="json") and "proposal" not in older.model_dump(mode="json")
    sheet.add_attempt(older)
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp", measured_start=_start(5.0, -2.0),
                                   proposal={"label": "no_grasp", "reasons": ["gripper never closed"]}))
    sheet.add_attempt(fake_attempt(3, 1, "wrong_placement", measured_start=_start(-4.0, 3.5),
                                   proposal={"label": "grasped_then_dropped", "reasons": []}))
    reloaded = load_scoresheet(sheet.path)   # the hash chain verifies with and without the new fields
    assert reloaded.attempts[0].measured_start is None
    assert reloaded.attempts[1].proposal["label"] == "no_grasp"
    rows = trial_rows(reloaded)
    assert rows[1].measured_dxy_cm == (5.0, -2.0)
    assert abs(rows[1].distance_cm - (5.0 ** 2 + 2.0 ** 2) ** 0.5) < 1e-9   # the measured start, not the plan
    assert abs(rows[1].planned_distance_cm - (3.0 ** 2 + 2.0 ** 2) ** 0.5) < 1e-9
    blocks = run_blocks(reloaded)
    assert any(isinstance(b, Figure) and b.name == "starts_run" for b in blocks)
    table = next(b for b in blocks if isinstance(b, Table) and b.headers[0] == "proposed")
    assert table.rows == [["no_grasp", "1", "1", "-"], ["grasped_then_dropped", "1", "0", "wrong_placement 1"]]
    text = " ".join(b.text for b in blocks if isinstance(b, Para))
    assert "confirmed 1 of 2 proposals and overrode 1" in text
    assert "2 trials: the cube was 1.25 cm from its planned place at the median, 2.00 cm at most" in text


def test_a_simulated_run_has_no_operator_section(workdir) -> None:
    sheet = locked_sheet(workdir)
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    blocks = run_blocks(sheet)
    assert not any(isinstance(b, Table) and b.headers[0] == "proposed" for b in blocks)
    assert not any(isinstance(b, Figure) and b.name == "starts_run" for b in blocks)


def test_a_real_arm_success_counts_in_the_placement_figures_with_its_pixel_uncertainty(workdir) -> None:
    from harness.reports.summary import summarize

    sheet = locked_sheet(workdir)
    sheet.add_attempt(fake_attempt(1, 1, "success", placement_error_cm=1.2, measured_start=_start(0.0, 0.0),
                                   proposal={"label": "success", "reasons": [], "placement_error_cm": 1.2,
                                             "uncertainty_cm": 0.4}))
    sheet.add_attempt(fake_attempt(2, 1, "success", placement_error_cm=0.6))   # the simulator's truth
    reloaded = load_scoresheet(sheet.path)
    summary = summarize(reloaded)
    assert summary.placement_error_cm is not None and summary.placement_error_cm.n == 2
    assert summary.placement_error_cm.max == 1.2
    rows = trial_rows(reloaded)
    assert rows[0].placement_uncertainty_cm == 0.4 and rows[1].placement_uncertainty_cm is None


def test_an_attempt_with_no_label_proposed_is_not_counted_as_a_proposal(workdir) -> None:
    """The proposer refused (its evidence disagreed): stored with label null and its reasons, shown as no
    proposal (not the text "None"), and left out of the proposal-against-operator count."""
    sheet = locked_sheet(workdir)
    sheet.add_attempt(fake_attempt(1, 1, "success", proposal={
        "label": None, "reasons": ["jaws eased open while holding at the end: the cube may have slipped out"]}))
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp", proposal={"label": "no_grasp", "reasons": []}))
    reloaded = load_scoresheet(sheet.path)
    assert reloaded.attempts[0].proposal["label"] is None
    rows = trial_rows(reloaded)
    assert rows[0].proposed_label is None and rows[1].proposed_label == "no_grasp"
