"""The commands around an evaluation as a new user meets them (issue 37): what `--max-trials` announces,
where a replay's video goes and how `replay --failures` finds its scoresheet, reports written with the
user's umask, and `--md` with `--json` both done."""

from __future__ import annotations

import json
import os
import stat

import pytest

from harness.cli import main
from harness.storage.atomic import current_umask, write_text_atomic
from tests.helpers import fake_attempt, locked_sheet, small_protocol_copy


@pytest.mark.slow   # simulated trials
def test_max_trials_is_in_the_announcement_and_the_time_left(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--policy", "expert", "--no-video", "--max-trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 trials to run (--max-trials; 3 of the protocol's 3 pending)" in out, out
    assert "[  1/2]" in out and "[  2/2]" in out and "1 left" in out and "2 left" not in out, out


@pytest.mark.slow   # simulated trials
def test_replay_writes_beside_the_trial_and_failures_find_a_sheet_kept_in_a_subfolder(workdir, capsys) -> None:
    """A run kept as docs/results.md keeps them (`--scoresheet scoresheets/final/X.yaml --runs-dir runs/final`):
    `replay --failures RUNS` finds its sheet without being told, from the project or from elsewhere."""
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--policy", "replay", "--video", "none", "--max-trials", "2",
                 "--scoresheet", "scoresheets/final/x.yaml", "--runs-dir", "runs/final"]) == 0
    run = workdir / "runs" / "final" / "x"
    assert sorted(p.name for p in run.glob("trial-*")) == ["trial-001-a1", "trial-002-a1"]
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    assert main(["replay", str(run / "trial-001-a1"), "--size", "64x48"]) == 0
    assert (run / "trial-001-a1-top.mp4").stat().st_size > 0 and not list(elsewhere.iterdir())
    capsys.readouterr()
    assert main(["replay", "--failures", str(run)]) == 0
    assert "2 videos drawn" in capsys.readouterr().out
    assert sorted(p.name for p in (run / "trial-002-a1").glob("*.mp4")) == ["top.mp4", "wrist.mp4"]


def test_replay_failures_without_a_sheet_to_find_is_one_clear_line(workdir, capsys) -> None:
    (workdir / "runs" / "lost").mkdir(parents=True)
    assert main(["replay", "--failures", "runs/lost"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scoresheet" in err[0] and "lost" in err[0]


def test_files_are_written_with_the_users_umask_and_keep_an_existing_files_mode(tmp_path) -> None:
    new, kept = tmp_path / "report.md", tmp_path / "sheet.yaml"
    write_text_atomic(new, "x")
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~current_umask() != 0o600
    kept.write_text("old")
    kept.chmod(0o640)
    write_text_atomic(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"


def test_markdown_and_json_together_write_the_file_and_print_only_json(tmp_path, capsys) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "success", placement_error_cm=1.0))
    sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    md = tmp_path / "report.md"
    assert main(["report", str(sheet.path), "--md", str(md), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"][0]["success"]["k"] == 1
    assert md.is_file() and f"wrote {md}" in captured.err
    assert stat.S_IMODE(md.stat().st_mode) == 0o666 & ~current_umask()
