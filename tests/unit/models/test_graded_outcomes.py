"""Graded outcomes (issue 58): the progress score is one rule fed by the judge (simulated arm) or by the label and
the anatomy (real arm), and the two agree on the committed learned-policy traces where both exist; the primary
outcome is declared in the stopping rule and refused where it means nothing."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
from pydantic import ValidationError

from harness.models.anatomy import Phase, PhaseSpan, TrialAnatomy
from harness.models.graded import GradedOutcome, OutcomeSource, PrimaryOutcome, Progress, progress
from harness.models.protocol import Scene, StoppingRule
from harness.models.taxonomy import Label
from harness.models.verdict import EventKind, JudgeEvent, JudgeVerdict
from harness.run.anatomy import GraspPoints, anatomy_from_rows
from tests.helpers import REPO

FIXTURES = REPO / "tests" / "data" / "anatomy"


def _outcome(kind: PrimaryOutcome = PrimaryOutcome.PROGRESS, simulated: bool = True) -> GradedOutcome:
    scene = Scene()
    return GradedOutcome.declare(kind, simulated, scene.bowl_xy_cm, scene.bowl_diameter_cm,
                                 scene.trained_cube_xy_cm, 20.0)


def _fixture_attempts() -> list[tuple[str, int, JudgeVerdict, TrialAnatomy]]:
    fk, scene = GraspPoints(), Scene()
    out = []
    for path in sorted(FIXTURES.glob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(str(arrays.pop("meta")))
        columns = [str(c) for c in arrays["columns"]]
        for attempt in meta["attempts"]:
            trace = arrays[f"trial{attempt['trial']}"]
            rows = [dict(zip(columns, map(float, values), strict=True)) for values in trace]
            anatomy = anatomy_from_rows(rows, fk, scene.trained_cube_xy_cm, tuple(attempt["cube_start_cm"]),
                                        scene.bowl_xy_cm, 5.0)
            assert anatomy is not None
            out.append((path.stem, attempt["trial"], JudgeVerdict.model_validate(attempt["judge"]), anatomy))
    return out


def test_progress_from_the_judge_and_from_the_anatomy_agree_on_the_committed_learned_policy_traces() -> None:
    outcome = _outcome()
    attempts = _fixture_attempts()
    levels: collections.Counter[Progress] = collections.Counter()
    disagree = []
    for policy, trial, verdict, anatomy in attempts:
        judged = outcome.progress_from_judge(verdict.label, verdict)
        read = outcome.progress_from_anatomy(verdict.label, anatomy)
        levels[judged] += 1
        if judged != read:
            disagree.append((policy, trial, judged, read, anatomy.summary))
    assert len(attempts) >= 100
    assert disagree == []
    # the fixtures reach every level but "carried over the bowl": the agreement is not only at the ends
    assert {Progress.NO_GRASP, Progress.GRASPED, Progress.LIFTED, Progress.PLACED} <= set(levels)


def _verdict(label: Label, lifted: bool, release_at_m: tuple[float, float] | None, t: float = 4.0) -> JudgeVerdict:
    events = [JudgeEvent(event=EventKind.GRASP, t=1.0, cube=[0.22, -0.05, 0.015])]
    if release_at_m is not None:
        events.append(JudgeEvent(event=EventKind.RELEASE, t=t, cube=[*release_at_m, 0.05]))
    return JudgeVerdict(label=label, detail="", true_placement_error_cm=1.0, cube_inside_bowl=label is Label.SUCCESS,
                        clean_release=True, grasped=True, lifted=lifted, max_lift_cm=5.0 if lifted else 0.5,
                        events=events, thresholds={})


def _anatomy(lifted: bool, release_cm: tuple[float, float] | None, released_at: float | None = None) -> TrialAnatomy:
    return TrialAnatomy(first_motion_s=0.2, stalled=False, stall_limit_s=5.0, cube_start_cm=(0.0, 0.0),
                        closed_at_s=1.0, grasp_point_cm=(0.0, 0.0), holding=True, max_lift_cm=5.0 if lifted else 0.5,
                        lifted_at_s=1.5 if lifted else None, released_at_s=released_at, release_point_cm=release_cm,
                        phases=[PhaseSpan(phase=Phase.APPROACH, start_s=0.2, end_s=1.0)], ended_in=Phase.RELEASE,
                        summary="")


def test_carried_over_the_bowl_is_read_alike_from_the_judge_and_the_anatomy() -> None:
    outcome = _outcome()
    # the bowl at (18, 14) cm, radius 5.75; the trained spot at (22, -5): anatomy points are relative to it
    over_m, beside_m = (0.18, 0.12), (0.25, 0.05)
    over_rel, beside_rel = (18 - 22, 12 + 5), (25 - 22, 5 + 5)
    assert outcome.progress_from_judge(Label.WRONG_PLACEMENT, _verdict(Label.WRONG_PLACEMENT, True, over_m)) \
        is Progress.CARRIED
    assert outcome.progress_from_anatomy(Label.WRONG_PLACEMENT, _anatomy(True, over_rel)) is Progress.CARRIED
    assert outcome.progress_from_judge(Label.WRONG_PLACEMENT, _verdict(Label.WRONG_PLACEMENT, True, beside_m)) \
        is Progress.LIFTED
    assert outcome.progress_from_anatomy(Label.WRONG_PLACEMENT, _anatomy(True, beside_rel)) is Progress.LIFTED
    # released over the bowl without a lift (pushed there): not carried
    assert outcome.progress_from_judge(Label.WRONG_PLACEMENT, _verdict(Label.WRONG_PLACEMENT, False, over_m)) \
        is Progress.GRASPED


def test_the_label_decides_the_ends_whatever_the_facts_say() -> None:
    assert progress(Label.SUCCESS, False, False) is Progress.PLACED
    assert progress(Label.NO_GRASP, True, True) is Progress.NO_GRASP   # the scorer said it never held the cube
    assert progress(Label.GRASPED_THEN_DROPPED, False, False) is Progress.GRASPED
    with pytest.raises(ValueError, match="void"):
        progress(Label.VOID, False, False)


def test_time_to_success_is_the_release_and_a_failure_is_censored_at_the_limit() -> None:
    sim = _outcome(PrimaryOutcome.TIME_TO_SUCCESS)
    real = _outcome(PrimaryOutcome.TIME_TO_SUCCESS, simulated=False)
    assert real.source is OutcomeSource.OPERATOR_ANATOMY
    won = _verdict(Label.SUCCESS, True, (0.18, 0.14), t=5.0)
    assert sim.time_to_success_s(Label.SUCCESS, won, None, 9.0) == 5.0
    assert sim.score(Label.SUCCESS, won, None, 9.0) == pytest.approx(0.75)
    assert real.time_to_success_s(Label.SUCCESS, None, _anatomy(True, (0, 0), released_at=8.0), 12.0) == 8.0
    assert real.time_to_success_s(Label.SUCCESS, None, None, 12.0) == 12.0   # no release seen: the episode's length
    assert sim.time_to_success_s(Label.NO_GRASP, None, None, 3.0) == 20.0
    assert sim.score(Label.WRONG_PLACEMENT, won, None, 3.0) == 0.0


def test_the_primary_outcome_is_declared_in_a_sequential_rule_only_and_a_success_rule_stores_as_before() -> None:
    rule = StoppingRule(kind="sequential", min_difference=0.2, max_trials_per_arm=176, primary_outcome="progress")
    assert rule.primary_outcome is PrimaryOutcome.PROGRESS
    assert rule.model_dump(mode="json")["primary_outcome"] == "progress"
    plain = StoppingRule(kind="sequential", min_difference=0.2, max_trials_per_arm=176)
    assert "primary_outcome" not in plain.model_dump(mode="json")   # old sheets hash unchanged
    with pytest.raises(ValidationError, match="primary_outcome"):
        StoppingRule(kind="fixed", primary_outcome="progress")
    with pytest.raises(ValidationError, match="primary_outcome"):
        StoppingRule(kind="sequential", min_difference=0.2, max_trials_per_arm=176, primary_outcome="grasped")


def test_the_tally_line_says_the_attempt_on_the_primary_outcome_in_plain_words() -> None:
    progress_rule, timed = _outcome(), _outcome(PrimaryOutcome.TIME_TO_SUCCESS)
    dropped = _verdict(Label.GRASPED_THEN_DROPPED, True, (0.25, 0.05))
    assert progress_rule.describe(Label.GRASPED_THEN_DROPPED, dropped, None, 6.0) == "progress: got to lifted (2 of 4)"
    won = _verdict(Label.SUCCESS, True, (0.18, 0.14), t=5.0)
    assert timed.describe(Label.SUCCESS, won, None, 9.0) == "time to success: 5.0 s of 20 s"
    assert timed.describe(Label.NO_GRASP, None, None, 20.0) == "time to success: none (counted as the whole 20 s)"
