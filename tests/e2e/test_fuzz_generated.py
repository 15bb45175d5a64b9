"""Every flag of every subcommand, generated from `harness.cli`'s own parsers, tried with bad values.

Walking the parsers (not a hand-kept list) means a flag or subcommand added tomorrow is fuzzed
tomorrow. Each flag gets empty, garbage (undecodable bytes as argv delivers them), NaN, negative,
huge, too-long and wrong-type values. Whatever the value, the command must end with exit 0 (the
value was fine) or exit 2 with exactly one line on stderr, never a traceback, and a refusal must
leave the input and working folders byte-identical. Commands run in-process through
`harness.cli.main` (a Python start-up per case would cost minutes); each case has an alarm, so a
value that makes a command wait forever fails instead of hanging CI.

Each command starts from a base argument list: a cheap valid one where a valid run is quick
(`plan`, `protocol`, `report`, `dataset validate/split`), otherwise one that is refused late (a
missing input), so the fuzzed flag's own checks run first. A full disk (a file-size limit, which
needs its own process) is simulated for every command that writes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import resource
import shlex
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
CASE_LIMIT_S = 60

# Bases: {d} the inputs folder, {w} the working folder. A command missing here gets a generated base
# (positionals and required flags given a missing file or the number 1), refused late.
BASES = {
    "protocol new": "protocol new --fixed --n 2 -o {w}/new.yaml",
    "protocol check": "protocol check {d}/small.yaml",
    "report": "report {d}/sheet.yaml",
    "plan": "plan --p0 0.9 --delta -0.2",
    "measure": "measure {d}/garbage.bin --bowl-cm 11.5 --auto",
    "dataset validate": "dataset validate {d}/nodataset",
    "dataset coverage": "dataset coverage {d}/nodataset",
    "dataset split": "dataset split {d}/nodataset",
    "run": "run {d}/missing.yaml --headless --policy expert",
    "collect": "collect {d}/missing.yaml --policy expert --episodes 1",
    "emulate-bus": "emulate-bus --scenario {d}/missing.yaml",
    "fix-ids": "fix-ids --port {d}/missing-port",
    "sweep": "sweep {d}/missing-sweep.yaml",
}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every leaf subcommand, by its words ("dataset validate")."""
    found: dict[str, argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {" ".join(path): parser}
    for name, child in subs[0].choices.items():
        found.update(_commands(child, (*path, name)))
    return found


def _values(action: argparse.Action) -> dict[str, str]:
    """The bad values a flag is tried with; a flag that takes no value is tried once, present."""
    if action.nargs == 0:
        return {"present": ""}
    if action.choices:
        return {"empty": "", "not a choice": "bogus"}
    numeric = action.type in (int, float)
    return {"empty": "", "garbage": "\udcff\udcfe#;{[", "nan": "nan", "negative": "-5",
            "huge": "99999999999999999999" if action.type is int else "1e308", "too long": "x" * 5000,
            "wrong type": "abc" if numeric else "{d}/afolder"}


def _base(name: str, parser: argparse.ArgumentParser) -> list[str]:
    if name in BASES:
        return shlex.split(BASES[name])
    argv = name.split()
    for action in parser._actions:
        if action.option_strings and action.required:
            argv += [action.option_strings[-1], "1" if action.type in (int, float) else "{d}/missing"]
        elif not action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
            argv.append("{d}/missing")
    return argv


def _with(base: list[str], flag: str, value: str | None) -> list[str]:
    """The base with `flag` set to `value` (its own value for it, if any, taken out); `--flag=value`, so an
    empty value or one that starts with a dash is still the flag's value."""
    argv = list(base)
    if flag in argv:
        at = argv.index(flag)
        del argv[at:at + (1 if value is None else 2)]
    return [*argv, flag] if value is None else [*argv, f"{flag}={value}"]


def cases() -> dict[str, tuple[list[str], str]]:
    generated: dict[str, tuple[list[str], str]] = {}
    for name, parser in sorted(_commands(build_parser()).items()):
        base = _base(name, parser)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = action.option_strings[-1] if action.option_strings else None
            for kind, value in _values(action).items():
                if flag is None:   # a positional: the first one of the base is replaced
                    at = next(i for i, word in enumerate(base) if i >= len(name.split()) and not word.startswith("-"))
                    argv = [*base[:at], value, *base[at + 1:]] if value else None
                    if argv is None:
                        continue
                else:
                    argv = _with(base, flag, None if action.nargs == 0 else value)
                generated[f"{name} {flag or action.dest} {kind}"] = (argv, name)
    return generated


CASES = cases()


def _snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder` with its bytes' digest (folders and links as such): byte-identical or not."""
    state: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            state[key] = "link:" + os.readlink(path)
        elif path.is_dir():
            state[key] = "dir"
        else:
            state[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _make_inputs(folder: Path) -> None:
    rng = np.random.default_rng(0)
    (folder / "garbage.bin").write_bytes(b"\x00\xff" + rng.bytes(2048))
    (folder / "afolder").mkdir()
    Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(folder / "frame.png")
    from tests.helpers import fake_attempt, locked_sheet

    locked_sheet(folder).add_attempt(fake_attempt(1, 1, "success"))   # small.yaml and sheet.yaml


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz-inputs")
    _make_inputs(folder)
    return folder


class CaseTimeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_LIMIT_S)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exit_:   # argparse's own refusals
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, err.getvalue()


def test_every_subcommand_and_flag_is_covered() -> None:
    commands = _commands(build_parser())
    assert {"run", "report", "plan", "protocol new", "dataset coverage", "collect", "sweep"} <= set(commands)
    for name, parser in commands.items():
        flags = [a.option_strings[-1] for a in parser._actions if a.option_strings and a.nargs != 0
                 and not isinstance(a, argparse._HelpAction)]
        assert all(any(case.startswith(f"{name} {flag} ") for case in CASES) for flag in flags), name


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_value_is_refused_in_one_line_or_accepted(case: str, inputs: Path, workdir: Path) -> None:
    template, _ = CASES[case]
    argv = [word.replace("{d}", str(inputs)).replace("{w}", str(workdir)) for word in template]
    before = _snapshot(inputs), _snapshot(workdir)
    code, err = _run(argv)
    lines = err.strip().splitlines()
    assert "Traceback" not in err, f"{case}: {err[-1500:]}"
    assert code in (0, 2), f"{case}: exit {code}, stderr: {err[-800:]}"
    if code == 2:
        assert len(lines) == 1, f"{case}: {len(lines)} lines on stderr:\n{err[-1500:]}"
        assert (_snapshot(inputs), _snapshot(workdir)) == before, f"{case}: a refusal changed the folders"


# Commands that write, each with what it writes into {w}; the file-size limit stands in for a full disk.
WRITERS = {
    "protocol new": "protocol new --fixed --n 500 -o {w}/new.yaml",
    "report html": "report {d}/sheet.yaml -o {w}/report.html",
    "report markdown": "report {d}/sheet.yaml --md {w}/report.md",
    "measure": "measure {d}/frame.png --bowl-cm 11.5 --clicks '40,60 120,60' --calibration {w}/cal/bowl.yaml",
    "run": "run {d}/small.yaml --headless --policy expert --no-video --max-trials 1 "
           "--scoresheet {w}/scoresheets/s.yaml --runs-dir {w}/runs",
}


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing(writer: str, inputs: Path, tmp_path: Path,
                                                                     harness_cli) -> None:
    work = tmp_path / "w"
    work.mkdir()
    argv = shlex.split(WRITERS[writer].format(d=inputs, w=work))
    before = _snapshot(inputs), _snapshot(work)

    child = harness_cli.run(argv, cwd=work, capture_output=True, text=True, timeout=300,
                            rlimits={resource.RLIMIT_FSIZE: (1024, resource.RLIM_INFINITY)},
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [line for line in child.stderr.strip().splitlines() if line.startswith("harness")]
    assert child.returncode == 2, f"{writer}: exit {child.returncode}: {child.stderr[-1500:]}"
    assert "Traceback" not in child.stderr and len(lines) == 1, child.stderr[-1500:]
    assert str(work) in lines[0] or "w/" in lines[0], f"{writer}: the line names no file: {lines[0]}"
    assert (_snapshot(inputs), _snapshot(work)) == before, f"{writer}: left files behind"
