"""Atomic writes on both platform branches: POSIX fsyncs the folder, Windows must not open it."""

from __future__ import annotations

import os

import pytest

from harness.storage.atomic import fsync_folder, write_text_atomic


def test_posix_branch_fsyncs_the_folder(tmp_path) -> None:
    if os.name == "nt":
        pytest.skip("a folder cannot be opened for fsync on Windows")
    assert fsync_folder(tmp_path, platform="posix") is True


def test_windows_branch_never_opens_the_folder(tmp_path) -> None:
    """On Windows `os.open` of a folder raises; the 'nt' branch must skip it (and say so)."""
    missing = tmp_path / "not-there"   # opening this would raise on any platform
    assert fsync_folder(missing, platform="nt") is False
    with pytest.raises(FileNotFoundError):
        fsync_folder(missing, platform="posix")


def test_an_atomic_write_replaces_the_file_and_leaves_no_temp(tmp_path) -> None:
    target = tmp_path / "sheet.yaml"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["sheet.yaml"]
