"""Failure anatomy on learned policies (issue 37): grasp and release read from the gripper servo's load agree
with the simulator judge's contact truth on recorded traces of learned policies, the re-analysis leaves a
locked sheet byte-identical, and the load is reported alike by the simulated and the real arm."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.cli import main
from harness.models.anatomy import ANATOMY_RULES, GraspSignal
from harness.models.protocol import Scene
from harness.models.scoresheet import load_scoresheet
from harness.models.verdict import JudgeVerdict
from harness.run.anatomy import GraspPoints, anatomy_from_rows
from harness.run.anatomy_agreement import TrialAgreement, trial_agreement
from harness.sim.units import GRIPPER_LOAD_KEY
from tests.helpers import REPO, fake_attempt, locked_sheet

FIXTURES = REPO / "tests" / "data" / "anatomy"
# The rules were set looking at these policies' attempts (rules 2 on the first five, rules 3 on all seven:
# benchmarks/anatomy_agreement.py) ...
TUNING = {"toy-act-300", "toy-act-600", "smolvla-1500", "ref-act-500-fixed", "ref-act-500-rand", "ref-act-1000-fixed",
          "ref-act-1000-rand"}
REFERENCE_ACT_TUNING = {"ref-act-500-fixed", "ref-act-500-rand", "ref-act-1000-fixed", "ref-act-1000-rand"}
# ... and are judged once, frozen, on the others: fresh attempts nobody looked at before (docs/benchmarks.md,
# "Failure anatomy on learned policies").
HELD_OUT_TARGET = 0.95
PERIOD_S = 1 / 30


@functools.cache
def _fixtures() -> dict[str, tuple[dict, dict[str, np.ndarray]]]:
    out = {}
    for path in sorted(FIXTURES.glob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        out[path.stem] = (json.loads(str(arrays.pop("meta"))), arrays)
    return out


def _rows(arrays: dict[str, np.ndarray], trial: int, with_load: bool = True) -> list[dict[str, float]]:
    columns = [str(c) for c in arrays["columns"]]
    rows = [dict(zip(columns, map(float, values), strict=True)) for values in arrays[f"trial{trial}"]]
    if not with_load:
        for row in rows:
            row.pop(f"obs.{GRIPPER_LOAD_KEY}")
    return rows


def _agreements(policies: set[str] | None, with_load: bool = True,
                grasped_only: bool = False) -> list[tuple[str, int, TrialAgreement]]:
    return [result for policy in sorted(_fixtures()) if policies is None or policy in policies
            for result in _policy_agreements(policy, with_load, grasped_only)]


@functools.cache
def _policy_agreements(policy: str, with_load: bool, grasped_only: bool) -> tuple[tuple[str, int, TrialAgreement], ...]:
    """One policy's attempts analysed once a run: the seen-alike and the timing checks read the same ones."""
    fk, scene = _grasp_points(), Scene()
    meta, arrays = _fixtures()[policy]
    results = []
    for attempt in meta["attempts"]:
        if grasped_only and not attempt["judge"]["grasped"]:
            continue
        anatomy = anatomy_from_rows(_rows(arrays, attempt["trial"], with_load), fk, scene.trained_cube_xy_cm,
                                    tuple(attempt["cube_start_cm"]), scene.bowl_xy_cm, 5.0)
        assert anatomy is not None
        verdict = JudgeVerdict.model_validate(attempt["judge"])
        results.append((policy, attempt["trial"], trial_agreement(anatomy, verdict, PERIOD_S)))
    return tuple(results)


@functools.cache
def _grasp_points() -> GraspPoints:
    return GraspPoints()


def _seen_alike(agreement: TrialAgreement) -> bool:
    return all((e.judge_s is None) == (e.anatomy_s is None) for e in (agreement.grasp, agreement.release))


def test_the_fixtures_hold_learned_policies_that_grasp_and_that_miss() -> None:
    fixtures = _fixtures()
    held_out = set(fixtures) - TUNING
    assert held_out == set(HELD_OUT), "the held-out policies' traces are not the ones committed"
    judged = [JudgeVerdict.model_validate(a["judge"]) for p in held_out for a in fixtures[p][0]["attempts"]]
    assert any(v.grasped for v in judged) and any(not v.grasped for v in judged)


# The held-out sets (every attempt of each, scored once with rules 3 frozen at d166d30), and where one set alone
# misses issue 37's target, the figure (docs/benchmarks.md, "Failure anatomy on learned policies"); the target is
# per policy, over all its sets (`POLICIES` below).
_ALONE = "under the target in this set alone (the policy's held-out attempts together meet it): "
_RANDOMIZED_WHETHER = (_ALONE + "the reference ACT at step 1,000, cubes within 3 cm, 9/10 seen alike: one "
                       "light grasp the judge confirmed as the cube slid out of jaws the servo never squeezed")
_RANDOMIZED_WHEN = (_ALONE + "the reference ACT at step 1,000, cubes within 3 cm, 8/10 (the light grasp above, "
                    "and a release 67 ms early: a cube held by the jaw tips slid out while the gripper closed)")
_SMOLVLA_WHEN = (_ALONE + "the tiny SmolVLA at step 3,000, 9/10: its one grasp, a cube lifted 3.2 cm and "
                 "dropped, dated 83 ms late and its release 303 ms early")
HELD_OUT = {"heldout-act-1000-jitter": (None, None),
            "heldout-act-1000-rand": (_RANDOMIZED_WHETHER, _RANDOMIZED_WHEN),
            # the third held-out set (session 30): a new training's step 1,000, 20 attempts per protocol, rules 3 as
            # frozen at d166d30, protocols committed before any attempt (results/anatomy/heldout3-*.yaml)
            "heldout3-act-1000-jitter": (None, None),
            "heldout3-act-1000-rand": (None, None),
            # the scattered-data ACT (session 31: the coverage experiment's scattered arm rebuilt, step 1,000, on its
            # randomized protocol), rules 3 as frozen at d166d30; 50/50 agreed, the first 25 attempts kept
            "heldout-scattered-act-1000": (None, None),
            # the tiny SmolVLA (session 31: 9 toy demonstrations, trained to step 3,000), 10 cubes within 1 cm
            "heldout-smolvla-3000": (None, _SMOLVLA_WHEN),
            # the same training resumed to step 9,000 (session 34), on a second protocol committed before any
            # attempt (results/anatomy/heldout2-smolvla-jitter.yaml: 20 cubes within 1 cm); rules 3 unchanged
            "heldout2-smolvla-9000": (None, None)}

# Issue 37's target is per policy: every held-out attempt of each, over all its sets and checkpoints.
POLICIES = {"the reference ACT": {"heldout-act-1000-jitter", "heldout-act-1000-rand", "heldout3-act-1000-jitter",
                                  "heldout3-act-1000-rand"},
            "the scattered-data ACT": {"heldout-scattered-act-1000"},
            "the tiny SmolVLA": {"heldout-smolvla-3000", "heldout2-smolvla-9000"}}


def _per_policy(which: int) -> list:
    return [pytest.param(policy, marks=pytest.mark.xfail(strict=True, reason=why[which])) if why[which] else policy
            for policy, why in HELD_OUT.items()]


@pytest.mark.parametrize("policy", _per_policy(0))
def test_held_out_grasps_and_releases_are_seen_where_the_judge_saw_them(policy: str) -> None:
    """Whether each attempt grasped and released, as the judge's contact truth says, per policy the rules were
    not set on (issue 37's target, its first half)."""
    results = _agreements({policy})
    missed = [(p, t, a.describe()) for p, t, a in results if not _seen_alike(a)]
    assert (len(results) - len(missed)) / len(results) >= HELD_OUT_TARGET, missed


@pytest.mark.parametrize("policy", _per_policy(1))
def test_held_out_grasps_and_releases_agree_with_the_judge_within_one_control_step(policy: str) -> None:
    """Issue 37's target in full, per policy: seen alike and, when both saw an event, within one control step."""
    results = _agreements({policy})
    missed = [(p, t, a.describe()) for p, t, a in results if not a.agrees]
    assert (len(results) - len(missed)) / len(results) >= HELD_OUT_TARGET, missed


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_each_policy_agrees_with_the_judge_on_95_percent_of_its_held_out_attempts(policy: str) -> None:
    """Issue 37's target as it is stated: per policy, whether and when (within one control step) each attempt
    grasped and released, over every held-out attempt of that policy."""
    assert POLICIES[policy] <= set(HELD_OUT)
    results = _agreements(POLICIES[policy])
    missed = [(p, t, a.describe()) for p, t, a in results if not a.agrees]
    assert (len(results) - len(missed)) / len(results) >= HELD_OUT_TARGET, missed


def test_every_held_out_set_belongs_to_a_policy() -> None:
    assert set().union(*POLICIES.values()) == set(HELD_OUT)


def test_the_reference_act_tuning_attempts_stay_within_one_control_step() -> None:
    """Not evidence (rules 3 were set looking at these), a guard: the reference ACT's slow close at its trained
    spot, which rules 2 dated up to a quarter second late, stays dated as the judge dates it."""
    results = _agreements(REFERENCE_ACT_TUNING)
    assert len(results) == 16 and all(a.agrees for _, _, a in results), [
        (p, t, a.describe()) for p, t, a in results if not a.agrees]


def test_without_the_load_the_old_rule_misses_a_learned_policys_grasps() -> None:
    """The held-out attempts the judge saw grasped, through rules 1's sign (the gripper stopped short of its
    command): what the stored anatomy of the coverage experiment showed; the checks above would fail on it."""
    results = _agreements(set(_fixtures()) - TUNING, with_load=False, grasped_only=True)
    assert results and sum(_seen_alike(a) for _, _, a in results) / len(results) < HELD_OUT_TARGET


def test_an_anatomy_says_its_rules_and_signal() -> None:
    meta, arrays = next(iter(_fixtures().values()))
    trial = meta["attempts"][0]["trial"]
    fk, scene = GraspPoints(), Scene()
    loaded = anatomy_from_rows(_rows(arrays, trial), fk, scene.trained_cube_xy_cm, (0, 0), scene.bowl_xy_cm, 5.0)
    bare = anatomy_from_rows(_rows(arrays, trial, False), fk, scene.trained_cube_xy_cm, (0, 0), scene.bowl_xy_cm,
                             5.0)
    assert (loaded.rules, loaded.grasp_signal) == (ANATOMY_RULES, GraspSignal.LOAD)
    assert bare.grasp_signal is GraspSignal.COMMAND
    old = loaded.model_copy(update={"rules": None, "grasp_signal": None})
    assert "rules" not in old.model_dump() and old.rules_version == 1   # a stored rules-1 record hashes as before


def _sheet_with_a_recorded_trace(tmp_path: Path, stored_rules: int | None = None) -> Path:
    """A locked sheet whose one attempt stored an anatomy of older rules (rules 1 by default), its trace in
    `runs/<sheet>/trial-001-a1`."""
    arrays, attempt = next((arrays, a) for m, arrays in _fixtures().values() for a in m["attempts"]
                           if a["judge"]["grasped"])
    rows = _rows(arrays, attempt["trial"])
    sheet = locked_sheet(tmp_path)
    fk, scene = GraspPoints(), Scene()
    stale = anatomy_from_rows(_rows(arrays, attempt["trial"], False), fk, scene.trained_cube_xy_cm, (0.0, 0.0),
                              scene.bowl_xy_cm, 5.0).model_copy(update={"rules": stored_rules, "grasp_signal": None})
    folder = tmp_path / "runs" / sheet.path.stem / "trial-001-a1"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "trajectory.parquet", index=False)
    verdict = JudgeVerdict.model_validate(attempt["judge"])
    sheet.add_attempt(fake_attempt(1, 1, verdict.label.value, judge=verdict, anatomy=stale,
                                   placement_error_cm=1.0 if verdict.label.value == "success" else None))
    return sheet.path


def test_reanalyze_recomputes_from_the_trace_and_leaves_the_locked_sheet_byte_identical(
        tmp_path, monkeypatch, capsys) -> None:
    path = _sheet_with_a_recorded_trace(tmp_path)
    before = {p.name: p.read_bytes() for p in path.parent.glob(path.name + "*")}
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--json", str(path)]) == 0
    stored = json.loads(capsys.readouterr().out)["runs"][0]["anatomy"]
    assert main(["report", "--json", "--reanalyze", str(path)]) == 0
    captured = capsys.readouterr()
    again = json.loads(captured.out)["runs"][0]["anatomy"]
    assert "anatomy recomputed for 1 attempts" in captured.err
    assert stored["rules"] == {"1": 1} and again["rules"] == {str(ANATOMY_RULES): 1}
    assert {p.name: p.read_bytes() for p in path.parent.glob(path.name + "*")} == before
    assert load_scoresheet(path).attempts[0].anatomy.rules is None


def test_a_sheet_with_older_rules_points_the_plain_report_at_reanalyze(tmp_path, capsys) -> None:
    path = _sheet_with_a_recorded_trace(tmp_path, stored_rules=ANATOMY_RULES - 1)
    assert main(["report", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Anatomy"))
    assert line == (f"Anatomy     rules {ANATOMY_RULES - 1}: 1 (older rules: harness report --reanalyze recomputes "
                    f"with rules {ANATOMY_RULES})")


def test_reanalyze_keeps_an_attempt_without_a_trace_and_says_so(tmp_path, capsys) -> None:
    path = _sheet_with_a_recorded_trace(tmp_path)
    assert main(["report", "--reanalyze", "--runs-dir", str(tmp_path / "elsewhere"), str(path)]) == 0
    captured = capsys.readouterr()
    assert "1 kept as stored: 1 no recorded trace found" in captured.err
    assert "Anatomy     rules 1: 1" in captured.out


def test_the_plain_report_carries_the_anatomy_lines(tmp_path, monkeypatch, capsys) -> None:
    path = _sheet_with_a_recorded_trace(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--reanalyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "First move  median" in out and f"Anatomy     rules {ANATOMY_RULES}: 1" in out


def _closing_loads(robot, sleep) -> tuple[float, float]:
    """Open the gripper, then close it on nothing: the strongest load seen while it closed, and the load once it
    has reached its command."""
    present = {k: v for k, v in robot.get_observation().items() if k.endswith(".pos")}
    for _ in range(30):
        robot.send_action({**present, "gripper.pos": 60.0})
        sleep()
    seen = []
    for _ in range(45):
        robot.send_action({**present, "gripper.pos": 0.0})
        sleep()
        seen.append(robot.get_observation()[GRIPPER_LOAD_KEY])
    return min(seen), seen[-1]


def test_the_simulated_arm_reports_a_closing_gripper_as_negative_load_and_a_still_one_as_none() -> None:
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.sim_so101 import SimSO101

    robot = SimSO101(SimSO101Config(render_cameras=[]))
    robot.connect()
    try:
        strongest, at_rest = _closing_loads(robot, lambda: None)
    finally:
        robot.disconnect()
    assert strongest <= -500 and abs(at_rest) < 100


@pytest.mark.slow
@pytest.mark.desk
def test_the_emulated_real_arm_reports_the_gripper_load_as_the_simulated_arm_does() -> None:
    """LeRobot's follower over the emulator's `--sim` servos reads Present_Load from the wire: the same sign and
    scale as the simulated arm's (a gripper closing pushes towards closed, negative; one at its command, none)."""
    import time

    from harness.emulator.scenario import default_scenario, open_rig
    from harness.robots.so101 import make_so101_follower

    with open_rig(default_scenario(), sim=True) as rig:
        robot = make_so101_follower(rig.port, {}, robot_id="emulated_follower", max_relative_target=None)
        robot.connect()
        try:
            strongest, at_rest = _closing_loads(robot, lambda: time.sleep(1 / 30))   # behaviour: a 30 Hz loop
        finally:
            robot.disconnect()
    assert strongest <= -500 and abs(at_rest) < 100
