from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_protocol_text() -> str:
    return (REPO / "tests" / "data" / "small.yaml").read_text()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch project folder: commands write scoresheets/ and runs/ relative to it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "protocols").mkdir()
    return tmp_path
