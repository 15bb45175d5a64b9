"""The scoring prompt on a real arm: the proposal is shown with its reasons, Enter confirms it, a key overrides it."""

from __future__ import annotations

import io

from harness.models.protocol import Trial
from harness.models.taxonomy import Label
from harness.run.proposal import Proposal, Reason
from harness.run.terminal import TerminalObserver

TRIAL = Trial(index=2, dx_cm=3.0, dy_cm=-2.0)
PROPOSAL = Proposal(Label.GRASPED_THEN_DROPPED, (Reason.CLOSED_ON_SOMETHING, Reason.OPENED_MID_AIR,
                                                 Reason.CUBE_NOT_IN_BOWL), 9.4, 0.3)


def _score(typed: str, proposal: Proposal | None) -> tuple[str, str]:
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=True, out=out, stdin=io.StringIO(typed))
    if proposal is not None:
        observer.proposal_ready(proposal)
    return observer.score(TRIAL, None, None).label, out.getvalue()


def test_enter_confirms_the_proposal_and_the_prompt_says_why() -> None:
    label, shown = _score("\n\n", PROPOSAL)
    assert label == Label.GRASPED_THEN_DROPPED
    assert "proposed grasped-then-dropped" in shown and "opened in the air away from the bowl" in shown
    assert "9.4 +/- 0.3 cm from the bowl centre" in shown


def test_a_key_overrides_the_proposal() -> None:
    label, _ = _score("w\n\n", PROPOSAL)
    assert label == Label.WRONG_PLACEMENT


def test_without_a_proposal_enter_alone_is_not_a_score() -> None:
    label, shown = _score("\nn\n\n", None)
    assert label == Label.NO_GRASP and "proposed" not in shown


def test_a_proposal_is_used_for_one_trial_only() -> None:
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=True, out=out, stdin=io.StringIO("\n\n\ns\n\n"))
    observer.proposal_ready(PROPOSAL)
    assert observer.score(TRIAL, None, None).label == Label.GRASPED_THEN_DROPPED
    assert observer.score(TRIAL, None, None).label == Label.SUCCESS
