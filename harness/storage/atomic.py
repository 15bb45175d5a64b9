"""Durable file replacement: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from harness.errors import HarnessInputError


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write text via a temp file in the same folder, fsync it, rename over, fsync the folder."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes, durable: bool = True) -> None:
    """Write via a temp file in the same folder, fsync it, rename over, fsync the folder.

    The folder fsync makes the rename itself survive a power cut, not just the bytes;
    `durable=False` skips both fsyncs for derived files (annotated images) that a kill must not
    leave half-written but a power cut may lose. Only a
    regular file (or a new name) is ever replaced: renaming over a device node such as
    /dev/full, a folder or a pipe would destroy something that is not ours, so that is refused
    before anything is written.
    """
    path = Path(path)
    check_output_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot write here: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, file_mode(path))   # mkstemp's 0600 would make every report and sheet private
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise HarnessInputError(path, None, f"cannot write: {exc.strerror or exc}; nothing was changed") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    if durable:
        fsync_folder(path.parent)


def file_mode(path: Path) -> int:
    """The mode a written file gets: an existing file's own, else what `open()` would give a new one (0666 less
    the process's umask), as any other program's output."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it where the OS says (Linux: /proc/self/status), else set and
    restored at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_folder(folder: str | Path, platform: str = os.name) -> bool:
    """Make a rename in `folder` durable; returns whether a folder fsync was needed and done.

    POSIX needs the folder itself fsync'd. Windows cannot open a folder as a file (`os.open` on a
    directory fails there) and does not need to: NTFS journals the rename. `platform` is
    `os.name`, passed in so both branches run in tests on any machine.
    """
    if platform == "nt":
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def check_output_path(path: str | Path) -> None:
    """Refuse an output path that exists and is not a regular file, or whose folder is a file."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise HarnessInputError(path, None, "is a broken symbolic link, not a file to write")
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file (a device, pipe or socket)"
        raise HarnessInputError(path, None, f"is {kind}; give a file name to write")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise HarnessInputError(path, None, f"{parent} is a file, not a folder")
            break
