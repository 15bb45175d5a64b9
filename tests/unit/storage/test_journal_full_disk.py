"""A new scoresheet that cannot be written (a full disk, a file-size limit) leaves nothing behind: not its witness,
written first, and not the folders made for it. An existing sheet's folder is never removed."""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import HarnessInputError
from harness.storage import journal

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")

HEADER = {"format": 2, "locked": {"task": "x" * 4000}, "lock": {"at": "now"}}   # a body past the 1 KiB limit


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Files this process writes stop at `limit` bytes (Python ignores SIGXFSZ: the write fails with EFBIG)."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, before)


def test_a_new_sheet_that_cannot_be_written_leaves_no_witness_and_no_folder(tmp_path: Path) -> None:
    sheet = tmp_path / "scoresheets" / "runs" / "s.yaml"
    with file_size_limit(1024), pytest.raises(HarnessInputError, match="File too large"):
        journal.write_all(sheet, HEADER, [])
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_was_there_stays_and_so_do_its_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    sheet = tmp_path / "s.yaml"
    with file_size_limit(1024), pytest.raises(HarnessInputError):
        journal.write_all(sheet, HEADER, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    journal.write_all(sheet, HEADER, [])   # with room, the same call writes the sheet and its witness
    assert sheet.exists() and journal.witness_path(sheet).exists()
