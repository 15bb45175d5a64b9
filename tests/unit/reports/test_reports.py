"""HTML/Markdown reports, run comparison and the pre-registered stopping rule."""

from __future__ import annotations

import re

import pytest
import yaml

from harness.cli import main
from harness.errors import StaleRunError
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
from tests.helpers import fake_attempt, small_protocol_copy

SECTIONS = ["Why it fails", "Does it depend on where the cube is?", "Placement error", "Loop timing", "Fingerprints"]


@pytest.mark.slow
def test_report_from_a_sim_run_has_every_section_and_its_plots(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--no-video"]) == 0
    assert main(["run", str(protocol), "--headless", "--no-video", "--policy", "replay"]) == 0
    sheets = ["scoresheets/small-expert.yaml", "scoresheets/small-replay.yaml"]
    assert main(["report", *sheets, "-o", "report.html", "--md", "report.md"]) == 0
    html = (workdir / "report.html").read_text()
    for section in [*SECTIONS, "Comparison"]:
        assert section in html, section
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 12 and all(len(i) > 5000 for i in images)  # 6 figures per run, embedded
    assert "Where the gripper went" in html and "Time to first motion" in html
    md = (workdir / "report.md").read_text()
    assert "McNemar" in md and "paired" in md
    assert re.search(r"Tracking slopes .*: expert (0\.9\d|1\.0\d) .*; replay -?0\.[01]\d ", md)
    for link in re.findall(r"\]\((report_files/[^)]+\.png)\)", md):
        assert (workdir / link).stat().st_size > 5000


@pytest.mark.slow
def test_runs_on_different_protocols_use_fishers_test(workdir) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    other = workdir / "protocols" / "other.yaml"
    data = yaml.safe_load(protocol.read_text())
    data["trials"] = data["trials"][:2]
    other.write_text(yaml.safe_dump(data))
    for path, name, labels in ((protocol, "a", ["success"] * 3), (other, "b", ["no_grasp", "no_grasp"])):
        sheet = lock_scoresheet(workdir / f"{name}.yaml",
                                build_locked(load_protocol(path), path, "expert", "sim"), {})
        for i, label in enumerate(labels, start=1):
            sheet.add_attempt(fake_attempt(i, 1, label))
    assert main(["report", "a.yaml", "b.yaml", "--md", "cmp.md"]) == 0
    text = (workdir / "cmp.md").read_text()
    assert "Fisher's exact test" in text and "McNemar" not in text


def _sheet_with_rule(workdir, rule: dict, trials: int = 60):
    protocol = small_protocol_copy(workdir / "protocols")
    data = yaml.safe_load(protocol.read_text())
    data["trials"] = [{"index": i, "dx_cm": 0.0, "dy_cm": 0.0} for i in range(1, trials + 1)]
    data["stopping_rule"] = rule
    protocol.write_text(yaml.safe_dump(data))
    return lock_scoresheet(workdir / "rule.yaml", build_locked(load_protocol(protocol), protocol, "expert", "sim"), {})


def test_wilson_width_rule_stops_where_it_should(workdir) -> None:
    sheet = _sheet_with_rule(workdir, {"kind": "wilson_width", "max_width": 0.2, "min_trials": 20})
    for i in range(1, 20):
        sheet.add_attempt(fake_attempt(i, 1, "success"))
        assert sheet.pending_trials(), f"stopped after {i} trials, before min_trials"
    sheet.add_attempt(fake_attempt(20, 1, "success"))  # 20/20: interval 0.839..1.0, width 0.161
    assert sheet.pending_trials() == []
    reloaded = load_scoresheet(sheet.path)
    assert reloaded.complete and "after 20 trials" in reloaded.stopped_by_rule()


def test_wilson_width_rule_keeps_going_while_uncertain(workdir) -> None:
    sheet = _sheet_with_rule(workdir, {"kind": "wilson_width", "max_width": 0.2, "min_trials": 20})
    for i in range(1, 41):
        sheet.add_attempt(fake_attempt(i, 1, "success" if i % 2 else "no_grasp"))
    assert sheet.stopped_by_rule() is None and len(sheet.pending_trials()) == 20  # 20/40: width ~0.29


def test_a_void_does_not_count_towards_the_rule_and_fixed_runs_everything(workdir) -> None:
    sheet = _sheet_with_rule(workdir, {"kind": "fixed"}, trials=25)
    for i in range(1, 25):
        sheet.add_attempt(fake_attempt(i, 1, "success"))
    assert sheet.pending_trials() == [25]


def test_the_rule_is_locked(workdir) -> None:
    sheet = _sheet_with_rule(workdir, {"kind": "wilson_width", "max_width": 0.2, "min_trials": 20})
    data = yaml.safe_load(sheet.path.read_text())
    data["locked"]["stopping_rule"]["max_width"] = 0.5
    sheet.path.write_text(yaml.safe_dump(data))
    with pytest.raises(StaleRunError, match=r"locked\.stopping_rule"):
        load_scoresheet(sheet.path)


def test_plan_prints_trials_needed(capsys) -> None:
    assert main(["plan", "--p0", "0.5", "--delta", "0.2"]) == 0
    assert "93 trials per policy" in capsys.readouterr().out
    assert main(["plan", "--p0", "0.9", "--delta", "0.2"]) == 2


@pytest.mark.slow
def test_training_starts_are_drawn_and_counted(workdir) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    sheet = lock_scoresheet(workdir / "s.yaml", build_locked(load_protocol(protocol), protocol, "expert", "sim"), {})
    for i, label in enumerate(["success", "no_grasp", "no_grasp"], start=1):
        sheet.add_attempt(fake_attempt(i, 1, label))
    (workdir / "starts.csv").write_text("dx_cm,dy_cm\n0.1,0.0\n-0.2,0.3\n0.0,-0.1\n")
    assert main(["report", "s.yaml", "--md", "r.md", "--training-starts", "starts.csv"]) == 0
    assert "2 of 3 trials put the cube more than 2 cm from every training start" in (workdir / "r.md").read_text()
    (workdir / "bad.csv").write_text("1.0;2.0\n")
    assert main(["report", "s.yaml", "--md", "r.md", "--training-starts", "bad.csv"]) == 2


def test_each_scoresheet_gets_its_own_training_starts(workdir, capsys) -> None:
    """The coverage experiment's one report: a fixed-data and a scattered-data policy, each drawn with
    the starts it was trained on; three sheets with two lists is refused before anything is written."""
    protocol = small_protocol_copy(workdir / "protocols")
    for name in ("fixed", "scattered"):
        sheet = lock_scoresheet(workdir / f"{name}.yaml",
                                build_locked(load_protocol(protocol), protocol, name, "sim"), {})
        for i in range(1, 4):
            sheet.add_attempt(fake_attempt(i, 1, "no_grasp"))
    (workdir / "fixed.csv").write_text("dx_cm,dy_cm\n0.0,0.0\n")
    (workdir / "scattered.csv").write_text("dx_cm,dy_cm\n" + "".join(
        f"{dx},{dy}\n" for dx in range(-8, 9, 2) for dy in range(-8, 9, 2)))
    assert main(["report", "fixed.yaml", "scattered.yaml", "--json",
                 "--training-starts", "fixed.csv", "--training-starts", "scattered.csv"]) == 0
    runs = yaml.safe_load(capsys.readouterr().out)["runs"]
    far = [run["by_distance"]["trials_far_from_training"] for run in runs]
    expected = sum(1 for t in load_protocol(protocol).trials[:3] if (t.dx_cm ** 2 + t.dy_cm ** 2) ** 0.5 > 2)
    assert expected > 0 and far == [expected, 0]
    assert main(["report", "fixed.yaml", "scattered.yaml", "fixed.yaml", "--json",
                 "--training-starts", "fixed.csv", "--training-starts", "scattered.csv"]) == 2
    assert "--training-starts" in capsys.readouterr().err
