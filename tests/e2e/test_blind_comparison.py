"""Blind comparisons end to end on the simulated arm: the schedule, blinding, the decision, resume, refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.app.parts import Parts, make_policy
from harness.cli import main
from harness.models.comparison import build_schedule, unseal
from harness.models.protocol import load_protocol
from harness.models.run_settings import RunSettings
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from tests.helpers import refused, wait_until

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
SHEET = Path("scoresheets/cmp-comparison.yaml")


def _protocol(folder: Path, min_difference: float = 0.6, cap: int = 47, **rule: object) -> Path:
    """The randomized protocol's first eight start positions at least 3 cm off the trained spot (the
    replay policy, blind to the cube, misses them; the expert does not)."""
    data = yaml.safe_load((REPO / "protocols" / "randomized.yaml").read_text())
    data["trials"] = [t for t in data["trials"] if t["dx_cm"] ** 2 + t["dy_cm"] ** 2 >= 9][:8]
    data["generator"] = None
    data["episode_time_limit_s"] = 12.0
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": min_difference,
                             "max_trials_per_arm": cap, **rule}
    path = folder / "protocols" / "cmp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path




def _arm_of(sheet) -> dict[int, str]:
    return {slot.number: slot.arm for slot in sheet.comparison.schedule()}


@pytest.mark.slow
def test_expert_against_replay_stops_early_blind_and_the_report_reveals_expert(workdir, capsys) -> None:
    protocol = _protocol(workdir)
    assert main(["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
                 "--no-video"]) == 0
    live = capsys.readouterr()
    sheet = load_scoresheet(SHEET)
    mapping = unseal(sheet.locked.comparison.sealed)
    expert = next(code for code, arm in mapping.items() if arm.ref == "expert")
    assert f"decision: {expert} better than" in live.out
    traces = sheet.comparison.traces()
    assert traces[0].winner() == expert
    assert traces[0].final.pairs < sheet.locked.comparison.design.fixed_sample_pairs   # stopped early
    # blind while it ran: no surface names a policy
    evidence = list(Path("runs").rglob("*"))
    surfaces = [live.out, live.err, SHEET.read_text(), *(str(p) for p in evidence),
                *(p.read_text() for p in evidence if p.suffix in (".json", ".log", ".yaml", ".txt"))]
    for surface in surfaces:
        surface = surface.replace(str(workdir), "").lower()   # the test's own folder is named after it
        assert "expert" not in surface and "replay" not in surface
    # the attempts followed the locked schedule, slot after slot, each arm once per block
    assert [a.trial_index for a in sheet.attempts] == list(range(1, len(sheet.attempts) + 1))
    assert len(sheet.attempts) % 2 == 0
    assert main(["report", str(SHEET)]) == 0
    report = capsys.readouterr().out
    assert f"{expert}             expert" in report and "revealed (the run has ended)" in report


@pytest.mark.slow
def test_expert_against_an_expert_twin_ends_without_a_winner(workdir, capsys) -> None:
    """Two arms that behave alike: futility or the cap, never a winner. The twin is a folder the injected
    policy factory runs as the expert (a comparison refuses the same policy twice)."""
    from harness.app.commands.run import register
    from harness.app.run_command import run_from_args

    twin = workdir / "expert-twin"
    twin.mkdir()
    (twin / "marker.txt").write_text("the same behaviour, other files")
    protocol = _protocol(workdir, min_difference=0.7, cap=32)

    def policy(ref, *rest):
        return make_policy("expert" if ref == str(twin) else ref, *rest)

    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["run", str(protocol), "--policy", "expert", "--policy", str(twin), "--robot", "sim",
                              "--headless", "--no-video"])
    assert run_from_args(args, Parts(policy=policy)) == 0
    out = capsys.readouterr().out
    sheet = load_scoresheet(SHEET)
    trace = sheet.comparison.traces()[0]
    assert trace.winner() is None and trace.final.decision.final
    assert "decision: A vs B: " in out and "better than" not in out


RUNNER = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.slow
def test_a_comparison_is_a_run_request_like_any_run_and_its_settings_reach_the_sheet(workdir, capsys) -> None:
    """No argument list: `harness.run_request` with two policies runs the comparison, and the request's settings
    (what `harness run`'s flags set) are the ones the comparison locks and runs with."""
    from harness.app.run_command import run_request
    from harness.models.run_request import RunRequest

    protocol = _protocol(workdir)
    sheet_path = workdir / "elsewhere" / "blind.yaml"
    request = RunRequest(protocol=protocol, policies=("expert", "replay"), robot={"kind": "sim"}, headless=True,
                         max_trials=2, latency=40.0, scoresheet=sheet_path, runs_dir=workdir / "evidence",
                         rename_map={"top": "camera1"}, evidence={"no_video": True})
    assert run_request(request) == 0
    sheet = load_scoresheet(sheet_path)
    assert sheet.locked.comparison is not None and sheet.locked.comparison.blind
    assert len(sheet.attempts) == 2                                   # --max-trials
    assert sheet.latency_ms == 40.0 and sheet.settings.rename_map == {"top": "camera1"}
    assert (workdir / "evidence" / "blind").is_dir() and not Path("runs").exists()
    assert not Path("scoresheets").exists()
    assert "the comparison is still open" in capsys.readouterr().out


@pytest.mark.slow
def test_a_comparison_on_two_workers_records_the_serial_schedule_and_stops_where_it_would(workdir, capsys) -> None:
    """`--workers 2`: each slot to the next free worker, recorded in slot order; the decision is taken on the
    same complete blocks as a serial run, so the sheet ends at the very block where a serial run stops (a slot
    a worker ran beyond it is not recorded), and a resume has nothing left to run."""
    protocol = _protocol(workdir)
    argv = ["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
            "--no-video", "--workers", "2"]
    assert main(argv) == 0
    live = capsys.readouterr()
    sheet = load_scoresheet(SHEET)
    comparison = sheet.locked.comparison
    assert sheet.comparison.schedule() == build_schedule(*comparison.schedule_args())
    assert [a.trial_index for a in sheet.attempts] == list(range(1, len(sheet.attempts) + 1))
    trace = sheet.comparison.traces()[0]
    assert trace.final.decision.final and len(sheet.attempts) == 2 * trace.final.pairs   # not one slot more
    assert trace.winner() == next(code for code, arm in unseal(comparison.sealed).items() if arm.ref == "expert")
    assert "decision: " in live.out
    for surface in (live.out, live.err, *(str(p) for p in Path("runs").rglob("*"))):
        assert "expert" not in surface.replace(str(workdir), "") and "replay" not in surface
    assert main([*argv, "--resume"]) == 0 and "has ended" in capsys.readouterr().out


@pytest.mark.slow
def test_sigkill_mid_run_and_resume_continue_the_exact_schedule(workdir) -> None:
    protocol = _protocol(workdir)
    argv = ["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
            "--no-video"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", RUNNER, *argv], cwd=workdir, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: SHEET.exists() and len(load_scoresheet(SHEET).attempts) >= 3, 240, "three attempts")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    before = load_scoresheet(SHEET)
    locked = json.dumps(before.locked_data, sort_keys=True)
    assert main([*argv, "--resume"]) == 0
    after = load_scoresheet(SHEET)
    assert json.dumps(after.locked_data, sort_keys=True) == locked            # same seed, same sealed mapping
    comparison = after.locked.comparison
    assert after.comparison.schedule() == build_schedule(*comparison.schedule_args())
    scored = [a.trial_index for a in after.scored_attempts()]
    assert scored == list(range(1, len(scored) + 1))                          # no slot skipped or reordered
    assert after.attempts[:len(before.attempts)] == before.attempts
    assert after.stopped_by_rule() is not None
    # the same policies in the other order are the same comparison (matched by fingerprint)
    assert main([*argv[:2], "--policy", "replay", "--policy", "expert", *argv[6:], "--resume"]) == 0


def test_bad_comparisons_are_refused_in_one_line_with_nothing_written(workdir, capsys) -> None:
    protocol = _protocol(workdir)
    base = ["run", str(protocol), "--robot", "sim", "--headless", "--no-video"]
    line = refused([*base, "--policy", "expert", "--policy", "expert"], workdir, capsys)
    assert "given twice" in line
    line = refused([*base, "--policy", "expert", "--policy", "nowhere"], workdir, capsys)
    assert "neither a built-in policy, a folder nor a Hub id" in line
    line = refused([*base, "--policy", "expert", "--policy", "nowhere/ckpt"], workdir, capsys)   # a Hub id's shape
    assert "not in the Hugging Face cache" in line
    small = _protocol(workdir, min_difference=0.6, cap=8)
    line = refused(["run", str(small), "--robot", "sim", "--headless", "--policy", "expert", "--policy", "replay"],
                    workdir, capsys)
    assert "8 cannot reach power 0.8" in line and "max_trials_per_arm: 47 would" in line
    line = refused([*base, "--policy", "expert"], workdir, capsys)
    assert "sequential is a comparison's rule" in line
    line = refused(["run", str(protocol), "--robot", "so101", "--port", "/dev/null", "--headless",
                     "--policy", "expert", "--policy", "replay"], workdir, capsys)
    assert "real arm" in line
    bad = _protocol(workdir, comparisons=[["A", "C"]])
    line = refused(["run", str(bad), "--robot", "sim", "--headless", "--policy", "expert", "--policy", "replay"],
                    workdir, capsys)
    assert "arm C is not one of the 2 arms" in line
    for value in ("0", "nan", "1.5"):
        _protocol(workdir, min_difference=float(value))
        refused([*base, "--policy", "expert", "--policy", "replay"], workdir, capsys)
    _protocol(workdir, secondary=["placement_error_cm", "placement_error_cm"])
    assert "declared twice" in refused([*base, "--policy", "expert", "--policy", "replay"], workdir, capsys)
    _protocol(workdir, secondary=["success_rate"])
    assert "secondary" in refused([*base, "--policy", "expert", "--policy", "replay"], workdir, capsys)
    _protocol(workdir)
    line = refused([*base, "--policy", "expert", "--policy", "replay", "--inference", "rtc"], workdir, capsys)
    assert "synchronous engine" in line
    line = refused([*base, "--policy", "expert", "--policy", "replay", "--workers", "2", "--inject-dropout", "1:5"],
                   workdir, capsys)
    assert "--inject-dropout" in line
    listed = _protocol(workdir)
    data = yaml.safe_load(listed.read_text())
    data["run"]["policies"] = ["replay", "replay"]   # the protocol's run section lists the arms
    listed.write_text(yaml.safe_dump(data))
    assert "given twice" in refused(base, workdir, capsys)


@pytest.mark.slow
def test_an_open_run_is_revealed_only_by_an_explicit_recorded_unblinding(workdir, capsys) -> None:
    protocol = _protocol(workdir, secondary=["placement_error_cm"])
    argv = ["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
            "--no-video"]
    assert main([*argv, "--max-trials", "2"]) == 0
    capsys.readouterr()
    assert main(["report", str(SHEET)]) == 0
    blind = capsys.readouterr().out
    assert "(sealed)" in blind and "expert" not in blind and "replay" not in blind
    # the summary's figures per arm, by code, never one success rate over both arms
    assert "Success     A: " in blind and "\n            B: " in blind and "Success     1/2" not in blind
    assert "placement error, cm (secondary)" in blind and "never a reason to stop" in blind
    assert main(["report", str(SHEET), "--md", "open.md"]) == 0
    capsys.readouterr()
    written = Path("open.md").read_text()
    assert "Success by arm: A " in written
    written = written.replace(str(workdir), "").replace("harness replay", "")   # the command that replays a trial
    assert "expert" not in written and "replay" not in written
    assert main(["report", str(SHEET), "--json"]) == 0
    raw = json.loads(capsys.readouterr().out)
    sealed = raw["blind_comparison"]
    assert [arm["policy"] for arm in sealed["arms"]] == [None, None] and not sealed["ended"]
    assert sealed["secondary"] == ["placement_error_cm"] and sealed["futility"] == "paired-betting-mixture"
    successes = {arm["code"]: arm["successes"] for arm in sealed["arms"]}
    assert {arm["code"]: arm["placement_error_cm"]["n"] for arm in sealed["arms"]} == successes   # sim truth
    assert [(arm["code"], arm["success"]["k"]) for arm in raw["runs"][0]["arms"]] == list(successes.items())
    line = refused(["report", str(SHEET), "--reveal"], workdir, capsys)
    assert "--unblind" in line
    assert main(["report", str(SHEET), "--unblind"]) == 0
    assert "expert" in capsys.readouterr().out
    assert [u.scored_trials for u in load_scoresheet(SHEET).unblindings] == [2]   # in the sheet's own chain
    assert not SHEET.with_name(SHEET.name + ".unblinded.json").exists()
    # resuming with another set of policies, or without them, is refused, naming no arm
    line = refused([*argv[:2], "--policy", "replay", "--policy", str(workdir), *argv[6:], "--resume"], workdir,
                   capsys)
    assert " A" not in line and " B" not in line
    line = refused([*argv[:2], *argv[6:], "--resume"], workdir, capsys)
    assert "two or more --policy flags" in line


@pytest.mark.slow
def test_policies_reading_cameras_at_different_sizes_are_refused_before_anything_is_written(workdir, capsys) -> None:
    """The robot renders every camera any arm reads (an arm that reads none, like the expert, fits any), at
    one size."""
    from harness.policies.arms import ArmSwitch
    from harness.policies.scripted import ExpertPolicy
    from tests.tiny_policy import save_tiny_act

    save_tiny_act(workdir / "ckpt_small")
    save_tiny_act(workdir / "ckpt_large", camera="wrist", height=480, width=640)
    protocol = _protocol(workdir)
    line = refused(["run", str(protocol), "--robot", "sim", "--headless", "--no-video", "--policy", "ckpt_small",
                     "--policy", "ckpt_large"], workdir, capsys)
    # codes are drawn at the lock, so either arm may be the small one (nothing is written: the draw is discarded)
    assert "different sizes" in line and " at 128x96" in line and " at 640x480" in line
    small = make_policy(str(workdir / "ckpt_small"), load_protocol(protocol), RunSettings(), None)
    try:
        switch = ArmSwitch({"A": ExpertPolicy(), "B": small}, lambda index: "A")
        assert switch.camera_keys == ("top",) and switch.image_size == small.image_size
    finally:
        small.close()


REHEARSAL = """name: desk
task: Pick up the cube and place it in the bowl.
scene: {bowl_diameter_cm: 11.5, cube_edge_cm: 3.0, trained_cube_xy_cm: [22.0, -5.0], bowl_xy_cm: [18.0, 14.0]}
start_pose: {shoulder_pan: 0.0, shoulder_lift: -60.0, elbow_flex: 60.0, wrist_flex: 70.0, wrist_roll: 0.0,
  gripper: 10.0}
fps: 30
episode_time_limit_s: 1.5
success_definition: Autonomous grasp, lift and release; the cube comes to rest inside the bowl.
failure_taxonomy: [success, no_grasp, grasped_then_dropped, wrong_placement]
stopping_rule: {kind: sequential, alpha: 0.05, power: 0.8, min_difference: 0.7, max_trials_per_arm: 32}
trials:
- {index: 1, dx_cm: 3.0, dy_cm: -2.0, yaw_deg: 15.0}
- {index: 2, dx_cm: -2.0, dy_cm: 1.5, yaw_deg: -10.0}
"""


@pytest.mark.slow
@pytest.mark.desk
def test_a_rehearsed_comparison_on_the_emulated_arm_never_names_a_policy_to_the_operator(workdir, capsys) -> None:
    from tests.tiny_policy import save_tiny_act

    save_tiny_act(workdir / "ckpt_first", height=480, width=640)
    save_tiny_act(workdir / "ckpt_second", height=480, width=640, action_mean=[0.0, -60.0, 60.0, 70.0, 0.0, 12.0])
    protocol = workdir / "desk.yaml"
    protocol.write_text(REHEARSAL)
    code = main(["rehearse", str(protocol), "--policy", "ckpt_first", "--policy", "ckpt_second", "--operator",
                 "scripted", "--max-trials", "2", "--rehearsal-dir", "desk_files"])
    out = capsys.readouterr()
    assert code == 0, out.out[-3000:]
    # the rehearsal echoes the command the operator typed (which names both); nothing after it says which is which
    after = out.out.split("harness run", 1)[1].split("\n", 1)[1] + out.err
    assert "ckpt_first" not in after and "ckpt_second" not in after, after[-2000:]
    sheet = load_scoresheet(Path("scoresheets/desk-comparison-rehearsal.yaml"))
    assert sheet.locked.robot == "so101" and len(sheet.attempts) == 2
    assert sheet.locked.rehearsal is not None          # the rehearsal's own request ran it, its provenance locked
    assert {slot.arm for slot in sheet.comparison.schedule()[:2]} == {"A", "B"}     # block 1: each arm once
    for path in [*Path("runs").rglob("*"), Path("scoresheets/desk-comparison-rehearsal.yaml").read_text()]:
        assert "ckpt_" not in str(path)


@pytest.mark.slow
def test_a_voided_slot_is_run_again_for_its_arm_inside_its_block(workdir) -> None:
    protocol = _protocol(workdir)
    argv = ["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim", "--headless",
            "--no-video"]
    assert main([*argv, "--inject-dropout", "2:30"]) == 3        # a camera dropout voids slot 2 and pauses
    assert main([*argv, "--resume", "--max-trials", "2"]) == 0
    sheet = load_scoresheet(SHEET)
    assert [a.trial_index for a in sheet.attempts[:2]] == [1, 2] and sheet.attempts[1].label is Label.VOID
    assert [a.trial_index for a in sheet.attempts[2:]] == [2, 3]   # slot 2 again (same arm, same block), then on
    arm = _arm_of(sheet)
    assert arm[1] != arm[2]                                        # block 1 still holds each arm once
