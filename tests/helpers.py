"""Builders shared by tests: a locked scoresheet over the small protocol, fake attempts; `wait_until`."""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.models.protocol import load_protocol
from harness.models.scoresheet import Scoresheet, build_locked, lock_scoresheet
from harness.models.sheet_records import Attempt, attempt_from_label
from harness.models.taxonomy import Label
from harness.models.verdict import JudgeVerdict

REPO = Path(__file__).resolve().parents[1]


def wait_until[T](condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.01) -> T:
    """The first truthy value of `condition`, asked until `timeout_s` has passed; then an AssertionError
    naming `what`. The suite's one polling loop (tests/system/test_suite_rules.py allows its sleep): a test
    waits on the condition it needs, never for a guessed time."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(poll_s)
    return value


async def press_keys(pilot: Any, *keys: str) -> None:
    """`keys` (Textual's key names) queued as a terminal sends them, then one wait for the screen to take them.
    `Pilot.press` waits after every key until the process is idle (up to a second, twice); a test process that
    also runs the emulated arm and its camera is never idle, so each key cost two seconds. Tests wait for what
    the key should bring about (a screen, a phase), as they do after `Pilot.press`."""
    from textual import events

    for key in keys:
        pilot.app.post_message(events.Key(key, " " if key == "space" else key if len(key) == 1 else None))
    await pilot.pause(0)


async def type_text(pilot: Any, text: str) -> None:
    """`text` typed into the focused widget (see `press_keys`)."""
    await press_keys(pilot, *("space" if char == " " else char for char in text))


def replace_once(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced, which must be there exactly once: a builder whose file changed shape fails
    here, loudly, instead of silently building the unedited file."""
    found = text.count(old)
    if found != 1:
        raise AssertionError(f"expected {old!r} exactly once, found it {found} times: the file changed shape")
    return text.replace(old, new)


def short_protocol_copy(folder: Path, seconds: float | None = None, trials: int | None = None,
                        **fields: Any) -> Path:
    """The small protocol in `folder`, its episodes `seconds` long, its first `trials` trials, other top-level
    fields replaced: edited as YAML, each field required to exist already (a renamed field fails here)."""
    import yaml

    path = small_protocol_copy(folder)
    data = yaml.safe_load(path.read_text())
    changes = {**fields, **({"episode_time_limit_s": seconds} if seconds is not None else {})}
    missing = sorted(set(changes) - set(data))
    if missing:
        raise AssertionError(f"tests/data/small.yaml has no {missing}: the file changed shape")
    data.update(changes)
    if trials is not None:
        if len(data["trials"]) < trials:
            raise AssertionError(f"tests/data/small.yaml has {len(data['trials'])} trials, not {trials}")
        data["trials"] = data["trials"][:trials]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def small_protocol_copy(folder: Path) -> Path:
    path = folder / "small.yaml"
    path.write_text((REPO / "tests" / "data" / "small.yaml").read_text())
    return path


def locked_sheet(folder: Path, policy: str = "expert") -> Scoresheet:
    protocol_path = small_protocol_copy(folder)
    protocol = load_protocol(protocol_path)
    locked = build_locked(protocol, protocol_path, policy, "sim")
    return lock_scoresheet(folder / "sheet.yaml", locked, {"cameras": {}})


def fake_attempt(trial: int, attempt: int, label: str, **extra) -> Attempt:
    fields = {"trial_index": trial, "attempt": attempt, "started_at": "2026-11-30T10:00:00.000+00:00",
              "ended_at": "2026-11-30T10:00:07.000+00:00", "duration_s": 7.0, **extra}
    return attempt_from_label(label, **fields)


def judge_verdict(label: Label = Label.SUCCESS, **fields: Any) -> JudgeVerdict:
    """A judge's verdict as the simulator's judge writes one (true state: the cube settled in the bowl)."""
    values: dict[str, Any] = {
        "label": label, "detail": "settled inside", "true_placement_error_cm": 1.2, "cube_inside_bowl": True,
        "clean_release": True, "grasped": True, "lifted": True, "max_lift_cm": 6.5,
        "events": [{"event": "grasp", "t": 1.1, "cube": [0.2, -0.05, 0.015]}],
        "thresholds": {"grasp_hold_s": 0.25}, **fields}
    return JudgeVerdict.model_validate(values)


def stress_lens(frame: Any) -> Any:
    """The lens a rendered stress frame (`sim.stress_set.StressFrame`) was drawn with, as measurement takes it."""
    from harness.vision.camera import CameraIntrinsics

    m = frame.camera_matrix
    return CameraIntrinsics(640, 480, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(frame.distortion))


def measured_both_ways(seed: int, index: int) -> tuple[Any, Any, Any]:
    """Frame `index` of seed `seed`'s CAMERAS stress set (`stress_set.StressFrame`), and what `measure_image` makes of
    it with its lens calibration and with the focal length only (two `FrameResult`s): how the tuning saw it."""
    from harness.vision.camera import CameraIntrinsics
    from harness.vision.measure import Geometry, measure_image
    from tests.generators.stress_set import Distribution, stress_frame

    f = stress_frame(seed, index, Distribution.CAMERAS)
    k = f.camera_matrix
    lens = CameraIntrinsics(*f.look.size, k[0, 0], k[1, 1], k[0, 2], k[1, 2], tuple(f.distortion))
    return f, measure_image(f.frame, Geometry(), lens), measure_image(f.frame, Geometry(focal_px=float(k[1, 1])))


def folder_state(folder: Path) -> dict[str, str]:
    """Every file below `folder` by its hash (folders as "dir"): equal states mean nothing was written."""
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


def refused(argv: list[str], folder: Path, capsys: Any) -> str:
    """Run `harness argv`; assert it exits 2 with one line on stderr and leaves `folder` byte-identical; return
    the line."""
    from harness.cli import main

    capsys.readouterr()
    before = folder_state(folder)
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, (code, err)
    assert folder_state(folder) == before
    return err[0]


def two_sim_trials(protocol: Path, policy: Path, work: Path, name: str, parts: Any) -> tuple[list, list]:
    """`harness run` of a policy's first two trials on the simulated arm (`parts`: substituted factories, or
    None): each attempt's (trial, outcome, judge) and each trial's posed arm trajectory, for runs that must
    come out identical."""
    import numpy as np

    from harness.app.run_command import run_from_args
    from harness.cli import build_parser
    from harness.models.scoresheet import load_scoresheet

    args = build_parser().parse_args(
        ["run", str(protocol), "--policy", str(policy), "--headless", "--no-video", "--device", "cpu",
         "--scoresheet", str(work / f"{name}.yaml"), "--runs-dir", str(work / "runs"), "--max-trials", "2"])
    assert run_from_args(args, parts) == 0
    sheet = load_scoresheet(work / f"{name}.yaml")
    states = []
    for path in sorted((work / "runs" / name).glob("trial-*/sim_state.npz")):
        with np.load(path) as npz:
            states.append(npz["posed_qpos"].copy())
    return [(a.trial_index, a.outcome, a.judge.model_dump() if a.judge else None) for a in sheet.attempts], states


@functools.cache
def _parsed(source: str, filename: str) -> ast.Module:
    return ast.parse(source, filename)


def parsed_python(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once a run (keyed on its text, so a sample a test writes is parsed as
    written): the architecture checks and the suite rules read the same files test after test."""
    return _parsed(path.read_text(encoding="utf-8"), str(path))


@contextlib.contextmanager
def small_filesystem(folder: Path, size_kib: int) -> Iterator[Callable[[int], None]]:
    """A tmpfs of `size_kib` mounted at `folder` (a full disk a test can make), or a skip saying why this machine
    mounts none (not root, no CAP_SYS_ADMIN, not Linux); yields a function that grows it. Unmounted after."""
    import subprocess

    import pytest

    folder.mkdir()
    try:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): {made.stderr.strip()}")

    def grow(kib: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={kib}k", str(folder)], check=True, timeout=30)

    try:
        yield grow
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)
