"""Blindness and validity of a comparison's design that the statistics alone cannot show: the arms' codes are
drawn at the lock (never the order the policies were named in), and each block's start position is drawn from
the locked seed, which keeps the error at alpha under "equal average success over the protocol's positions"
when one policy is stronger on one side of the workspace and the other on the other side."""

from __future__ import annotations

import functools
import math
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.app.compare_run import _check_refs, lock_comparison, resume_comparison
from harness.errors import StaleRunError
from harness.models.comparison import (
    ArmIdentity,
    CodeRule,
    PositionRule,
    assign_codes,
    block_positions,
    build_schedule,
    unseal,
    unseal_all,
)
from harness.models.protocol import load_protocol
from harness.models.run_request import RunRequest
from harness.models.run_settings import RobotKind
from harness.stats import sequential as sq

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _randomized() -> str:
    """protocols/randomized.yaml, read once: the 300 locks of the codes' audit each write it out again."""
    return (REPO / "protocols" / "randomized.yaml").read_text()


def _protocol(folder: Path, **rule: object) -> Path:
    data = yaml.load(_randomized(), Loader=yaml.CSafeLoader)
    data["trials"] = data["trials"][:8]
    data["generator"] = None
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.6,
                             "max_trials_per_arm": 47, **rule}
    path = folder / "cmp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _lock(folder: Path, refs: tuple[str, ...], name: str = "sheet.yaml", **rule: object):
    protocol_path = _protocol(folder, **rule)
    request = RunRequest(protocol=protocol_path, policies=refs, robot={"kind": "sim"}, headless=True)
    identities = _check_refs(list(refs), RobotKind.SIM)
    return lock_comparison(request, load_protocol(protocol_path), protocol_path, folder / name, identities,
                           RobotKind.SIM)


def _within(count: int, runs: int, p: float = 0.5, sigmas: float = 4.0) -> bool:
    return abs(count / runs - p) <= sigmas * math.sqrt(p * (1 - p) / runs)


@pytest.mark.slow   # 300 sheets locked: a statistical audit, the inner loop's largest cost (docs/developing.md)
def test_codes_are_drawn_at_the_lock_whatever_the_order_of_the_flags(tmp_path: Path) -> None:
    """The same two policies in both flag orders: each code goes to each policy about half the time, and
    someone who knows the command line (and reads the open sheet) guesses the mapping no better than a coin."""
    runs = 150
    expert_is_a = {}
    attacker_right = 0
    for refs in (("expert", "replay"), ("replay", "expert")):
        hits = 0
        for _ in range(runs):
            sheet = _lock(tmp_path, refs)
            comparison = sheet.locked.comparison
            assert comparison is not None
            assert comparison.codes is CodeRule.DRAWN and comparison.position_rule is PositionRule.DRAWN
            mapping = unseal(comparison.sealed)
            hits += mapping["A"].ref == "expert"
            # the attacker's best guesses from what they know: the first flag is A, or the public seed's parity
            attacker_right += mapping["A"].ref == refs[0]
            attacker_right += mapping["A"].ref == refs[comparison.seed % 2]
            # nothing the open sheet shows in the clear depends on the order
            assert "expert" not in str(sheet.locked_data) and "replay" not in str(sheet.locked_data)
        expert_is_a[refs] = hits
        assert _within(hits, runs), f"{refs}: expert was A in {hits} of {runs} locks"
    assert _within(attacker_right, 4 * runs), f"the attacker guessed right {attacker_right} of {4 * runs} times"


def test_the_code_permutation_is_uniform_and_ignores_the_order_it_is_given() -> None:
    arms = [ArmIdentity(ref=f"ckpt/{name}", fingerprint=f"sha256:{name}") for name in ("c", "a", "b")]
    seen: dict[tuple[str, ...], int] = {}
    runs = 3000
    for seed in range(runs):
        mapping = assign_codes(seed, arms)
        assert mapping == assign_codes(seed, arms[::-1])   # the order they were named in plays no part
        key = tuple(mapping[code].ref for code in "ABC")
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) == {tuple(f"ckpt/{n}" for n in order) for order in permutations("abc")}
    assert all(_within(count, runs, 1 / 6) for count in seen.values()), seen


def test_the_assignment_seed_is_sealed_with_the_mapping(tmp_path: Path) -> None:
    sheet = _lock(tmp_path, ("expert", "replay"))
    comparison = sheet.locked.comparison
    assert comparison is not None
    opened = unseal_all(comparison.sealed)
    assert opened.assignment_seed is not None and str(opened.assignment_seed) not in str(sheet.locked_data)
    assert assign_codes(opened.assignment_seed, list(opened.arms.values())) == opened.arms


def test_resume_matches_the_policies_by_fingerprint_in_any_order_and_refuses_another_set(tmp_path: Path) -> None:
    sheet = _lock(tmp_path, ("expert", "replay"))
    sheet.create()
    protocol_path = tmp_path / "cmp.yaml"
    for refs in (("expert", "replay"), ("replay", "expert")):
        request = RunRequest(protocol=protocol_path, policies=refs, robot={"kind": "sim"}, headless=True,
                             resume=True)
        resumed = resume_comparison(request, protocol_path, sheet.path, _check_refs(list(refs), RobotKind.SIM))
        assert resumed.locked_data == sheet.locked_data
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    refs = ("expert", str(other))
    request = RunRequest(protocol=protocol_path, policies=refs, robot={"kind": "sim"}, headless=True, resume=True)
    identities = [ArmIdentity(ref="expert", fingerprint="builtin:expert"),
                  ArmIdentity(ref=str(other), fingerprint="sha256:another")]
    with pytest.raises(StaleRunError) as refused:
        resume_comparison(request, protocol_path, sheet.path, identities)
    assert "not one of the 2 policies" in str(refused.value) and "replay" not in str(refused.value)
    with pytest.raises(StaleRunError):
        resume_comparison(request, protocol_path, sheet.path, identities[:1])


def test_drawn_positions_are_a_pure_function_of_the_seed_uniform_and_prefix_stable() -> None:
    codes = ("A", "B", "C")
    positions = [4, 9, 2, 7]
    first = build_schedule(11, codes, positions, 40, PositionRule.DRAWN)
    assert first == build_schedule(11, codes, positions, 40, PositionRule.DRAWN)
    assert build_schedule(11, codes, positions, 7, PositionRule.DRAWN) == first[:21]   # resuming never reshuffles
    assert first != build_schedule(12, codes, positions, 40, PositionRule.DRAWN)
    for block in range(40):
        slots = [s for s in first if s.block == block]
        assert sorted(s.arm for s in slots) == list(codes) and len({s.position for s in slots}) == 1
    drawn = np.concatenate([block_positions(seed, 4, 50, PositionRule.DRAWN) for seed in range(200)])
    counts = np.bincount(drawn, minlength=4)
    assert all(_within(int(c), drawn.size, 0.25) for c in counts), counts
    # sheets locked before the draw keep cycling through the list, as they were locked
    assert [s.position for s in build_schedule(11, codes, positions, 6, PositionRule.CYCLE)[::3]] == [4, 9, 2, 7, 4, 9]


def _error_with_interaction(rule: PositionRule, profile: str, runs: int = 4000) -> tuple[float, float]:
    """Type I error of 'either arm better' when both succeed half the time on average over 16 start positions,
    A strong on the left half of the workspace and B on the right (a step), or along a smooth slope."""
    count, diff = 16, 0.3
    cap = sq.minimum_cap(0.05, 0.8, diff, 1)
    assert cap is not None
    design = sq.mixture_design(0.05, 0.8, diff, 1, cap)   # as a comparison locks it
    x = (np.arange(count) + 0.5) / count
    if profile == "step":
        p_first, p_second = np.where(x < 0.5, 0.9, 0.1), np.where(x < 0.5, 0.1, 0.9)
    else:
        p_first, p_second = 0.15 + 0.7 * x, 0.85 - 0.7 * x
    assert p_first.mean() == pytest.approx(p_second.mean())
    at = np.stack([block_positions(seed, count, cap, rule) for seed in range(runs)])
    rng = np.random.default_rng(57)
    first, second = rng.random((runs, cap)) < p_first[at], rng.random((runs, cap)) < p_second[at]
    code, _ = sq.simulate(design, first, second, cap)
    error = float(np.mean(np.abs(code) == 1))
    return error, math.sqrt(0.05 * 0.95 / runs)


@pytest.mark.parametrize("profile", ["step", "smooth"])
def test_type_one_error_under_equal_average_success_with_arm_by_position_interaction(profile: str) -> None:
    error, se = _error_with_interaction(PositionRule.DRAWN, profile)
    assert error <= 0.05 + 3 * se, f"{profile}: {error:.3f}"


def test_cycling_through_the_positions_in_order_would_not_hold_alpha() -> None:
    """Why positions are drawn: the old schedule, on the same setting, names a winner far too often."""
    error, se = _error_with_interaction(PositionRule.CYCLE, "step")
    assert error > 0.05 + 3 * se


def test_a_sheet_locked_under_the_old_rules_says_so_in_one_line_and_resumes_as_locked(tmp_path: Path) -> None:
    from harness.models.comparison import seal
    from harness.models.scoresheet import load_scoresheet, new_scoresheet
    from harness.reports.comparison import comparison_blocks, comparison_text

    fresh = _lock(tmp_path, ("expert", "replay"))
    locked = dict(fresh.locked_data)
    old = dict(locked["comparison"])
    del old["codes"], old["position_rule"]       # as sheets locked before the draws were written
    identities = _check_refs(["expert", "replay"], RobotKind.SIM)
    old["sealed"] = seal(dict(zip("AB", identities, strict=True))).model_dump()   # A = the first flag
    old["design"] = {**old["design"], "futility": "discordant-sprt", "futility_bet": None}
    locked["comparison"] = old
    path = tmp_path / "old.yaml"
    new_scoresheet(path, locked, fresh.settings).create()
    sheet = load_scoresheet(path)
    text = comparison_text(comparison_blocks(sheet, revealed=False))
    lines = [line for line in text.splitlines() if "older rules" in line]
    assert len(lines) == 1
    assert "flag order" in lines[0] and "cycled" in lines[0] and "discordant-sprt" in lines[0]
    assert "equal success at every one" in text
    positions = sheet.locked.comparison.positions
    assert [s.position for s in sheet.comparison.schedule()[::2][:4]] == positions[:4]   # cycles, as locked
    request = RunRequest(protocol=tmp_path / "cmp.yaml", policies=("replay", "expert"), robot={"kind": "sim"},
                         headless=True, resume=True)
    resumed = resume_comparison(request, tmp_path / "cmp.yaml", path, identities[::-1]).locked_data
    # every locked field as this test locked it, but the sheet's own journal identity, which each new sheet draws
    assert {k: v for k, v in resumed.items() if k != "journal"} == {k: v for k, v in locked.items() if k != "journal"}
    assert "older rules" not in comparison_text(comparison_blocks(load_scoresheet(fresh.create().path), False))
    assert "equal average success over the protocol's 8 start positions" in comparison_text(
        comparison_blocks(load_scoresheet(fresh.path), False))


def test_an_early_unblinding_is_a_record_in_the_chain_that_cannot_be_deleted_quietly(tmp_path: Path) -> None:
    from harness.errors import HarnessError
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.comparison import comparison_blocks, comparison_text, may_reveal

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    assert not may_reveal(load_scoresheet(sheet.path), reveal=False, unblind=False)
    assert may_reveal(load_scoresheet(sheet.path), reveal=False, unblind=True)
    assert not any(p.name.endswith(".unblinded.json") for p in tmp_path.iterdir())   # no side file
    reread = load_scoresheet(sheet.path)
    assert [u.scored_trials for u in reread.unblindings] == [0]
    assert "unblinded early, recorded" in comparison_text(comparison_blocks(reread, may_reveal(reread, False, False)))
    # deleting the record from the file is refused on the next read, not forgotten
    lines = sheet.path.read_bytes().splitlines(keepends=True)
    assert b'"unblinding"' in lines[-1]
    sheet.path.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(HarnessError):
        load_scoresheet(sheet.path)


def test_no_timing_per_arm_is_shown_while_the_comparison_is_open(tmp_path: Path, capsys) -> None:
    """Arm A's policy takes 80 ms a step and B's 10 ms: while the run is open and sealed, the report (text and JSON)
    shows the timing pooled over both arms, and the live line of a trial shows no wall time."""
    import io
    import json

    from harness.cli import main
    from harness.models.sheet_records import LoopStats
    from harness.run.terminal import TerminalObserver
    from tests.helpers import fake_attempt

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for number in (1, 2, 3, 4):
        slow = arm_of[number] == "A"
        loop = LoopStats(steps=100, target_fps=30, achieved_fps=12 if slow else 30,
                         policy_latency_ms_p50=80 if slow else 10, policy_latency_ms_p95=90 if slow else 12)
        sheet.add_attempt(fake_attempt(number, 1, "success", loop=loop, duration_s=9.0 if slow else 4.0))
    assert main(["report", "--json", str(sheet.path)]) == 0
    raw = json.loads(capsys.readouterr().out)
    trials = [t for t in raw["runs"][0]["trials"] if t["label"] != "pending"]
    assert len(trials) == 4
    assert len({json.dumps(t["loop"], sort_keys=True) for t in trials}) == 1   # one pooled figure for every trial
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=False, out=out, timing_withheld=True)
    observer._line = "[ 1/4] trial   1"
    observer.trial_scored(sheet.attempts[0])
    assert "withheld" in out.getvalue() and "9.0 s" not in out.getvalue() and "4.0 s" not in out.getvalue()


def test_no_loop_figure_that_depends_on_policy_speed_is_per_trial_while_open(tmp_path: Path, capsys) -> None:
    """The slow arm misses its deadlines, underruns its queue and runs a longer episode on a real clock: while the
    comparison is open and sealed every trial's loop record (each field) is one pooled figure, and the plot of
    missed deadlines per trial draws the same bar for every trial."""
    import json

    from harness.cli import main
    from harness.models.sheet_records import LoopStats
    from tests.helpers import fake_attempt

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for number in (1, 2, 3, 4, 5):
        slow = arm_of[number] == "A"
        loop = LoopStats(steps=100, target_fps=30, achieved_fps=12 if slow else 30,
                         missed_deadlines=42 + number if slow else number, queue_underruns=30 if slow else 0,
                         chunk_switches=9 if slow else 4, rtc_delay_steps_max=3 if slow else 1,
                         rtc_delay_steps_p50=2 if slow else 0, episode_s=9.0 + number if slow else 3.3)
        sheet.add_attempt(fake_attempt(number, 1, "success", loop=loop))
    assert main(["report", "--json", str(sheet.path)]) == 0
    trials = [t for t in json.loads(capsys.readouterr().out)["runs"][0]["trials"] if t["label"] != "pending"]
    assert len(trials) == 5
    for field in ("missed_deadlines", "queue_underruns", "chunk_switches", "rtc_delay_steps_max",
                  "rtc_delay_steps_p50", "episode_s"):
        assert len({t["loop"].get(field) for t in trials}) == 1, field
    assert len({json.dumps(t["loop"], sort_keys=True) for t in trials}) == 1
    assert isinstance(trials[0]["loop"]["missed_deadlines"], int)


def test_hub_ids_work_in_a_comparison_and_a_builtin_name_always_means_the_builtin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from tests.e2e.test_hub_policy import COMMIT_A, cached_snapshot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "expert").mkdir()
    (tmp_path / "expert" / "config.json").write_text("{}")
    arms = _check_refs(["expert", "./expert"], RobotKind.SIM)
    assert arms[0].fingerprint == "builtin:expert"             # the folder beside it does not shadow it
    assert arms[1].fingerprint.startswith("sha256:")           # the folder, named as a path
    cache = tmp_path / "hub-cache"
    cached_snapshot(cache, "org/act_cube", COMMIT_A)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    arms = _check_refs(["replay", "org/act_cube"], RobotKind.SIM)
    assert arms[1].fingerprint == f"hub:org/act_cube@{COMMIT_A}"


@pytest.mark.parametrize(("cap", "difference", "said"), [
    (2000, 0.01, "no cap up to 5000 would"),             # the audit's case: it used to search for minutes
    (5000, 0.02, "no cap up to 5000 would"),
    (100_000, 0.05, "5000"),                              # beyond the checked limit: refused naming it
    (2000, 0.1, "max_trials_per_arm: 2385 would"),        # a cap below what the power needs: the one that would
])
def test_the_design_search_answers_or_refuses_naming_the_limit(workdir: Path, capsys, cap: int,
                                                               difference: float, said: str) -> None:
    # how long it takes is benchmarks/design_search_bench.py's figure, not a timed test's
    from tests.helpers import refused

    protocol = _protocol(workdir)
    data = yaml.safe_load(protocol.read_text())
    data["stopping_rule"].update(min_difference=difference, max_trials_per_arm=cap)
    protocol.write_text(yaml.safe_dump(data, sort_keys=False))
    line = refused(["run", str(protocol), "--policy", "expert", "--policy", "replay", "--robot", "sim",
                    "--headless"], workdir, capsys)
    assert "max_trials_per_arm" in line and said in line, line


def _anatomy(first_motion_s: float, stalled: bool = False):
    from harness.models.anatomy import Phase, TrialAnatomy

    return TrialAnatomy(first_motion_s=first_motion_s, stalled=stalled, stall_limit_s=2.0, cube_start_cm=(3.0, 0.0),
                        closed_at_s=None, grasp_point_cm=None, holding=False, ended_in=Phase.APPROACH,
                        summary=f"first moved at {first_motion_s:.1f} s; the gripper never closed", rules=3)


def test_no_first_motion_time_per_arm_while_the_comparison_is_open(tmp_path: Path, capsys) -> None:
    """Arm A's policy first moves after 2.7 s (a slow first inference), B's after 0.3 s: while the run is open and
    sealed, no report (text, HTML, JSON) gives a trial's own first-motion time, the TUI's last-trial line says it
    is withheld, and the live line of a stalled trial gives no time."""
    import io
    import json

    from harness.cli import main
    from harness.run.terminal import TerminalObserver
    from tests.helpers import fake_attempt

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for number in (1, 2, 3, 4):
        slow = arm_of[number] == "A"
        sheet.add_attempt(fake_attempt(number, 1, "no_grasp", anatomy=_anatomy(2.7 if slow else 0.3, stalled=slow)))
    assert main(["report", "--json", str(sheet.path)]) == 0
    raw = capsys.readouterr().out
    first = json.loads(raw)["runs"][0]["anatomy"]["first_motion"]
    assert first["median_s"] == first["max_s"]           # every trial's time pooled: the median of all of them
    assert "2.7" not in raw and "first moved at" not in raw
    assert main(["report", str(sheet.path)]) == 0
    text = capsys.readouterr().out
    assert "2.7" not in text and "first moved at" not in text
    html = tmp_path / "report.html"
    assert main(["report", str(sheet.path), "-o", str(html)]) == 0
    capsys.readouterr()
    assert "2.70" not in html.read_text() and "first moved at" not in html.read_text()
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=False, out=out, timing_withheld=True)
    observer._line = "[ 1/4] trial   1"
    stalled = next(a for a in sheet.attempts if a.anatomy is not None and a.anatomy.stalled)
    observer.trial_scored(stalled)
    assert "STALLED" in out.getvalue() and "2.7" not in out.getvalue()


def test_the_tui_says_the_first_motion_is_withheld_in_a_blind_comparison(tmp_path: Path) -> None:
    """The TUI's last-trial line gives the trace's summary; in a blind comparison without the first-motion time."""
    from harness.tui.observer import TuiObserver, UiLink
    from tests.helpers import fake_attempt

    class Recorded(UiLink):   # the link is the observer's injection point: keep what it would show
        def __init__(self) -> None:
            super().__init__()
            self.posted: list[tuple] = []

        def post(self, call, *args, **kwargs) -> None:
            self.posted.append(args)

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    link = Recorded()
    observer = TuiObserver(link)
    observer.sheet = sheet
    observer.trial_scored(fake_attempt(1, 1, "no_grasp", anatomy=_anatomy(2.7)))
    said = next(args[3] for args in link.posted if len(args) > 3)
    assert "2.7" not in said and "withheld" in said and "never closed" in said


def test_the_end_of_run_lines_of_a_graded_comparison_give_the_graded_outcome_per_arm(tmp_path: Path) -> None:
    """A comparison decided on progress ends with each arm's mean progress (what the decision is about), by code,
    before the successes per arm; one on success says nothing of progress."""
    from harness.app.compare_run import decision_lines
    from tests.helpers import fake_attempt

    sheet = _lock(tmp_path, ("expert", "replay"), primary_outcome="progress").create()
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for number in (1, 2, 3, 4):
        sheet.add_attempt(fake_attempt(number, 1, "success" if arm_of[number] == "A" else "no_grasp"))
    lines = decision_lines(sheet).splitlines()
    graded = next(line for line in lines if line.startswith("progress per arm"))
    assert "A 4.00 of 4" in graded and "B 0.00 of 4" in graded and "over 2" in graded
    assert lines.index(graded) < next(i for i, line in enumerate(lines) if line.startswith("successes per arm"))
    plain = _lock(tmp_path, ("expert", "replay"), name="plain.yaml").create()
    assert "progress" not in decision_lines(plain)


def test_a_graded_comparison_explains_its_own_test_and_leaves_the_success_tests_fields_out(
        tmp_path: Path, capsys) -> None:
    """A comparison on progress says it rejects equal average score on progress (not equal success, nor the success
    test's power), and its JSON has no success-test e-values or bounds beside the graded test's own."""
    import json

    from harness.cli import main
    from tests.helpers import fake_attempt

    sheet = _lock(tmp_path, ("expert", "replay"), primary_outcome="progress").create()
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for number in (1, 2, 3, 4):
        sheet.add_attempt(fake_attempt(number, 1, "success" if arm_of[number] == "A" else "no_grasp"))
    assert main(["report", str(sheet.path)]) == 0
    report = capsys.readouterr().out
    assert "equal average success" not in report and "discordant odds" not in report
    assert "equal average progress" in report
    assert main(["report", "--json", str(sheet.path)]) == 0
    found = json.loads(capsys.readouterr().out)["blind_comparison"]
    assert "equal average progress" in found["null_hypothesis"]
    assert "discordant" not in found["null_hypothesis"] and "average success" not in found["null_hypothesis"]
    assert found["log_futility_bound"] is None and found["log_efficacy_bound"] is None
    assert found["futility"] is None
    for key in ("log_e_first", "log_e_second", "log_against_first", "log_against_second"):
        assert found["comparisons"][0][key] is None, key
    assert found["graded"]["log_futility_bound"] > 0
    plain = _lock(tmp_path, ("expert", "replay"), name="plain.yaml").create()
    assert main(["report", "--json", str(plain.path)]) == 0
    found = json.loads(capsys.readouterr().out)["blind_comparison"]
    assert found["log_futility_bound"] < 0 and found["comparisons"][0]["log_e_first"] == []
    assert "equal average success" in found["null_hypothesis"]


def test_after_an_unblinding_the_resumed_run_says_so_and_shows_timing(tmp_path: Path, capsys) -> None:
    """`harness report --unblind` put the unblinding in the chain: the resumed run's header says it was unblinded
    (not "blind") and the live trial lines no longer withhold their wall times."""
    from harness.app.compare_run import _print_start
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.comparison import may_reveal

    sheet = _lock(tmp_path, ("expert", "replay")).create()
    assert sheet.still_blind
    _print_start(load_scoresheet(sheet.path))
    assert ", blind;" in capsys.readouterr().out
    assert may_reveal(load_scoresheet(sheet.path), reveal=False, unblind=True)
    reread = load_scoresheet(sheet.path)
    assert not reread.still_blind
    _print_start(reread)
    out = capsys.readouterr().out
    assert ", blind;" not in out and "unblinded" in out
    assert "A = " in out and "B = " in out   # the arms are named, as the report now names them
