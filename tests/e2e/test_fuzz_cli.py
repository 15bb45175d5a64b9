"""Bad input to every subcommand: exit 2, one line on stderr, no traceback, nothing written.

Subcommands run in-process through `harness.cli.main` (a subprocess each would cost a Python
start-up); the full-disk case needs a file-size limit, so it alone runs in a child process.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.cli import main

REPO = Path(__file__).resolve().parents[2]
SMALL = (REPO / "tests" / "data" / "small.yaml").read_text()
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))
READ_ONLY = "/proc/harness-fuzz/out"   # a folder nobody, root included, can create


def _inputs(folder: Path) -> None:
    rng = np.random.default_rng(0)
    (folder / "garbage.bin").write_bytes(b"\x00\xff" + rng.bytes(4096))
    (folder / "empty.yaml").write_text("")
    (folder / "huge.yaml").write_bytes(b"a: b\n" * (2 * 1024 * 1024))
    (folder / "nan.yaml").write_text(SMALL.replace("dx_cm: 3.0", "dx_cm: .nan"))
    (folder / "inf.yaml").write_text(SMALL.replace("yaw_deg: 15.0", "yaw_deg: .inf"))
    (folder / "wrongtype.yaml").write_text(SMALL.replace("fps: 30", "fps: [1, 2]"))
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    (folder / "bomb.yaml").write_text(BOMB)
    (folder / "afolder").mkdir()
    (folder / "a_file").write_text("not a folder")
    (folder / "dangling.yaml").symlink_to(folder / "nowhere.yaml")
    (folder / "small.yaml").write_text(SMALL)
    (folder / "badpolicy").mkdir()
    (folder / "badpolicy" / "config.json").write_text("{garbage")
    Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(folder / "frame.png")


BAD = {   # name: argv, with {d} for the inputs folder
    "protocol check garbage": "protocol check {d}/garbage.bin",
    "protocol check empty": "protocol check {d}/empty.yaml",
    "protocol check huge": "protocol check {d}/huge.yaml",
    "protocol check nan": "protocol check {d}/nan.yaml",
    "protocol check inf": "protocol check {d}/inf.yaml",
    "protocol check wrong type": "protocol check {d}/wrongtype.yaml",
    "protocol check a list": "protocol check {d}/list.yaml",
    "protocol check aliases": "protocol check {d}/bomb.yaml",
    "protocol check folder": "protocol check {d}/afolder",
    "protocol check dangling link": "protocol check {d}/dangling.yaml",
    "protocol check missing": "protocol check {d}/missing.yaml",
    "protocol new n 0": "protocol new --fixed --n 0 -o {d}/new.yaml",
    "protocol new n -5": "protocol new --randomized --n -5 -o {d}/new.yaml",
    "protocol new radius nan": "protocol new --randomized --radius-cm nan -o {d}/new.yaml",
    "protocol new radius inf": "protocol new --randomized --radius-cm inf -o {d}/new.yaml",
    "protocol new n not a number": "protocol new --fixed --n abc -o {d}/new.yaml",
    "protocol new under a file": "protocol new --fixed --n 3 -o {d}/a_file/new.yaml",
    "protocol new onto a folder": "protocol new --fixed --n 3 -o {d}/afolder --force",
    "protocol new onto /dev/full": "protocol new --fixed --n 3 -o /dev/full --force",
    "protocol new read-only folder": "protocol new --fixed --n 3 -o " + READ_ONLY + "/new.yaml",
    "report garbage": "report {d}/garbage.bin",
    "report empty": "report {d}/empty.yaml",
    "report protocol as sheet": "report {d}/small.yaml",
    "report aliases": "report {d}/bomb.yaml",
    "report folder": "report {d}/afolder",
    "report huge": "report {d}/huge.yaml",
    "plan alpha 0": "plan --p0 0.9 --delta -0.2 --alpha 0",
    "plan power 1": "plan --p0 0.9 --delta -0.2 --power 1",
    "plan p0 nan": "plan --p0 nan --delta -0.2",
    "plan delta out of range": "plan --p0 0.9 --delta 0.5",
    "measure non-image": "measure {d}/garbage.bin --bowl-cm 11.5 --auto --calibration {d}/cal/bowl.yaml",
    "measure bowl 0": "measure {d}/frame.png --bowl-cm 0 --auto --calibration {d}/cal/bowl.yaml",
    "measure bowl nan": "measure {d}/frame.png --bowl-cm nan --auto --calibration {d}/cal/bowl.yaml",
    "measure identical clicks": "measure {d}/frame.png --bowl-cm 11.5 --clicks '50,50 50,50' "
                                "--calibration {d}/cal/bowl.yaml",
    "measure garbage clicks": "measure {d}/frame.png --bowl-cm 11.5 --clicks 'abc' --calibration {d}/cal/bowl.yaml",
    "scene-check garbage": "scene-check {d}/garbage.bin --reference {d}/frame.png",
    "scene-check garbage reference": "scene-check {d}/frame.png --reference {d}/garbage.bin",
    "dataset validate not a dataset": "dataset validate {d}/afolder",
    "dataset coverage not a dataset": "dataset coverage {d}/afolder",
    "dataset split not a dataset": "dataset split {d}/afolder",
    "offline-eval episodes 0": "offline-eval --dataset {d}/afolder --episodes 0",
    "emulate-bus garbage scenario": "emulate-bus --scenario {d}/garbage.bin",
    "emulate-bus aliases": "emulate-bus --scenario {d}/bomb.yaml",
    "emulate-bus empty scenario": "emulate-bus --scenario {d}/empty.yaml",
    "run garbage protocol": "run {d}/garbage.bin --headless",
    "run nan protocol": "run {d}/nan.yaml --headless",
    "run video fps 0": "run {d}/small.yaml --headless --video-fps 0",
    "run video size 0x0": "run {d}/small.yaml --headless --video-size 0x0",
    "run dropout abc": "run {d}/small.yaml --headless --inject-dropout abc",
    "run rename map": "run {d}/small.yaml --headless --rename-map '{{bad'",
    "run rename map not a map": "run {d}/small.yaml --headless --rename-map '[1, 2]'",
    "run max trials 0": "run {d}/small.yaml --headless --max-trials 0",
    "run runs dir is a file": "run {d}/small.yaml --headless --runs-dir {d}/a_file",
    "run unknown policy": "run {d}/small.yaml --headless --policy no-such-policy",
    "run corrupt policy config": "run {d}/small.yaml --headless --robot sim --policy {d}/badpolicy",
    "collect garbage protocol": "collect {d}/garbage.bin --policy expert --episodes 2",
    "collect episodes 0": "collect {d}/small.yaml --policy expert --episodes 0",
}


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:   # argparse's own refusals
            code = exit_.code
    return code, err.getvalue()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    _inputs(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, inputs, workdir) -> None:
    import shlex

    argv = shlex.split(BAD[case].format(d=inputs))
    before_inputs, before_work = _tree(inputs), _tree(workdir)
    code, err = _run(argv)
    lines = err.strip().splitlines()
    assert code == 2, f"{case}: exit {code}, stderr: {err[-600:]}"
    assert len(lines) == 1, f"{case}: {len(lines)} lines on stderr:\n{err[-1200:]}"
    assert "Traceback" not in err
    assert _tree(inputs) == before_inputs and _tree(workdir) == before_work, f"{case}: wrote files"
    assert Path("/dev/full").is_char_device()


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_full_disk_while_writing_is_one_line_and_leaves_nothing(tmp_path, harness_cli) -> None:
    """A file-size limit stands in for a full disk: the write fails with EFBIG part-way."""
    out = tmp_path / "new.yaml"
    child = harness_cli.run(["protocol", "new", "--fixed", "--n", "500", "-o", str(out)], cwd=REPO,
                            capture_output=True, text=True, rlimits={resource.RLIMIT_FSIZE: (2000, 2000)}, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.returncode == 2, child.stderr
    lines = child.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "Traceback" not in child.stderr
    assert list(tmp_path.iterdir()) == [], "no half-written file, no temporary left behind"
