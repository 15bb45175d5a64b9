"""Nothing lost, nothing half-written: one writer per sheet, truncation caught, old sheets still readable.

Each test names the finding of issue 13 it pins down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from harness.errors import HarnessInputError, StaleRunError
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, hashed_fields, load_scoresheet, lock_scoresheet, now_iso, sha256_of
from harness.models.sheet_records import PlacementMeasurement, attempt_from_label
from harness.run.evidence import EvidenceRecorder
from harness.storage import journal
from harness.storage.lock import WriterBusy, WriterLock
from harness.storage.safe_yaml import load_yaml_text
from tests.helpers import fake_attempt, judge_verdict, locked_sheet

REPO = Path(__file__).resolve().parents[2]


def _scored(sheet, *labels: str):
    for index, label in enumerate(labels, start=1):
        sheet.add_attempt(fake_attempt(index, 1, label))
    return sheet


def _drop_last_lines(path: Path, count: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-count]))


# --- finding 2: deleting the last attempts by hand -------------------------------------------

def test_deleting_the_last_attempt_by_hand_is_refused(tmp_path) -> None:
    sheet = _scored(locked_sheet(tmp_path), "success", "no_grasp", "success")
    _drop_last_lines(sheet.path, 1)
    with pytest.raises(StaleRunError, match="1 recorded entry is missing from the end"):
        load_scoresheet(sheet.path)


def test_deleting_every_attempt_through_a_yaml_tool_is_refused(tmp_path) -> None:
    sheet = _scored(locked_sheet(tmp_path), "success", "no_grasp")
    data = yaml.safe_load(sheet.path.read_text())
    data["records"] = []
    sheet.path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(StaleRunError, match="2 recorded entries are missing"):
        load_scoresheet(sheet.path)


def test_a_sheet_without_its_witness_is_refused(tmp_path) -> None:
    sheet = _scored(locked_sheet(tmp_path), "success")
    journal.witness_path(sheet.path).unlink()
    with pytest.raises(StaleRunError, match="missing"):
        load_scoresheet(sheet.path)


def test_a_reformatted_but_unchanged_sheet_still_verifies(tmp_path) -> None:
    sheet = _scored(locked_sheet(tmp_path), "success", "wrong_placement")
    data = yaml.safe_load(sheet.path.read_text())
    sheet.path.write_text(yaml.safe_dump(data, sort_keys=False))
    reloaded = load_scoresheet(sheet.path)
    assert [a.label for a in reloaded.attempts] == ["success", "wrong_placement"]


# --- crashes mid-append ----------------------------------------------------------------------

def test_a_torn_last_line_is_skipped_then_cut_off_by_the_next_append(tmp_path) -> None:
    sheet = _scored(locked_sheet(tmp_path), "success")
    with sheet.path.open("ab") as handle:
        handle.write(b'- {"attempt":{"trial_index":2,"torn_her')   # a kill mid-write: never acknowledged
    reloaded = load_scoresheet(sheet.path)
    assert [a.trial_index for a in reloaded.attempts] == [1]
    reloaded.add_attempt(fake_attempt(2, 1, "no_grasp"))
    again = load_scoresheet(sheet.path)
    assert [(a.trial_index, a.label) for a in again.attempts] == [(1, "success"), (2, "no_grasp")]
    assert b"torn_her" not in sheet.path.read_bytes()


def test_records_ahead_of_their_witness_lines_lose_nothing(tmp_path) -> None:
    """A writer killed between its records and their witness lines, or a reader that read the witness
    just before a writer appended: either way the durable records count."""
    sheet = _scored(locked_sheet(tmp_path), "success", "no_grasp")
    _drop_last_lines(journal.witness_path(sheet.path), 1)   # one append's worth: the crash window
    reloaded = load_scoresheet(sheet.path)
    assert len(reloaded.attempts) == 2
    reloaded.add_attempt(fake_attempt(3, 1, "success"))
    witness = journal.witness_path(sheet.path).read_text().splitlines()
    assert [line.split()[:2] for line in witness] == [["attempt", "1"], ["attempt", "2"], ["attempt", "3"]]
    assert len(load_scoresheet(sheet.path).attempts) == 3


# --- finding 1: one writer -------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from harness.storage.lock import WriterLock
    lock = WriterLock(sys.argv[1], "harness run").acquire()
    print("held", flush=True)
    time.sleep(60)   # behaviour: the lock held until the test kills this process
""")


def _hold_in_child(target: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], stdout=subprocess.PIPE, text=True,
                             cwd=REPO)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    child = _hold_in_child(sheet.path)
    try:
        with pytest.raises(WriterBusy) as err:
            WriterLock(sheet.path).acquire()
        assert f"pid {child.pid}" in err.value.one_line() and "harness run" in err.value.one_line()
        with pytest.raises(WriterBusy):
            sheet.add_attempt(fake_attempt(1, 1, "success"))
        assert load_scoresheet(sheet.path).attempts == []
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lock = WriterLock(sheet.path).acquire()   # the dead holder's record is still there: stale, taken over
    try:
        assert lock.took_over is not None and lock.took_over.pid == child.pid
    finally:
        lock.release()
    assert not lock.holder_path.exists()
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    assert len(load_scoresheet(sheet.path).attempts) == 1


def test_measuring_during_a_run_is_refused_and_the_run_loses_nothing(tmp_path) -> None:
    run_sheet = locked_sheet(tmp_path)
    run_lock = run_sheet.hold_writer_lock(command="harness run")
    run_sheet.add_attempt(fake_attempt(1, 1, "success"))
    measure_sheet = load_scoresheet(run_sheet.path)
    measurement = PlacementMeasurement(trial_index=1, attempt=1, placement_error_cm=0.5, inside_bowl=True,
                                       method="pixels", image="x.png", measured_at=now_iso())
    with pytest.raises(WriterBusy, match="harness run"):
        measure_sheet.add_measurement(measurement)
    run_sheet.add_attempt(fake_attempt(2, 1, "no_grasp"))
    run_lock.release()
    measure_sheet = load_scoresheet(run_sheet.path)
    measure_sheet.add_measurement(measurement)
    final = load_scoresheet(run_sheet.path)
    assert [a.trial_index for a in final.attempts] == [1, 2] and len(final.measurements) == 1


def test_a_writer_that_ignored_the_lock_cannot_fork_the_chain(tmp_path) -> None:
    first = locked_sheet(tmp_path)
    second = load_scoresheet(first.path)
    first.add_attempt(fake_attempt(1, 1, "success"))
    with pytest.raises(StaleRunError, match="changed by another process"):
        second.add_attempt(fake_attempt(2, 1, "success"))
    assert [a.trial_index for a in load_scoresheet(first.path).attempts] == [1]


# --- storage: old sheets, long sheets --------------------------------------------------------

def _format_1_sheet(folder: Path) -> Path:
    """A sheet exactly as the previous version wrote it (whole YAML, attempts chained in place)."""
    sheet = locked_sheet(folder)
    locked = {k: v for k, v in sheet.locked_data.items() if k != "journal"}   # it locked no format then
    lock = {"sha256": sha256_of(locked), "field_sha256": {k: sha256_of(locked[k]) for k in hashed_fields(locked)},
            "locked_at": sheet.lock["locked_at"]}
    data = {"format": journal.FORMAT_V1, "locked": locked, "lock": lock, "settings": {},
            "attempts": [], "measurements": []}
    previous = lock["sha256"]
    for index in (1, 2):
        record = fake_attempt(index, 1, "success").model_dump(mode="json", exclude={"chain_sha256"})
        previous = sha256_of({"prev": previous, "record": record})
        data["attempts"].append({**record, "chain_sha256": previous})
    path = folder / "old.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_format_1_sheet_loads_and_converts_on_its_first_write_with_its_hashes_unchanged(tmp_path) -> None:
    path = _format_1_sheet(tmp_path)
    old = load_scoresheet(path)
    hashes = [a.chain_sha256 for a in old.attempts]
    assert len(hashes) == 2 and old.pending_trials() == [3]
    old.add_attempt(fake_attempt(3, 1, "no_grasp"))
    assert path.read_text().startswith('format: "harness.scoresheet/2"')
    new = load_scoresheet(path)
    assert [a.chain_sha256 for a in new.attempts][:2] == hashes and new.complete


@pytest.mark.slow
def test_appending_at_5000_attempts_keeps_every_guarantee(tmp_path) -> None:
    from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
    from harness.models.protocol import Protocol, Trial, protocol_to_yaml

    protocol = Protocol(name="long", task="t", start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS,
                        trials=[Trial(index=i, dx_cm=0.0, dy_cm=0.0) for i in range(1, 5003)])
    protocol_path = tmp_path / "long.yaml"
    protocol_path.write_text(protocol_to_yaml(protocol))
    sheet = lock_scoresheet(tmp_path / "long-sheet.yaml", build_locked(protocol, protocol_path, "expert", "sim"), {})
    for index in range(1, 5001):   # built in memory, written once: setup, not the thing under test
        attempt = attempt_from_label("success", trial_index=index, attempt=1, started_at="t0", ended_at="t1",
                                     duration_s=1.0)
        previous = sheet.records[-1].chain_sha256 if sheet.records else sheet.lock["sha256"]
        sheet.records.append(attempt.model_copy(update={"chain_sha256": sha256_of(
            {"prev": previous, "record": attempt.model_dump(mode="json", exclude={"chain_sha256"})})}))
    sheet.save()
    loaded = load_scoresheet(sheet.path)
    assert loaded.pending_trials() == [5001, 5002]
    size = sheet.path.stat().st_size
    loaded.add_attempt(fake_attempt(5001, 1, "void", void_reason="camera dropout"))
    loaded.add_attempt(fake_attempt(5001, 2, "success"))
    grown = sheet.path.stat().st_size - size
    assert grown < 2_000, "an append writes its own line, never the sheet again"
    again = load_scoresheet(sheet.path)
    assert len(again.attempts) == 5002 and again.pending_trials() == [5002]
    _drop_last_lines(sheet.path, 1)
    with pytest.raises(StaleRunError, match="missing from the end"):
        load_scoresheet(sheet.path)


# --- resume never deletes evidence -----------------------------------------------------------

def test_an_existing_evidence_folder_is_moved_aside_never_deleted(tmp_path) -> None:
    folder = tmp_path / "runs" / "sheet" / "trial-001-a1"
    folder.mkdir(parents=True)
    (folder / "top.mp4").write_bytes(b"the original evidence")
    recorder = EvidenceRecorder(folder, [], lambda cam, w, h: None, control_fps=30, video=False)
    verdict = judge_verdict()
    recorder.finish({}, verdict)
    kept = folder.with_name("trial-001-a1.unrecorded-1")
    assert (kept / "top.mp4").read_bytes() == b"the original evidence"
    assert json.loads((folder / "judge.json").read_text()) == verdict.to_json()


# --- findings 5 and 6: NaN, absurd values, hostile YAML ---------------------------------------

@pytest.mark.parametrize(("edit", "field"), [
    (lambda t: t.replace("dx_cm: 3.0", "dx_cm: .nan"), "dx_cm"),
    (lambda t: t.replace("yaw_deg: 15.0", "yaw_deg: 1.0e+308"), "yaw_deg"),
    (lambda t: t.replace("shoulder_lift: -60.0", "shoulder_lift: .nan"), "start_pose"),
    (lambda t: t.replace("episode_time_limit_s: 12.0", "episode_time_limit_s: .inf"), "episode_time_limit_s"),
])
def test_nan_infinite_and_absurd_protocol_values_are_refused_by_name(tmp_path, edit, field) -> None:
    text = (REPO / "tests" / "data" / "small.yaml").read_text()
    changed = edit(text)
    assert changed != text, "the edit must apply to the test protocol"
    path = tmp_path / "bad.yaml"
    path.write_text(changed)
    with pytest.raises(HarnessInputError, match=field):
        load_protocol(path)


@pytest.mark.slow
def test_a_protocol_beyond_10k_trials_or_an_infinite_reach_is_refused(tmp_path) -> None:
    data = yaml.safe_load((REPO / "tests" / "data" / "small.yaml").read_text())
    data["trials"] = [{"index": i, "dx_cm": 0.0, "dy_cm": 0.0} for i in range(1, 10_002)]
    path = tmp_path / "huge.yaml"
    path.write_text(json.dumps(data))   # JSON is YAML, and quick to write
    with pytest.raises(HarnessInputError, match="trials"):
        load_protocol(path)
    data["trials"] = data["trials"][:3]
    data.setdefault("scene", {}).setdefault("workspace", {})["max_reach_cm"] = float("inf")
    path.write_text(yaml.safe_dump(data))   # .inf
    with pytest.raises(HarnessInputError, match="max_reach_cm"):
        load_protocol(path)


def test_nested_aliases_are_refused_in_milliseconds() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))
    assert len(bomb) < 500
    start = time.process_time()   # this process's CPU time: what the bomb would burn, not what load adds
    with pytest.raises(HarnessInputError, match="aliases expand"):
        load_yaml_text(bomb, "bomb.yaml")
    assert time.process_time() - start < 2.0
    with pytest.raises(HarnessInputError, match="nest"):
        load_yaml_text("[" * 10_000 + "]" * 10_000, "deep.yaml")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_output_path_that_is_a_device_is_refused_and_left_alone(workdir, capsys) -> None:
    from harness.cli import main

    assert main(["protocol", "new", "--fixed", "--n", "3", "-o", "/dev/full", "--force"]) == 2
    assert Path("/dev/full").is_char_device()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/full" in err[0]


# --- finding 7: report across tasks, and sheets whose protocol or checkpoint changed ----------

def _sheet_with_task(folder: Path, task: str):
    folder.mkdir()
    protocol_path = folder / "small.yaml"
    protocol_path.write_text((REPO / "tests" / "data" / "small.yaml").read_text().replace(
        "task: Pick up the cube and place it in the bowl.", f"task: {task}"))
    locked = build_locked(load_protocol(protocol_path), protocol_path, "expert", "sim")
    sheet = lock_scoresheet(folder / "sheet.yaml", locked, {})
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    return sheet


@pytest.mark.slow
@pytest.mark.slow
def test_report_refuses_to_compare_different_tasks_unless_forced(tmp_path, capsys) -> None:
    from harness.cli import main

    a = _sheet_with_task(tmp_path / "a", "Pick up the cube and place it in the bowl.")
    b = _sheet_with_task(tmp_path / "b", "Stack the cube on the block.")
    assert main(["report", str(a.path), str(b.path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "locked.task" in err[0] and "--force-compare" in err[0]
    html = tmp_path / "r.html"
    assert main(["report", str(a.path), str(b.path), "--force-compare", "-o", str(html)]) == 0
    assert "NOT COMPARABLE (task differs" in html.read_text().split("</title>")[0]


def test_report_flags_a_sheet_whose_protocol_or_checkpoint_changed_since_locking(tmp_path, capsys) -> None:
    from harness.cli import main

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights-v1")
    sheet = locked_sheet(tmp_path, policy=str(ckpt))
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    assert main(["report", str(sheet.path)]) == 0
    assert "Changed" not in capsys.readouterr().out
    protocol = tmp_path / "small.yaml"
    protocol.write_text(protocol.read_text() + "\n# edited after locking\n")
    (ckpt / "model.safetensors").write_bytes(b"weights-v2")
    assert main(["report", str(sheet.path)]) == 0
    captured = capsys.readouterr()
    assert "protocol file changed since the sheet was locked" in captured.out
    assert "checkpoint's files changed since the sheet was locked" in captured.out
    assert captured.err.count("warning:") == 2


# --- finding 8: dropout detection does not depend on video ------------------------------------

@pytest.mark.slow
def test_a_frozen_camera_voids_the_trial_even_without_video(workdir, capsys) -> None:
    from harness.cli import main
    from tests.helpers import small_protocol_copy

    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--no-video", "--inject-dropout", "1:30"]) == 3
    sheet = load_scoresheet(workdir / "scoresheets" / "small-expert.yaml")
    assert [(a.trial_index, a.outcome) for a in sheet.attempts] == [(1, "void")]
    assert sheet.attempts[0].void_reason.startswith("camera dropout: top")


# --- finding 1 through the commands: a second run, and a measure during a run -----------------

def test_a_second_run_and_a_measure_are_refused_while_a_run_holds_the_sheet(workdir, capsys) -> None:
    from harness.cli import main
    from tests.helpers import small_protocol_copy

    protocol_path = small_protocol_copy(workdir / "protocols")
    sheet_path = workdir / "scoresheets" / "small-expert.yaml"
    sheet = lock_scoresheet(sheet_path, build_locked(load_protocol(protocol_path), protocol_path, "expert", "sim"), {})
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    trial = workdir / "runs" / "small-expert" / "trial-001-a1"
    trial.mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (160, 120), (200, 200, 200)).save(trial / "final_top.png")
    before = sheet_path.read_bytes()
    child = _hold_in_child(sheet_path)
    try:
        assert main(["run", str(protocol_path), "--resume", "--headless", "--no-video"]) == 2
        assert main(["measure", "runs/small-expert", "--bowl-cm", "11.5", "--clicks", "20,20 120,100"]) == 2
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(f"pid {child.pid}" in line and "harness run" in line for line in lines)
    assert sheet_path.read_bytes() == before
    assert not (trial / "final_top_measured.png").exists() and not (workdir / "calibration").exists()
