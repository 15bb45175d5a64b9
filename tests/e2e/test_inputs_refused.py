"""Issue 28's cases, each as found by trying `harness` as a careless user and an attacker would.

Each refusal: exit 2, one line on stderr naming the file or flag and what is wrong, nothing
written or left behind (lock files included).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from harness.storage.lock import WriterBusy, WriterLock
from tests.helpers import fake_attempt, locked_sheet, refused, small_protocol_copy

REPO = Path(__file__).resolve().parents[2]




@pytest.fixture
def sheet(workdir: Path) -> Path:
    made = locked_sheet(workdir)
    made.add_attempt(fake_attempt(1, 1, "success"))
    return made.path


def test_the_writer_lock_meets_a_symlink_to_the_same_sheet(sheet: Path, workdir: Path) -> None:
    link = workdir / "link.yaml"
    link.symlink_to(sheet)
    with WriterLock(sheet, "harness run"), pytest.raises(WriterBusy, match="harness run"):
        WriterLock(link).acquire()
    folder_link = workdir / "runs-link"
    (workdir / "runs").mkdir()
    folder_link.symlink_to(workdir / "runs")
    with WriterLock(workdir / "runs", folder=True), pytest.raises(WriterBusy):
        WriterLock(folder_link, folder=True).acquire()
    assert sorted(p.name for p in workdir.iterdir() if p.name.endswith((".lock", ".holder"))) == []


def test_a_resume_through_a_symlink_is_refused_before_anything_runs(sheet: Path, workdir: Path, capsys) -> None:
    link = workdir / "link.yaml"
    link.symlink_to(sheet)
    with WriterLock(sheet, "harness run"):
        line = refused(["run", str(workdir / "small.yaml"), "--headless", "--resume", "--scoresheet", str(link),
                         "--runs-dir", str(workdir / "runs")], workdir, capsys)
    assert "in use by harness run" in line
    assert not (workdir / "runs").exists()


@pytest.mark.parametrize("info", [b"garbage", b"{}", b"[1, 2]", b"\xff\xfe"])
def test_dataset_coverage_with_a_broken_info_json(workdir: Path, info: bytes, capsys) -> None:
    (workdir / "ds" / "meta").mkdir(parents=True)
    (workdir / "ds" / "meta" / "info.json").write_bytes(info)
    line = refused(["dataset", "coverage", str(workdir / "ds")], workdir, capsys)
    assert "info.json" in line


def test_dataset_validate_refuses_on_stderr(workdir: Path, capsys) -> None:
    (workdir / "ds" / "meta").mkdir(parents=True)
    (workdir / "ds" / "meta" / "info.json").write_text("garbage")
    refused(["dataset", "validate", str(workdir / "ds")], workdir, capsys)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("starts", [bytes(range(256)), b"nan,inf\n1,2\n", b"1,2\n3,-inf\n"])
def test_report_training_starts_binary_or_not_finite(sheet: Path, workdir: Path, starts: bytes, capsys) -> None:
    (workdir / "starts.csv").write_bytes(starts)
    line = refused(["report", str(sheet), "--training-starts", str(workdir / "starts.csv"), "-o",
                     str(workdir / "r.html")], workdir, capsys)
    assert "starts.csv" in line


def test_report_does_not_overwrite_without_force(sheet: Path, workdir: Path, capsys) -> None:
    (workdir / "r.html").write_text("mine")
    line = refused(["report", str(sheet), "-o", str(workdir / "r.html")], workdir, capsys)
    assert "--force" in line
    assert main(["report", str(sheet), "-o", str(workdir / "r.html"), "--force"]) == 0
    assert (workdir / "r.html").read_text() != "mine"


def test_plan_with_a_zero_delta_says_what_is_wrong(workdir: Path, capsys) -> None:
    line = refused(["plan", "--p0", "0.9", "--delta", "0"], workdir, capsys)
    assert "other than 0" in line and "between 0 and 1" not in line


@pytest.mark.parametrize("flags", [["--device", "bogus"], ["--runs-dir", "{w}/a_file/runs"]])
def test_run_flags_refused_before_anything_is_written(workdir: Path, flags: list[str], capsys) -> None:
    protocol = small_protocol_copy(workdir)
    (workdir / "a_file").write_text("x")
    flags = [f.replace("{w}", str(workdir)) for f in flags]
    refused(["run", str(protocol), "--headless", "--policy", "expert", *flags], workdir, capsys)


def test_collect_max_attempts_0(workdir: Path, capsys) -> None:
    protocol = small_protocol_copy(workdir)
    line = refused(["collect", str(protocol), "--policy", "expert", "--episodes", "1", "--max-attempts", "0",
                     "--output", str(workdir / "ds")], workdir, capsys)
    assert "--max-attempts" in line


def test_a_sweep_cell_with_negative_latency_is_refused_before_anything(workdir: Path, capsys) -> None:
    protocol = small_protocol_copy(workdir)
    spec = workdir / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"name": "grid", "checkpoints": ["expert"], "protocols": [protocol.name],
                                    "conditions": [{"latency_ms": -5}]}))
    line = refused(["sweep", str(spec)], workdir, capsys)
    assert "sweep.yaml" in line and "--latency-ms" in line


@pytest.mark.parametrize("length", [240, 300])
def test_long_protocol_and_output_names(workdir: Path, length: int, capsys) -> None:
    long = workdir / ("p" * length + ".yaml")
    refused(["protocol", "new", "--fixed", "--n", "2", "-o", str(long)], workdir, capsys)
    protocol = small_protocol_copy(workdir)
    named = workdir / ("q" * min(length, 250) + ".yaml")
    named.write_bytes(protocol.read_bytes())
    refused(["run", str(named), "--headless", "--policy", "expert"], workdir, capsys)
    assert not (workdir / "scoresheets").exists()


def test_a_5000_character_protocol_name(workdir: Path, capsys) -> None:
    refused(["run", "p" * 5000 + ".yaml", "--headless"], workdir, capsys)


def test_a_torn_binary_tail_is_dropped_with_a_warning_naming_the_bytes(sheet: Path, caplog) -> None:
    with sheet.open("ab") as handle:
        handle.write(bytes(range(128, 192)))   # 64 binary bytes, no newline
    with caplog.at_level(logging.WARNING, logger="harness.storage.journal"):
        loaded = load_scoresheet(sheet)
    assert len(loaded.attempts) == 1
    assert any("64 bytes" in r.getMessage() and str(sheet) in r.getMessage() for r in caplog.records)


def test_a_binary_line_in_a_sheet_is_one_line(sheet: Path, workdir: Path, capsys) -> None:
    with sheet.open("ab") as handle:
        handle.write(b"- {garbage: [\n")
    refused(["report", str(sheet)], workdir, capsys)


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly(sheet: Path, harness_cli) -> None:
    child = harness_cli.popen(["report", str(sheet), str(sheet), str(sheet)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=sheet.parent)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()   # the reader is gone before the first line: like `| head -0`
    err = child.stderr.read().decode()
    child.wait(timeout=120)
    assert err == "", err
    assert child.returncode in (0, 141)


def test_report_json_still_parses(sheet: Path, capsys) -> None:
    assert main(["report", str(sheet), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"]
