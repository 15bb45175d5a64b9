"""Outcome proposals refuse rather than mislead (issue 59 item 5): on committed learned-policy attempts.

The attempts are real simulated runs of ACT and SmolVLA checkpoints (`tests/anatomy_traces.py`), the joints
read as a real arm reports them, the final frame stood in for by what a top camera sees of the judged end
state. Where the evidence contradicts itself the proposer proposes nothing, and the operator's prompts offer
no default to confirm with Enter.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.models.protocol import Trial
from harness.models.taxonomy import Label
from harness.run.proposal import FinalView, GripperTrace, Proposal, Reason, propose, so101_grasp_point
from harness.run.terminal import TerminalObserver
from harness.sim.scene import SceneGeometry
from tests.anatomy_traces import FOLDER, Attempt, attempts

SCENE = SceneGeometry()


@pytest.fixture(scope="module")
def grasp_point():
    return so101_grasp_point()


def proposed(attempt: Attempt, grasp_point, measured: bool = True) -> Proposal:
    trace = GripperTrace(grasp_point)
    for joints in attempt.joints:
        trace.see(joints)
    distance = float(attempt.judge["true_placement_error_cm"])
    view = FinalView(distance < 100 * SCENE.bowl_rim_diameter / 2, distance, 0.3) if measured else FinalView(None)
    return propose(trace, view, SCENE.bowl_xy, SCENE.bowl_rim_diameter / 2, SCENE.cube_edge / 2)


def one(policy: str, trial: int) -> Attempt:
    return next(a for a in attempts(policy) if a.trial == trial)


@pytest.mark.parametrize(("policy", "trial", "why"), [
    # SmolVLA closed part-way without opening first, then carried the cube off and dropped it: the old rule
    # ("a gripper resting part-closed holds nothing") proposed no_grasp
    ("heldout-smolvla-3000", 4, Reason.RESTED_PART_CLOSED),
    # SmolVLA closed part-way on nothing, lifted and opened 14.5 cm from the bowl, the cube 8.8 cm away: the
    # old proposal was a drop, the judge's no grasp
    ("smolvla-1500", 3, Reason.NOT_WHERE_LET_GO),
])
def test_contradicting_evidence_is_not_proposed(grasp_point, policy: str, trial: int, why: Reason) -> None:
    got = proposed(one(policy, trial), grasp_point)
    assert got.label is None and got.refused
    assert why in got.reasons
    assert got.record()["label"] is None
    assert got.line().startswith("no label proposed")


def test_jaws_eased_well_past_the_cube_let_it_go(grasp_point) -> None:
    """ACT eased its jaws from the cube's width (18) to ~30-35 over the bowl, never past the absolute open band
    (40): the cube slipped in, the judge's success. Jaws 8 units wider than they closed on the cube hold
    nothing (across the committed attempts they drift at most 4.1 units while the judge still sees the cube
    held), so that is where it was let go: over the bowl. Before: refused as "jaws eased open"."""
    got = proposed(one("heldout-scattered-act-1000", 6), grasp_point)
    assert got.label is Label.SUCCESS
    assert Reason.OPENED_OVER_BOWL in got.reasons and Reason.STILL_HOLDING not in got.reasons


def test_easing_past_the_cube_is_a_release_where_it_happened() -> None:
    """A synthetic hold: closed on the cube at 18, carried, then eased to 30 (under the open band) at x = 0.3:
    the release is there, not at the end of the episode where the arm has moved on."""
    trace = GripperTrace(lambda joints: np.array([joints["shoulder_pan"], 0.0, joints["elbow_flex"]]))
    frames = [(60.0, 0.0, 0.02)] * 5 + [(18.0, 0.0, 0.02)] * 12 + [(18.0, 0.3, 0.10)] * 5 \
        + [(30.0, 0.3, 0.10)] * 3 + [(30.0, 0.5, 0.10)] * 5
    for grip, x, z in frames:
        trace.see({"gripper": grip, "shoulder_pan": x, "elbow_flex": z})
    assert trace.held and trace.released
    assert trace.release_xyz == pytest.approx((0.3, 0.0, 0.10))


def test_a_drop_whose_landing_is_unseen_is_not_proposed(grasp_point) -> None:
    attempt = one("heldout2-smolvla-9000", 18)
    assert proposed(attempt, grasp_point).label is Label.GRASPED_THEN_DROPPED   # seen landing: proposed
    unseen = proposed(attempt, grasp_point, measured=False)
    assert unseen.label is None and Reason.LANDING_UNSEEN in unseen.reasons


@pytest.mark.parametrize("measured", [True, False])
def test_across_the_committed_policies_a_disagreement_is_almost_always_a_refusal(grasp_point, measured) -> None:
    """140 attempts of 14 policy runs: before, 4 proposals were wrong and none refused; now 137 agree, 2 are
    refused and at most the one the joints cannot tell (ACT's cube slipping from closing jaws,
    heldout-act-1000-rand trial 1: the judge saw a 0.25 s hold, the gripper closed to its stop) is wrong."""
    wrong, agree, total = [], 0, 0
    for attempt in attempts():
        got = proposed(attempt, grasp_point, measured)
        total += 1
        if got.label is None:
            continue
        if got.label.value == attempt.label:
            agree += 1
        else:
            wrong.append((attempt.policy, attempt.trial))
    assert wrong == [("heldout-act-1000-rand", 1)]
    assert agree / total >= (0.975 if measured else 0.96)
    # every judged success with a seen final frame is proposed as one (none refused)
    if measured:
        for attempt in attempts():
            if attempt.label == "success":
                assert proposed(attempt, grasp_point).label is Label.SUCCESS, (attempt.policy, attempt.trial)


def test_the_terminal_offers_no_default_when_nothing_was_proposed() -> None:
    refused = Proposal(None, (Reason.CLOSED_ON_SOMETHING, Reason.NOT_WHERE_LET_GO, Reason.CUBE_IN_BOWL))
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=True, out=out, stdin=io.StringIO("\ns\n\n"))
    observer.proposal_ready(refused)
    decision = observer.score(Trial(index=1, dx_cm=0.0, dy_cm=0.0), None, None)
    text = out.getvalue()
    assert "no label proposed" in text and "Enter confirms" not in text
    assert decision.label is Label.SUCCESS   # Enter alone chose nothing; the key did


def test_a_policy_that_holds_still_is_a_no_grasp_not_a_refusal() -> None:
    """The start pose's gripper (10) sits in the holding band: resting there is not closing onto the cube
    (the emulated desk's idle policy, tests/realtime/test_operator_real_arm.py), while closing from 36 to 23 and
    resting there is (heldout-smolvla-3000 trial 4, refused above)."""
    from harness.models.defaults import DEFAULT_START_POSE

    trace = GripperTrace(lambda joints: np.zeros(3))
    for _ in range(60):
        trace.see(dict(DEFAULT_START_POSE))
    got = propose(trace, FinalView(False, 19.4, 0.3), SCENE.bowl_xy, SCENE.bowl_rim_diameter / 2,
                  SCENE.cube_edge / 2)
    assert got.label is Label.NO_GRASP and Reason.NEVER_CLOSED in got.reasons


ACT128 = FOLDER.parent / "proposal_act128"   # scripts/proposal_heldout's 110 attempts: each held out once, tuning since


@pytest.mark.parametrize(("policy", "trial"), [
    ("act128s2000-400-rand", 2), ("act128s2000-400-rand", 3), ("act128s2000-400-rand", 5),
    ("act128s2000-400-rand", 8), ("act128s1000-400-rand", 2)])
def test_jaws_resting_wider_than_the_cube_without_a_lift_are_not_called_a_grasp(grasp_point, policy, trial) -> None:
    """A small ACT closed its jaws to 23-33 and held them there (the command, not the cube, stopped them: a
    3 cm cube stops them near 18) beside the cube, never lifting: the judge's no grasp. "Stopped part-way:
    holding something; never lifted" proposed wrong_placement, 5 times in 80 held-out attempts. Every judged
    grasp that was not lifted rested at 18.1 or narrower."""
    attempt = next(a for a in attempts(policy, folder=ACT128) if a.trial == trial)
    assert attempt.label == "no_grasp"
    got = proposed(attempt, grasp_point)
    assert got.label is None and Reason.STOPPED_WIDE in got.reasons


def test_on_the_small_acts_the_wrong_proposals_are_those_the_evidence_cannot_tell(grasp_point) -> None:
    """The 110 attempts of scripts/proposal_heldout's three trainings, each set judged once before any rule saw
    it (71/1/8 of 80, then 20/3/7 of 30: agree / no proposal / wrong), tuning since. The wrong ones left: cubes
    released over the bowl and seen inside that the judge did not call a success (never at rest in the bowl for
    0.5 s before the time limit: the sequence incomplete), and a 0.25 s grab by jaws that never rested, which the
    joints read as never closing."""
    wrong, agree, total = [], 0, 0
    for attempt in attempts(folder=ACT128):
        got = proposed(attempt, grasp_point)
        total += 1
        if got.label is not None and got.label.value == attempt.label:
            agree += 1
        elif got.label is not None:
            wrong.append((attempt.policy, attempt.trial, got.label.value, attempt.label))
    incomplete = {("act128s1000-600-jitter", 4), ("act128s2000-400-jitter", 8), ("act128s3000-500-jitter", 3),
                  ("act128s3000-500-jitter", 10), ("act128s3000-500-rand", 8), ("act128s3000-500-rand", 9)}
    assert {(p, t) for p, t, _, _ in wrong} == incomplete | {("act128s1000-200-jitter", 2)}, wrong
    assert total == 110 and agree >= 91


@pytest.mark.parametrize(("policy", "trial", "why"), [
    # jaws rested at 32-35 beside the cube, then the arm rose 2.2-2.8 cm: a lift of nothing
    ("act128s3000-500-mid", 1, Reason.STOPPED_WIDE), ("act128s3000-500-rand", 2, Reason.STOPPED_WIDE),
    # let go over the bowl, the cube seen 21 cm away at its start: it was never carried
    ("act128s3000-500-jitter", 8, Reason.NOT_WHERE_LET_GO)])
def test_a_lift_or_a_release_over_the_bowl_does_not_make_a_grasp_the_jaws_and_the_frame_deny(
        grasp_point, policy, trial, why) -> None:
    attempt = next(a for a in attempts(policy, folder=ACT128) if a.trial == trial)
    assert attempt.label == "no_grasp"
    got = proposed(attempt, grasp_point)
    assert got.label is None and why in got.reasons


@pytest.mark.xfail(strict=True, reason="7 agree / 12 no proposal / 11 wrong of 30: the trace takes the policy's pause "
                                       "part-closed (about 34) for the grasp (docs/benchmarks.md, third held-out set)")
def test_a_policy_that_pauses_part_closed_before_its_grasp_meets_the_target(grasp_point) -> None:
    """A fourth small ACT (scripts/proposal_heldout, seed 4000), held out once with proposal rules C
    (docs/benchmarks.md): the issue's target (>= 98 % agreement, no wrong proposal) on it. Expected to fail
    until the hold is read from the last rest before the lift (or the gripper's load), not the first."""
    got = [(proposed(a, grasp_point), a.label) for a in attempts(folder=FOLDER.parent / "proposal_act128_s4000")]
    assert len(got) == 30
    assert not [p for p, label in got if p.label is not None and p.label.value != label]
    assert sum(p.label is not None and p.label.value == label for p, label in got) >= 0.98 * len(got)
