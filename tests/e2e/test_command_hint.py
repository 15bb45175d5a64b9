"""Hints name the `harness` command as the user's shell finds it: `.venv/bin/harness` where the venv is not
activated, `harness` where it is (issue 60: a hint said `harness report ...` to a user without it on PATH)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.command import harness_command

BIN = Path(sys.executable).parent


@pytest.fixture
def installed() -> Path:
    script = BIN / "harness"
    if not script.is_file():
        pytest.skip("this interpreter has no harness console script beside it (not the project's venv)")
    return script


def test_an_activated_venv_gets_the_plain_name(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(BIN))
    assert harness_command() == "harness"


def test_without_harness_on_the_path_the_hint_is_the_path_that_works(installed: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))   # nothing called harness here
    monkeypatch.chdir(BIN.parent.parent)         # the project folder holding .venv
    assert harness_command() == f"{BIN.parent.name}/{BIN.name}/harness"
    monkeypatch.chdir(tmp_path)                  # elsewhere: the whole path
    hint = harness_command()
    assert Path(hint) == installed
    done = subprocess.run([hint, "report", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--model-card" in done.stdout
