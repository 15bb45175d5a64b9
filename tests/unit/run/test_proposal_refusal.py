"""Outcome proposals refuse rather than mislead (issue 59 item 5): on committed learned-policy attempts.

The attempts are real simulated runs of ACT and SmolVLA checkpoints (`tests/anatomy_traces.py`), the joints
and the gripper servo's load read as a real arm reports them, the final frame stood in for by what a top camera
sees of the judged end state, the episode's end as the simulator's (a settled cube ends it early). Where the
evidence contradicts itself, or cannot show that the sequence completed in time, the proposer proposes nothing,
and the operator's prompts offer no default to confirm with Enter. An arm that does not report the load is
read from the gripper's positions alone (`load=False`).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.models.protocol import Trial
from harness.models.taxonomy import Label
from harness.run.proposal import (
    EpisodeEnd,
    FinalView,
    GripperTrace,
    Proposal,
    Reason,
    propose,
    so101_grasp_point,
)
from harness.run.terminal import TerminalObserver
from harness.sim.scene import SceneGeometry
from tests.anatomy_traces import FOLDER, Attempt, attempts

SCENE = SceneGeometry()
SIMULATED = EpisodeEnd(20.0, ends_when_settled=True)   # the exported runs' episodes: 20 s, ended by the judge
ACT128 = FOLDER.parent / "proposal_act128"   # scripts/proposal_heldout's 110 attempts: each held out once, tuning since
S4000 = FOLDER.parent / "proposal_act128_s4000"   # ... and its seed-4000 policy's 30


@pytest.fixture(scope="module")
def grasp_point():
    return so101_grasp_point()


def proposed(attempt: Attempt, grasp_point, measured: bool = True, load: bool = True,
             episode: EpisodeEnd = SIMULATED) -> Proposal:
    trace = GripperTrace(grasp_point)
    assert attempt.loads is not None
    for joints, grip_load in zip(attempt.joints, attempt.loads, strict=True):
        trace.see(joints, grip_load if load else None)
    distance = float(attempt.judge["true_placement_error_cm"])
    view = FinalView(distance < 100 * SCENE.bowl_rim_diameter / 2, distance, 0.3) if measured else FinalView(None)
    return propose(trace, view, SCENE.bowl_xy, SCENE.bowl_rim_diameter / 2, SCENE.cube_edge / 2, episode)


def one(policy: str, trial: int, folder=FOLDER) -> Attempt:
    return next(a for a in attempts(policy, folder=folder) if a.trial == trial)


@pytest.mark.parametrize(("policy", "trial", "load", "why"), [
    # SmolVLA closed part-way without opening first, then carried the cube off and dropped it: the old rule
    # ("a gripper resting part-closed holds nothing") proposed no_grasp. With the load, the squeeze is seen, and
    # the cube's landing 9 cm from where the jaws let it go is what contradicts
    ("heldout-smolvla-3000", 4, False, Reason.RESTED_PART_CLOSED),
    ("heldout-smolvla-3000", 4, True, Reason.NOT_WHERE_LET_GO),
    # SmolVLA closed part-way on nothing, lifted and opened 14.5 cm from the bowl, the cube 8.8 cm away: the
    # old proposal was a drop, the judge's no grasp
    ("smolvla-1500", 3, False, Reason.NOT_WHERE_LET_GO),
    ("smolvla-1500", 3, True, Reason.NOT_WHERE_LET_GO),
])
def test_contradicting_evidence_is_not_proposed(grasp_point, policy: str, trial: int, load: bool, why: Reason) -> None:
    got = proposed(one(policy, trial), grasp_point, load=load)
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
    """140 attempts of 14 policy runs: before, 4 proposals were wrong and none refused; now 136 agree, 3 are
    refused and at most the one the joints cannot tell (ACT's cube slipping from closing jaws,
    heldout-act-1000-rand trial 1: the judge saw a 0.25 s hold, the gripper closed to its stop) is wrong.
    (137 agreed at rules D: trial 2 of the same run, a squeeze lost at once without a lift, is refused since
    rules E, as its twin the judge called no grasp is: `test_a_squeeze_lost_at_once_is_not_proposed`.)"""
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
    assert agree / total >= (0.97 if measured else 0.955)
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


# Cubes let go over the bowl and seen inside it that the judge did not call a success: never at rest in the bowl
# for its 0.5 s before the 20 s limit ("inside the bowl but the sequence was incomplete"). The joints after the
# release are those of the policy's successes (it withdraws and never comes back near the cube): what differs is
# that a settled cube would have ended the simulated episode 1.5 s later, and these ran to the limit. A grasped,
# lifted cube let go over the bowl whose episode ran to its limit is the judge's wrong placement, whatever
# the final frame shows: refused at rules D, proposed so since rules E.
INCOMPLETE = [(ACT128, "act128s1000-600-jitter", 4), (ACT128, "act128s2000-400-jitter", 8),
              (ACT128, "act128s3000-500-jitter", 3), (ACT128, "act128s3000-500-jitter", 10),
              (ACT128, "act128s3000-500-rand", 8), (ACT128, "act128s3000-500-rand", 9),
              (S4000, "act128s4000-500-jitter", 2), (S4000, "act128s4000-500-jitter", 8)]


@pytest.mark.parametrize(("folder", "policy", "trial"), INCOMPLETE)
def test_a_release_over_the_bowl_never_seen_to_settle_in_time_is_a_wrong_placement(grasp_point, folder, policy,
                                                                                     trial) -> None:
    attempt = one(policy, trial, folder)
    assert attempt.label == "wrong_placement" and "incomplete" in attempt.judge["detail"]
    got = proposed(attempt, grasp_point)
    assert got.label is Label.WRONG_PLACEMENT and Reason.NEVER_SETTLED in got.reasons
    assert Reason.OPENED_OVER_BOWL in got.reasons and Reason.CUBE_IN_BOWL in got.reasons
    # the episode's end is the only evidence: read as a real arm's (which always runs to its limit), the same
    # joints and frame are proposed a success, the known limit (docs/benchmarks.md)
    assert proposed(attempt, grasp_point, episode=EpisodeEnd(20.0)).label is Label.SUCCESS


def _placed(open_before_end_s: float, episode: EpisodeEnd) -> Proposal:
    """A synthetic pick and place read with the load: opened, closed on the cube (the servo squeezing), lifted,
    carried over the bowl and let go `open_before_end_s` before the episode's last observation."""
    bx, by = SCENE.bowl_xy
    trace = GripperTrace(lambda joints: np.array([joints["shoulder_pan"], joints["shoulder_lift"],
                                                  joints["elbow_flex"]]))
    frames = [(60.0, 0.25, 0.0, 0.02, 0.0)] * 10 + [(18.0, 0.25, 0.0, 0.02, -1000.0)] * 12 \
        + [(18.0, 0.25, 0.0, 0.10, -1000.0)] * 10 + [(18.0, bx, by, 0.08, -1000.0)] * 30
    tail = round(open_before_end_s * 30)
    frames += [(60.0, bx, by, 0.10, 0.0)] * tail
    for grip, x, y, z, load in frames:
        trace.see({"gripper": grip, "shoulder_pan": x, "shoulder_lift": y, "elbow_flex": z}, load)
    return propose(trace, FinalView(True, 1.0, 0.3), SCENE.bowl_xy, SCENE.bowl_rim_diameter / 2,
                   SCENE.cube_edge / 2, episode)


def test_a_cube_let_go_too_near_the_end_is_not_proposed_a_success() -> None:
    """The judge wants the cube at rest in the bowl for 0.5 s before the limit; let go 0.4 s before the end
    nothing can show it settled, whatever the final frame shows: refused. Let go 2 s before: a success."""
    real_arm = EpisodeEnd(20.0)
    late = _placed(0.4, real_arm)
    assert late.label is None and Reason.LET_GO_LATE in late.reasons
    assert _placed(2.0, real_arm).label is Label.SUCCESS
    # a simulated episode that ended early (its judge's verdict) says it settled: proposed
    assert _placed(2.0, SIMULATED).label is Label.SUCCESS


@pytest.mark.parametrize(("policy", "trial", "judged", "from_positions"), [
    # the seed-4000 ACT closes to ~34, pauses, then closes on the cube: positions alone date the hold at the
    # pause, so the lift from it reads as no lift and the release as "in the air away from the bowl"
    ("act128s4000-500-rand", 5, Label.SUCCESS, Label.WRONG_PLACEMENT),
    # ... or it closes on nothing after the pause and carries nothing: positions alone read a drop
    ("act128s4000-500-jitter", 4, Label.NO_GRASP, Label.GRASPED_THEN_DROPPED),
    ("act128s4000-500-jitter", 5, Label.NO_GRASP, Label.GRASPED_THEN_DROPPED),
    ("act128s4000-500-mid", 10, Label.NO_GRASP, Label.GRASPED_THEN_DROPPED),
])
def test_a_pause_part_closed_is_not_the_grasp_the_servos_squeeze_is(grasp_point, policy, trial, judged,
                                                                     from_positions) -> None:
    attempt = one(policy, trial, S4000)
    assert attempt.label == judged.value
    assert proposed(attempt, grasp_point, load=False).label is from_positions   # the old reading, wrong
    got = proposed(attempt, grasp_point)
    assert got.label is judged
    why = {Reason.SQUEEZED_SOMETHING} if judged is Label.SUCCESS else {Reason.NEVER_SQUEEZED, Reason.CLOSED_ON_NOTHING}
    assert why & set(got.reasons)


@pytest.mark.parametrize(("policy", "trial", "why"), [
    # jaws closed to 23-33 and held there beside the cube (the command, not the cube, stopped them), never lifting
    ("act128s2000-400-rand", 2, Reason.STOPPED_WIDE), ("act128s2000-400-rand", 3, Reason.STOPPED_WIDE),
    ("act128s2000-400-rand", 5, Reason.STOPPED_WIDE), ("act128s2000-400-rand", 8, Reason.STOPPED_WIDE),
    ("act128s1000-400-rand", 2, Reason.STOPPED_WIDE),
    # jaws rested at 32-35 beside the cube, then the arm rose 2.2-2.8 cm: a lift of nothing
    ("act128s3000-500-mid", 1, Reason.STOPPED_WIDE), ("act128s3000-500-rand", 2, Reason.STOPPED_WIDE),
    # let go over the bowl, the cube seen 21 cm away at its start: it was never carried
    ("act128s3000-500-jitter", 8, Reason.NOT_WHERE_LET_GO)])
def test_jaws_that_stopped_without_squeezing_hold_nothing(grasp_point, policy, trial, why) -> None:
    """From the positions alone these rests part-closed may be on the cube or short of it: refused (they were
    proposed wrong_placement or success before). The servo's load says no squeeze: the judge's no grasp."""
    attempt = one(policy, trial, ACT128)
    assert attempt.label == "no_grasp"
    without = proposed(attempt, grasp_point, load=False)
    assert without.label is None and why in without.reasons
    got = proposed(attempt, grasp_point)
    assert got.label is Label.NO_GRASP and {Reason.NEVER_SQUEEZED, Reason.CLOSED_ON_NOTHING} & set(got.reasons)


# the judge saw a 0.25-0.5 s hold of a cube that slipped out of closing jaws; the servo never squeezed it
BRIEF_GRABS = {("heldout-act-1000-rand", 1), ("act128s1000-200-jitter", 2), ("act128s4000-500-mid", 1),
               ("act256s7000-600-rand", 10)}
S5000 = FOLDER.parent / "proposal_act128_s5000"   # a fifth small ACT, held out once at rules D
S7000 = FOLDER.parent / "proposal_act256_s7000"   # a dim-256 ACT, 900 steps, held out once at rules D
TUNING = (FOLDER, ACT128, S4000, S5000, S7000)


def test_across_all_400_tuning_attempts_the_only_wrong_proposals_are_grabs_the_servo_never_felt(grasp_point) -> None:
    """The committed 140, then scripts/proposal_heldout's 110, 30, 60 and 60, each held out once, tuning since:
    at rules D 374 agree, 21 refused, 5 wrong; at rules E 392 agree, 4 refused, 4 wrong (docs/benchmarks.md).
    What is refused: a squeeze lost at once (two, the judge split on them), a drop and a no grasp whose cubes
    were seen far from where the jaws let go after holds that began high above the table."""
    wrong, refused, agree = set(), set(), 0
    for folder in TUNING:
        for attempt in attempts(folder=folder):
            got = proposed(attempt, grasp_point)
            if got.label is None:
                refused.add((attempt.policy, attempt.trial))
            elif got.label.value == attempt.label:
                agree += 1
            else:
                wrong.add((attempt.policy, attempt.trial))
    assert wrong == BRIEF_GRABS
    assert refused == {("heldout-act-1000-rand", 2), ("act256s7000-900-jitter", 2), ("heldout-smolvla-3000", 4),
                       ("smolvla-1500", 3)}
    assert agree >= 392


@pytest.mark.xfail(strict=True, reason="29 agree / 0 no proposal / 1 wrong of 30 (rules E, tuned on it): a 0.5 s grab"
                                       " the servo never felt (docs/benchmarks.md)")
def test_a_policy_that_pauses_part_closed_before_its_grasp_meets_the_target(grasp_point) -> None:
    """A fourth small ACT (scripts/proposal_heldout, seed 4000), held out once with proposal rules C
    (docs/benchmarks.md): the issue's target (>= 98 % agreement, no wrong proposal) on it. With the load its
    pause is no longer the grasp; what keeps it under the target is evidence no rule reads."""
    got = [(proposed(a, grasp_point), a.label) for a in attempts(folder=S4000)]
    assert len(got) == 30
    assert not [p for p, label in got if p.label is not None and p.label.value != label]
    assert sum(p.label is not None and p.label.value == label for p, label in got) >= 0.98 * len(got)


def test_a_policy_held_out_at_rules_d_gets_no_wrong_proposal(grasp_point) -> None:
    """scripts/proposal_heldout with seed 5000 (checkpoints 200/400/600 on protocols from seeds 8181 and 8383),
    judged once after rules D were frozen: 56 agree, 4 refused (three incomplete sequences, one drop that landed
    far from where it was let go), none wrong (docs/benchmarks.md). Seen since: tuning data from here on."""
    got = [(proposed(a, grasp_point), a) for a in attempts(folder=S5000)]
    assert len(got) == 60
    assert not [(a.policy, a.trial) for p, a in got if p.label is not None and p.label.value != a.label]
    assert sum(p.label is not None and p.label.value == a.label for p, a in got) >= 56
    # an incomplete sequence, the cube let go under 1 s before the end: its simulated episode ran to the limit,
    # so the judge's wrong placement (rules E; refused at rules D); a real arm's episode says nothing: refused
    late = one("act128s5000-200-jitter", 6, S5000)
    assert proposed(late, grasp_point).label is Label.WRONG_PLACEMENT
    real_arm = proposed(late, grasp_point, episode=EpisodeEnd(20.0))
    assert real_arm.label is None and Reason.LET_GO_LATE in real_arm.reasons


def test_a_differently_shaped_policy_held_out_at_rules_d(grasp_point) -> None:
    """scripts/proposal_heldout with DIM=256 STEPS=900 SEED=7000 (checkpoints 300/600/900 on protocols from seeds
    8585 and 8787), judged once after rules D were frozen: 52 agree, 6 refused, 2 wrong (docs/benchmarks.md): a
    0.25 s grab the servo never felt and a 0.27 s squeeze of a corner the judge did not count. Tuning data since;
    the two wrong ones pinned here until a rule reads them."""
    wrong, agree = set(), 0
    for attempt in attempts(folder=S7000):
        got = proposed(attempt, grasp_point)
        if got.label is not None and got.label.value == attempt.label:
            agree += 1
        elif got.label is not None:
            wrong.add((attempt.policy, attempt.trial))
    assert wrong <= {("act256s7000-600-rand", 10), ("act256s7000-900-jitter", 2)}
    assert agree >= 52


@pytest.mark.parametrize(("folder", "policy", "trial"), [
    (ACT128, "act128s1000-400-jitter", 4), (S5000, "act128s5000-600-rand", 7), (S7000, "act256s7000-300-jitter", 4),
    (S7000, "act256s7000-300-jitter", 6), (S7000, "act256s7000-600-rand", 9)])
def test_a_cube_squeezed_out_of_the_jaws_in_the_air_is_a_drop_where_it_was_flung(grasp_point, folder, policy,
                                                                                  trial) -> None:
    """Picked off the table, lifted 5-8 cm, then the jaws closed on past it to their stop: the cube squirted out
    and landed 5.0-8.4 cm from where the jaws let go. A cube opened out of the jaws lands within 4 cm; one
    squeezed out is flung, within 10 cm: the judge's drop (refused at rules D as "far from where it was let go")."""
    attempt = one(policy, trial, folder)
    assert attempt.label == "grasped_then_dropped"
    got = proposed(attempt, grasp_point)
    assert got.label is Label.GRASPED_THEN_DROPPED
    assert Reason.LIFTED in got.reasons and Reason.NOT_WHERE_LET_GO not in got.reasons
    unseen = proposed(attempt, grasp_point, measured=False)   # where it landed is still what says so
    assert unseen.label is None and Reason.LANDING_UNSEEN in unseen.reasons


def test_a_hold_that_began_high_above_the_table_gets_no_flung_allowance(grasp_point) -> None:
    """SmolVLA squeezed at 17 with the grasp point 6.8 cm up (a cube on the table is squeezed at about 2), lifted,
    closed to its stop 14.5 cm from the bowl, the cube seen 8.8 cm from it: the judge saw no grasp. A squeeze
    that high had no cube on the table in it, so the landing rule stays the opened cube's 4 cm: refused."""
    got = proposed(one("smolvla-1500", 3), grasp_point)
    assert got.label is None and Reason.NOT_WHERE_LET_GO in got.reasons


@pytest.mark.parametrize(("policy", "trial", "folder", "judged"), [
    ("act256s7000-900-jitter", 2, S7000, Label.NO_GRASP), ("heldout-act-1000-rand", 2, FOLDER, Label.WRONG_PLACEMENT)])
def test_a_squeeze_lost_at_once_is_not_proposed(grasp_point, policy, trial, folder, judged) -> None:
    """The servo squeezed something at 11-12 units for the steady span, then within 0.07 s the jaws closed on
    past it to their stop, nothing lifted. The judge called one of these a grasp (wrong placement) and the other
    none: nothing in the joints tells them apart, so neither is proposed (rules D proposed both a wrong
    placement, one wrong). A squeeze held 0.2 s or more before it was lost stays a wrong placement."""
    attempt = one(policy, trial, folder)
    assert attempt.label == judged.value
    got = proposed(attempt, grasp_point)
    assert got.label is None and Reason.LOST_AT_ONCE in got.reasons
    kept = proposed(one("act256s7000-900-rand", 3, S7000), grasp_point)   # lost 0.2 s after the hold
    assert kept.label is Label.WRONG_PLACEMENT


S6000 = FOLDER.parent / "proposal_act64_s6000"   # a dim-64, two-encoder-layer ACT, held out once at rules E


def test_a_policy_held_out_at_rules_e_gets_no_wrong_proposal(grasp_point) -> None:
    """scripts/proposal_heldout with DIM=64 ENC_LAYERS=2 STEPS=800 SAVE_FREQ=200 SEED=6000 (checkpoints
    200/400/600/800 on protocols from seeds 9191 and 9393), judged once after rules E were frozen: 79 agree, 1
    refused (a cube opened out of the jaws seen far from where they let it go), none wrong (docs/benchmarks.md).
    Tuning data from here on."""
    got = [(proposed(a, grasp_point), a) for a in attempts(folder=S6000)]
    assert len(got) == 80
    assert not [(a.policy, a.trial) for p, a in got if p.label is not None and p.label.value != a.label]
    assert sum(p.label is not None and p.label.value == a.label for p, a in got) >= 79
    refused = [p for p, _ in got if p.label is None]
    assert len(refused) == 1 and Reason.NOT_WHERE_LET_GO in refused[0].reasons


# Proposal rules F: the judge's placement conditions a real arm's joints show (docs/benchmarks.md, rules F). A success
# needs the cube let go over the bowl at most 12 cm above its floor, the gripper then withdrawn 4 cm from the cube,
# and the cube at rest in the bowl; the trace reads the first two from the grasp point, with their allowances.

IN_BOWL = FinalView(True, 1.0, 0.3)


def _let_go_over_the_bowl(release_z: float, after: list[tuple[float, float, float]],
                          view: FinalView = IN_BOWL, dx: float = 0.0) -> Proposal:
    """A synthetic pick and place read with the load (as `_placed`), let go over the bowl (`dx` from its centre)
    with the grasp point `release_z` above the table, the grasp point then following `after` (x, y, z: one
    observation each), the episode a real arm's (its end says nothing)."""
    bx, by = SCENE.bowl_xy
    bx += dx
    trace = GripperTrace(lambda joints: np.array([joints["shoulder_pan"], joints["shoulder_lift"],
                                                  joints["elbow_flex"]]))
    frames = [(60.0, 0.25, 0.0, 0.02, 0.0)] * 10 + [(18.0, 0.25, 0.0, 0.02, -1000.0)] * 12 \
        + [(18.0, 0.25, 0.0, 0.10, -1000.0)] * 10 + [(18.0, bx, by, release_z, -1000.0)] * 30 \
        + [(60.0, x, y, z, 0.0) for x, y, z in [(bx, by, release_z), *after]]
    for grip, x, y, z, load in frames:
        trace.see({"gripper": grip, "shoulder_pan": x, "shoulder_lift": y, "elbow_flex": z}, load)
    return propose(trace, view, SCENE.bowl_xy, SCENE.bowl_rim_diameter / 2, SCENE.cube_edge / 2, EpisodeEnd(20.0))


def _over_bowl(z: float, samples: int) -> list[tuple[float, float, float]]:
    return [(*SCENE.bowl_xy, z)] * samples


HALF_AND_FLOOR = SCENE.cube_edge / 2 + 0.004   # the grasp point this high holds the cube's bottom on the bowl floor


@pytest.mark.parametrize(("above_floor_m", "label", "why"), [
    (0.07, Label.SUCCESS, Reason.OPENED_OVER_BOWL),             # the ACTs let go 4-9 cm up (as the trace reads it)
    (0.13, None, Reason.RELEASE_HEIGHT_UNSURE),                # the judge's 12 cm, within the trace's allowances
    (0.20, Label.WRONG_PLACEMENT, Reason.OPENED_TOO_HIGH)])    # dropped in: "inside the bowl, sequence incomplete"
def test_a_cube_let_go_high_over_the_bowl_was_dropped_in_not_placed(above_floor_m, label, why) -> None:
    got = _let_go_over_the_bowl(HALF_AND_FLOOR + above_floor_m, _over_bowl(HALF_AND_FLOOR + above_floor_m + 0.05, 60))
    assert got.label is label and why in got.reasons


def test_a_cube_dropped_from_high_over_the_bowl_that_bounced_out_is_a_drop() -> None:
    """The judge's drop is a release higher than 4 cm not over the bowl, and one over it higher than a placement
    counts as not over it: let go 4 cm from the bowl's centre, seen landing 6.5 cm from it (outside its rim, within
    4 cm of where it was let go), a drop."""
    z = HALF_AND_FLOOR + 0.20
    got = _let_go_over_the_bowl(z, _over_bowl(z + 0.05, 60), FinalView(False, 6.5, 0.3), dx=0.04)
    assert got.label is Label.GRASPED_THEN_DROPPED and Reason.OPENED_TOO_HIGH in got.reasons


@pytest.mark.parametrize(("stay_m", "label", "why"), [
    (0.015, Label.WRONG_PLACEMENT, Reason.NEVER_WITHDREW),   # set down and left there: the judge never saw it withdraw
    (0.045, None, Reason.WITHDRAWAL_UNSURE),                 # about the judge's 4 cm: unknown
    (0.10, Label.SUCCESS, Reason.OPENED_OVER_BOWL)])
def test_a_gripper_that_stays_at_the_cube_after_letting_go_never_withdrew(stay_m, label, why) -> None:
    """Set down on the bowl floor (grasp point 1.5 cm above where the cube lies) and the jaws opened; then the
    grasp point stays `stay_m` from it for the rest of the episode (2 s)."""
    got = _let_go_over_the_bowl(HALF_AND_FLOOR + 0.015, _over_bowl(HALF_AND_FLOOR + stay_m, 60))
    assert got.label is label and why in got.reasons


def test_a_gripper_that_came_back_to_the_cube_after_letting_go_is_not_proposed() -> None:
    """Let go 7 cm up, withdrawn to 12 cm, then down again to 2 cm from where the cube lies (the jaws reach it):
    whether the cube had settled before (the judge's success) or was moved, unknown. Back only to 4 cm: a success."""
    up = _over_bowl(HALF_AND_FLOOR + 0.12, 20)
    got = _let_go_over_the_bowl(HALF_AND_FLOOR + 0.07, up + _over_bowl(HALF_AND_FLOOR + 0.02, 10) + up)
    assert got.label is None and Reason.CAME_BACK in got.reasons
    near = _let_go_over_the_bowl(HALF_AND_FLOOR + 0.07, up + _over_bowl(HALF_AND_FLOOR + 0.04, 10) + up)
    assert near.label is Label.SUCCESS


def _arm_at(point: tuple[float, float, float], like: dict[str, float]) -> dict[str, float]:
    """Joints (LeRobot units) with the SO-101's grasp point at `point`, pointing down, the gripper as in `like`."""
    from harness.models.protocol import JOINT_NAMES
    from harness.sim.kinematics import TopDownIK
    from harness.sim.scene import build_model
    from harness.sim.units import from_sim, to_sim

    arm = JOINT_NAMES[:5]
    ik = TopDownIK(build_model(SCENE))
    seed = np.array([to_sim(name, like[name]) for name in arm])
    q, error = ik.solve_reachable(np.asarray(point), ik.target_rotation(0.0, seed), seed)
    assert error < 0.005
    return {**{name: from_sim(name, float(v)) for name, v in zip(arm, q, strict=True)}, "gripper": like["gripper"]}


def test_a_real_success_whose_arm_came_back_to_the_cube_is_not_proposed(grasp_point) -> None:
    """ACT's success (released 5.9 s in, the judge's cube at rest in the bowl 0.7 s later), its joints then taken
    back down to 2.5 cm above where the cube lies for 0.5 s before its own path resumes."""
    attempt = one("act128s3000-500-jitter", 1, ACT128)
    assert attempt.label == "success" and proposed(attempt, grasp_point).label is Label.SUCCESS
    trace = GripperTrace(grasp_point)
    for joints, load in zip(attempt.joints, attempt.loads or [], strict=True):
        trace.see(joints, load)
    assert trace.release_xyz is not None and trace.released_at is not None
    x, y, _ = trace.release_xyz
    cut = trace.released_at + 20
    down = _arm_at((x, y, HALF_AND_FLOOR + 0.025), attempt.joints[cut])
    joints = [*attempt.joints[:cut], *[down] * 15, *attempt.joints[cut:]]
    loads = [*(attempt.loads or [])[:cut], *[0.0] * 15, *(attempt.loads or [])[cut:]]
    back = Attempt(attempt.policy, attempt.trial, attempt.judge, joints, loads)
    got = proposed(back, grasp_point, episode=EpisodeEnd(20.0))
    assert got.label is None and Reason.CAME_BACK in got.reasons


def test_the_placement_bands_are_the_judges() -> None:
    """One definition: the proposer reads the judge's placement limits, not numbers of its own."""
    from harness.run.proposal import GripperBands
    from harness.sim.judge import JudgeThresholds

    bands, judge = GripperBands(), JudgeThresholds()
    assert (bands.release_max_height_m, bands.withdraw_min_m, bands.lift_min_m, bands.drop_min_height_m) == \
        (judge.release_max_height_m, judge.withdraw_min_m, judge.lift_min_m, judge.drop_min_height_m)


S8000 = FOLDER.parent / "proposal_act96_s8000"   # a dim-96, three-encoder-layer ACT, held out once at rules F


@pytest.mark.parametrize("episode", [SIMULATED, EpisodeEnd(20.0)])
def test_a_policy_held_out_at_rules_f_gets_no_wrong_proposal(grasp_point, episode) -> None:
    """scripts/proposal_heldout with DIM=96 ENC_LAYERS=3 SEED=8000 (checkpoints 200/400/600 on protocols from seeds
    9595 and 9797), judged once after rules F were frozen: 60 agree, read with the simulated episode's end and as a
    real arm's (docs/benchmarks.md, rules F). An easy set (56 judged no grasp, 4 successes). Tuning data since."""
    got = [(proposed(a, grasp_point, episode=episode), a) for a in attempts(folder=S8000)]
    assert len(got) == 60
    assert [(a.policy, a.trial) for p, a in got if p.label is None or p.label.value != a.label] == []


S9100 = FOLDER.parent / "proposal_act96_s9100"   # a dim-96, one-encoder-layer ACT, held out once in session 48


@pytest.mark.parametrize("episode", [SIMULATED, EpisodeEnd(20.0)])
def test_a_squeeze_read_only_once_the_cube_rose_is_a_lift_from_where_the_jaws_closed(grasp_point, episode) -> None:
    """scripts/proposal_heldout with DIM=96 SEED=9100 STEPS=900 (checkpoints 300/600/900 on protocols from seeds 9811
    and 9833), judged once: 59 agree and one wrong. act96s9100-900-rand trial 10 closed its jaws on the cube at the
    table (grasp point 2.0 cm up) and carried it into the bowl, but the servo's squeeze was read only at 9.2 cm, as
    the cube rose; the lift, read from there, was 1.6 cm, under the judge's 2, and a success was proposed as no
    grasp. The lift is measured from where the jaws closed. Tuning data since."""
    got = [(proposed(a, grasp_point, episode=episode), a) for a in attempts(folder=S9100)]
    assert len(got) == 60
    late = next(p for p, a in got if (a.policy, a.trial) == ("act96s9100-900-rand", 10))
    assert late.label is Label.SUCCESS and Reason.LIFTED in late.reasons, late.line()
    assert [(a.policy, a.trial) for p, a in got if p.label is None or p.label.value != a.label] == []


S9200 = FOLDER.parent / "proposal_act192_s9200"   # a dim-192 ACT, held out once in session 48 after the lift's fix


@pytest.mark.parametrize("episode", [SIMULATED, EpisodeEnd(20.0)])
def test_a_release_at_the_rim_or_just_before_the_limit_gets_no_proposal(grasp_point, episode) -> None:
    """scripts/proposal_heldout with DIM=192 SEED=9200 (checkpoints 200/400/600 on protocols from seeds 9851 and 9877),
    judged once after the lift's fix: 58 agree, 1 refused, 1 wrong with the simulated episode's end (600-jitter trial
    3: let go 1.27 s before the limit and settled as it came, proposed a cube that never settled) and 57 / 2 / 1 read
    as a real arm's (600-rand trial 10: let go 0.8 mm inside the rim by the grasp point, 1.2 mm outside by the judge's
    cube, proposed a success). Both are now refused; no wrong proposal is left. Tuning data since."""
    got = {(a.policy, a.trial): (proposed(a, grasp_point, episode=episode), a) for a in attempts(folder=S9200)}
    assert len(got) == 60
    assert Reason.RELEASE_AT_RIM in got[("act192s9200-600-rand", 10)][0].reasons
    if episode.ends_when_settled:
        assert Reason.LET_GO_LATE in got[("act192s9200-600-jitter", 3)][0].reasons
    assert [key for key, (p, a) in got.items() if p.label is not None and p.label.value != a.label] == []
    assert sum(p.label is not None and p.label.value == a.label for p, a in got.values()) >= 56


S9300 = FOLDER.parent / "proposal_act128_s9300"   # a dim-128 ACT, held out once in session 48 at rules H
S9400 = FOLDER.parent / "proposal_act192_s9400"   # ... and two dim-192 ones
S9500 = FOLDER.parent / "proposal_act192_s9500"


@pytest.mark.parametrize("episode", [SIMULATED, EpisodeEnd(20.0)])
@pytest.mark.parametrize("folder", [S9300, S9400, S9500], ids=["act128s9300", "act192s9400", "act192s9500"])
def test_a_policy_held_out_at_rules_h_gets_no_wrong_proposal(grasp_point, episode, folder) -> None:
    """scripts/proposal_heldout with DIM=128 SEED=9300 STEPS=800 N=15 (checkpoints 400/800 on protocols from seeds 9911
    and 9933), DIM=192 SEED=9400 STEPS=600 SAVE_FREQ=300 N=15 (checkpoints 300/600; seeds 9951 and 9977) and DIM=192
    SEED=9500 (checkpoints 200/400/600; seeds 9961 and 9983), each judged once after rules H were frozen: 60 of 60
    agree, read with the simulated episode's end and as a real arm's (4, 8 and 25 successes). Tuning data since."""
    got = [(proposed(a, grasp_point, episode=episode), a) for a in attempts(folder=folder)]
    assert len(got) == 60
    assert [(a.policy, a.trial) for p, a in got if p.label is None or p.label.value != a.label] == []
