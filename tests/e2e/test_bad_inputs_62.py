"""Issue 62's bad inputs, each as a hostile but honest user tried it: every one crashed, hung or was silently
taken for something else. Now each is one line on stderr naming the file or field and what is wrong, exit 2,
nothing written; a disk that fills up mid-run pauses the run (exit 3) with every scored trial kept.

The huge images are crafted headers (a 69-byte PNG that claims 100,000 x 100,000 pixels), not real images;
the full disk is a small tmpfs the test mounts where the machine allows it (root), and everywhere a file-size
limit (`RLIMIT_FSIZE`), which refuses a write as a full disk does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from PIL import Image

from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from tests.helpers import refused, small_filesystem

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "data" / "small.yaml"


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """A command that would wait forever (a pipe with no writer) fails the test instead of hanging CI."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _refused(argv: list[str], folder: Path, capsys) -> str:
    with _deadline(60):
        return refused(argv, folder, capsys)


def _png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims `width` x `height` pixels, with a few bytes of data: decoding it would ask
    for width * height * 3 bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


@pytest.fixture
def fifo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A named pipe nobody writes to, outside the working folder (whose state a refusal must not change)."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this platform")
    path = tmp_path_factory.mktemp("pipes") / "pipe.yaml"
    os.mkfifo(path)
    return path


@pytest.fixture
def sheet(workdir: Path) -> Path:
    from tests.helpers import fake_attempt, locked_sheet

    made = locked_sheet(workdir)
    made.add_attempt(fake_attempt(1, 1, "success"))
    return made.path


# --- images: size and dimensions from the header, before a pixel is decoded ---------------------------------

MEASURE = ["--bowl-cm", "11.5", "--clicks", "40,60 120,60"]


def test_measure_on_a_1x1_image_is_one_line(workdir: Path, capsys) -> None:
    Image.new("RGB", (1, 1)).save(workdir / "dot.png")
    line = _refused(["measure", str(workdir / "dot.png"), *MEASURE, "--calibration", "cal/bowl.yaml"], workdir, capsys)
    assert "dot.png: 1 x 1 pixels" in line and "at least 32" in line


@pytest.mark.parametrize(("content", "problem"), [(b"", "empty: not an image"), (b"\x89PNG garbage", "not a readable")])
def test_measure_on_an_empty_or_garbage_image_is_one_line(workdir: Path, content: bytes, problem: str,
                                                           capsys) -> None:
    (workdir / "frame.png").write_bytes(content)
    line = _refused(["measure", str(workdir / "frame.png"), *MEASURE, "--calibration", "cal/bowl.yaml"], workdir,
                    capsys)
    assert f"frame.png: {problem}" in line


@pytest.mark.parametrize("side", [20_000, 100_000])
def test_measure_on_a_png_claiming_a_huge_size_is_one_line(workdir: Path, side: int, capsys) -> None:
    image = _png_claiming(workdir / "bomb.png", side, side)
    line = _refused(["measure", str(image), *MEASURE, "--calibration", "cal/bowl.yaml"], workdir, capsys)
    assert "bomb.png" in line and "pixels" in line and "Traceback" not in line


def test_an_image_under_pils_bomb_limit_but_over_ours_names_its_size(workdir: Path, capsys) -> None:
    image = _png_claiming(workdir / "big.png", 9000, 8000)   # 72 Mpx: PIL only warns; decoded, 216 MB
    line = _refused(["measure", str(image), *MEASURE, "--calibration", "cal/bowl.yaml"], workdir, capsys)
    assert "big.png: 9000 x 8000 pixels" in line


@pytest.mark.parametrize("command", ["scene-check", "calibrate-camera"])
def test_the_other_image_commands_check_the_header_and_refuse_a_pipe(workdir: Path, fifo: Path, command: str,
                                                                     capsys) -> None:
    bomb = _png_claiming(workdir / "bomb.png", 100_000, 100_000)
    Image.new("RGB", (64, 48)).save(workdir / "ref.png")
    tail = ["--reference", str(workdir / "ref.png")] if command == "scene-check" else []
    assert "bomb.png" in _refused([command, str(bomb), *tail], workdir, capsys)
    assert "pipe.yaml: is a named pipe" in _refused([command, str(fifo), *tail], workdir, capsys)


# --- special files: refused before a byte is read -----------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_report_on_dev_zero_is_refused_before_reading(workdir: Path, capsys) -> None:
    line = _refused(["report", "/dev/zero"], workdir, capsys)
    assert line == "harness: error: /dev/zero: is a character device, not a scoresheet (a regular file)"


def test_report_on_a_pipe_does_not_wait_for_a_writer(workdir: Path, fifo: Path, capsys) -> None:
    assert "pipe.yaml: is a named pipe, not a scoresheet" in _refused(["report", str(fifo)], workdir, capsys)


def test_report_on_a_folder_says_so(workdir: Path, capsys) -> None:
    assert "is a folder, not a scoresheet" in _refused(["report", str(workdir / "protocols")], workdir, capsys)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_training_starts_from_a_device_or_pipe(sheet: Path, workdir: Path, fifo: Path, capsys) -> None:
    for special in ("/dev/zero", str(fifo)):
        line = _refused(["report", str(sheet), "--training-starts", special], workdir, capsys)
        assert line.startswith(f"harness: error: {special}: is a ")


@pytest.mark.parametrize("argv", [["protocol", "check", "{p}"], ["run", "{p}", "--headless"], ["sweep", "{p}"],
                                  ["collect", "{p}", "--policy", "expert", "--episodes", "1"]])
def test_every_user_file_read_refuses_a_pipe(workdir: Path, fifo: Path, argv: list[str], capsys) -> None:
    line = _refused([word.replace("{p}", str(fifo)) for word in argv], workdir, capsys)
    assert "pipe.yaml: is a named pipe" in line


def test_twin_on_a_folder_says_it_is_a_folder(workdir: Path, capsys) -> None:
    assert "protocols: is a folder, not a scoresheet" in _refused(["twin", str(workdir / "protocols")], workdir,
                                                                  capsys)


# --- protocols: what a number, a comparison list and a policy must be ---------------------------------------

def _protocol(workdir: Path, edit) -> Path:
    data = yaml.safe_load(SMALL.read_text())
    edit(data)
    path = workdir / "protocols" / "edited.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _sequential(data: dict, **rule: object) -> None:
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.5,
                             "max_trials_per_arm": 20, **rule}


@pytest.mark.parametrize(("comparisons", "problem"), [
    ([], "stopping_rule.comparisons: empty"),
    ([["A", "B"], ["B", "A"]], "stopping_rule.comparisons: B against A is declared twice"),
    ([["A", "B"], ["A", "C"], ["A", "B"]], "A against B is declared twice"),
])
def test_comparisons_empty_or_declared_twice(workdir: Path, comparisons: list, problem: str, capsys) -> None:
    path = _protocol(workdir, lambda data: _sequential(data, comparisons=comparisons))
    assert problem in _refused(["protocol", "check", str(path)], workdir, capsys)


# every numeric field a protocol has, each given `true` (which pydantic's lax mode read as 1) or a quoted number
NUMERIC_FIELDS = {
    "fps": lambda d, v: d.update(fps=v),
    "episode_time_limit_s": lambda d, v: d.update(episode_time_limit_s=v),
    "stall_limit_s": lambda d, v: d.update(stall_limit_s=v),
    "scene.bowl_diameter_cm": lambda d, v: d["scene"].update(bowl_diameter_cm=v),
    "scene.trained_cube_xy_cm[0]": lambda d, v: d["scene"].update(trained_cube_xy_cm=[v, -5.0]),
    "scene.workspace.max_pan_deg": lambda d, v: d["scene"].update(workspace={"max_pan_deg": v}),
    "start_pose.gripper": lambda d, v: d["start_pose"].update(gripper=v),
    "trials[0].index": lambda d, v: d["trials"][0].update(index=v),
    "trials[0].dx_cm": lambda d, v: d["trials"][0].update(dx_cm=v),
    "trials[1].yaw_deg": lambda d, v: d["trials"][1].update(yaw_deg=v),
    "generator.n": lambda d, v: d.update(generator={"kind": "fixed", "n": v}),
    "generator.seed": lambda d, v: d.update(generator={"kind": "fixed", "n": 3, "seed": v}),
    "stopping_rule.min_trials": lambda d, v: d.update(stopping_rule={"kind": "wilson_width", "max_width": 0.3,
                                                                     "min_trials": v}),
    "stopping_rule.max_width": lambda d, v: d.update(stopping_rule={"kind": "wilson_width", "max_width": v}),
    "stopping_rule.max_trials_per_arm": lambda d, v: _sequential(d, max_trials_per_arm=v),
    "stopping_rule.alpha": lambda d, v: _sequential(d, alpha=v),
    "stopping_rule.min_difference": lambda d, v: _sequential(d, min_difference=v),
}


@pytest.mark.parametrize("value", [True, "1"])
@pytest.mark.parametrize("field", sorted(NUMERIC_FIELDS))
def test_a_boolean_or_a_string_where_a_number_belongs(workdir: Path, field: str, value: object, capsys) -> None:
    path = _protocol(workdir, lambda data: NUMERIC_FIELDS[field](data, value))
    line = _refused(["protocol", "check", str(path)], workdir, capsys)
    assert f"edited.yaml: {field}:" in line and "valid" in line, line


def test_a_whole_number_still_stands_for_a_real_one(workdir: Path, capsys) -> None:
    path = _protocol(workdir, lambda data: data.update(episode_time_limit_s=12, stall_limit_s=5))
    assert main(["protocol", "check", str(path)]) == 0


@pytest.mark.parametrize("argv", [
    ["run", "{p}", "--headless", "--policy", ""],
    ["run", "{p}", "--headless", "--policy", "expert", "--policy", "  "],
    ["collect", "{p}", "--policy", "", "--episodes", "1"],
    ["rehearse", "{p}", "--policy", "", "--operator", "scripted"],
])
def test_an_empty_policy_is_refused_not_replaced_by_the_protocols(workdir: Path, argv: list[str], capsys) -> None:
    shutil.copy(SMALL, workdir / "small.yaml")   # its run.policy is expert: an empty --policy ran that one
    line = _refused([word.replace("{p}", str(workdir / "small.yaml")) for word in argv], workdir, capsys)
    assert line.startswith("harness: error: --policy: empty")


def test_an_empty_policy_from_python_is_refused_too(workdir: Path) -> None:
    from harness.errors import HarnessInputError
    from harness.models.run_request import RunRequest

    with pytest.raises(HarnessInputError, match="--policy: empty"):
        RunRequest(protocol=SMALL, policies=("",))


# --- a full disk: the run pauses, every scored trial kept ---------------------------------------------------

def _run(harness_cli, work: Path, *extra: str, rlimits=None) -> subprocess.CompletedProcess[str]:
    return harness_cli.run(["run", str(work / "small.yaml"), "--headless", "--policy", "expert", "--scoresheet",
                            str(work / "disk" / "s.yaml"), "--runs-dir", str(work / "disk" / "runs"), *extra],
                           cwd=work, capture_output=True, text=True, timeout=300, rlimits=rlimits,
                           env={**os.environ, "PYTHONPATH": str(REPO)})


def _paused_line(child: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in child.stderr.splitlines() if line.startswith("harness")]
    assert child.returncode == 3 and len(lines) == 1 and "Traceback" not in child.stderr, child.stderr[-2000:]
    assert lines[0].startswith("harness: run paused: no room to record: ") and "--resume" in lines[0]
    return lines[0]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="a tmpfs is Linux's")
def test_a_disk_that_fills_mid_run_pauses_it_and_the_resume_finishes(tmp_path: Path, harness_cli) -> None:
    """Room for the scoresheet and two trials' evidence (about 750 KiB each), not three: the run pauses
    before the third trial, names the folder and the room a trial needs; once the disk grows, --resume
    finishes the run with the first two trials as they were."""
    shutil.copy(SMALL, tmp_path / "small.yaml")
    with small_filesystem(tmp_path / "disk", 1800) as grow:
        line = _paused_line(_run(harness_cli, tmp_path))
        runs = tmp_path / "disk" / "runs" / "s"
        assert f"{runs}: " in line and "free" in line and "a trial of this run needs about" in line, line
        kept = load_scoresheet(tmp_path / "disk" / "s.yaml").attempts
        assert [(a.trial_index, a.label) for a in kept] == [(1, Label.SUCCESS), (2, Label.SUCCESS)]
        assert sorted(p.name for p in runs.glob("trial-*")) == ["trial-001-a1", "trial-002-a1"]
        grow(4096)
        resumed = _run(harness_cli, tmp_path, "--resume")
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        done = load_scoresheet(tmp_path / "disk" / "s.yaml").attempts
        assert done[:2] == kept and [a.trial_index for a in done] == [1, 2, 3]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="a tmpfs is Linux's")
def test_a_disk_full_before_the_first_trials_evidence_pauses_with_nothing_half_written(tmp_path: Path,
                                                                                         harness_cli) -> None:
    """Room for the scoresheet, not for a trial's frames: the write refused mid-trial (ENOSPC, in the evidence
    writer's process) pauses the run; the trial in flight leaves no folder and no record."""
    shutil.copy(SMALL, tmp_path / "small.yaml")
    with small_filesystem(tmp_path / "disk", 400):
        line = _paused_line(_run(harness_cli, tmp_path))
        assert "No space left on device" in line and "the trial in flight was not recorded" in line, line
        assert load_scoresheet(tmp_path / "disk" / "s.yaml").attempts == []
        assert list((tmp_path / "disk" / "runs" / "s").glob("trial-*")) == []


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_file_size_limit_mid_trial_pauses_the_run(tmp_path: Path, harness_cli) -> None:
    """The same refusal without root: a file-size limit under a trial's frames (about 300 KiB each) but over
    the scoresheet (a few KiB) refuses the first frame's write (EFBIG) as a full disk would."""
    shutil.copy(SMALL, tmp_path / "small.yaml")
    (tmp_path / "disk").mkdir()

    limit = {resource.RLIMIT_FSIZE: (200 * 1024, resource.RLIM_INFINITY)}
    line = _paused_line(_run(harness_cli, tmp_path, rlimits=limit))
    assert "File too large" in line and str(tmp_path / "disk" / "runs" / "s") in line, line
    assert load_scoresheet(tmp_path / "disk" / "s.yaml").attempts == []
    assert list((tmp_path / "disk" / "runs" / "s").glob("trial-*")) == []


def test_the_room_a_trial_needs_is_its_largest_folder_with_a_stand_in_disk(tmp_path: Path) -> None:
    """`TrialRoom` over an injected free-space reading (no disk filled): no pause before any trial folder can be
    measured; then a pause once less is free than the largest folder and a record need; a refused write says
    whether the trial in flight was recorded."""
    from harness.models.taxonomy import VoidKind
    from harness.run.disk_room import RECORD_BYTES, TrialRoom

    free = {"bytes": 10_000}
    runs = tmp_path / "runs" / "s"
    room = TrialRoom(runs, tmp_path / "s.yaml", lambda folder: free["bytes"])
    assert room.shortfall() is None   # nothing measured yet: only a refused write can tell
    (runs / "trial-001-a1").mkdir(parents=True)
    (runs / "trial-001-a1" / "final_top.png").write_bytes(b"\0" * 300_000)
    fresh = TrialRoom(runs, tmp_path / "s.yaml", lambda folder: free["bytes"])
    short = fresh.shortfall()
    assert short is not None and short.kind is VoidKind.DISK_FULL and short.kind.pauses_run
    assert short.reason.startswith(f"no room to record: {runs}: 9.77 KiB free")
    assert "needs about 357 KiB" in short.reason
    free["bytes"] = 300_000 + RECORD_BYTES
    assert fresh.shortfall() is None
    assert "the trial in flight was not recorded" in fresh.refused(errno.ENOSPC, None).reason
    assert "every trial so far is recorded" in fresh.refused(errno.ENOSPC, None, in_flight_recorded=True).reason


@pytest.mark.skipif(shutil.which("ssh-keygen") is None or not Path("/dev/zero").exists(),
                    reason="needs OpenSSH's ssh-keygen and /dev/zero")
def test_report_signed_by_a_device_or_a_pipe(sheet: Path, workdir: Path, fifo: Path, capsys) -> None:
    """`--signed-by` reads a public key: /dev/zero would never end, a pipe would wait for a writer."""
    keys = workdir / "keys"
    keys.mkdir()
    assert main(["sheet", "keygen", str(keys / "key")]) == 0
    assert main(["sheet", "sign", str(sheet), "--key", str(keys / "key")]) == 0
    for special in ("/dev/zero", str(fifo)):
        line = _refused(["report", str(sheet), "--signed-by", special], workdir, capsys)
        assert line.startswith(f"harness: error: {special}: is a ") and "not a public key" in line, line
