"""YAML from users, loaded with limits: size, nesting depth, and how far aliases may expand.

PyYAML's safe loader already refuses arbitrary objects, but a few hundred bytes of nested
aliases ("billion laughs") expand to billions of nodes in whatever walks the result, and a
deeply nested document exhausts the recursion of the composer. One streaming pass over the
parser's events (libyaml's C parser when present) measures both before anything is built, so a
hostile file costs a few milliseconds and one line of refusal instead of minutes and a
MemoryError. Before that, `read_limited` is how a user's file is read at all (protocols, scoresheets,
sweeps, images): only a regular file, no larger than its limit, both told from the open descriptor before a
byte is read, so /dev/zero or a named pipe is one line too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessInputError

Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 2_000_000
MAX_DEPTH = 64


def _where(exc: yaml.YAMLError) -> str | None:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}" if mark is not None else None


def _check_events(text: str, source: str | Path, max_nodes: int, max_depth: int) -> None:
    """Count the nodes the document would have once aliases are expanded, and its depth."""
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []   # [nodes so far, anchor] per open collection
    total = 0

    def add(count: int) -> None:
        nonlocal total
        if stack:
            stack[-1][0] += count
            if stack[-1][0] > max_nodes:
                raise HarnessInputError(source, None, f"aliases expand to more than {max_nodes:,} nodes")
        else:
            total += count

    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([0, event.anchor])
            if len(stack) > max_depth:
                where = f"line {event.start_mark.line + 1}" if event.start_mark else None
                raise HarnessInputError(source, where, f"nested more than {max_depth} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            count, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = count + 1
            add(count + 1)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1)
        elif isinstance(event, yaml.AliasEvent):
            add(sizes.get(event.anchor, 1))
        if total > max_nodes:
            raise HarnessInputError(source, None, f"aliases expand to more than {max_nodes:,} nodes")


def load_yaml_text(text: str, source: str | Path, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """Parse YAML text after checking alias expansion and depth; errors name the source and line."""
    if "\x00" in text:
        raise HarnessInputError(source, None, "binary data, not a YAML text file")
    try:
        _check_events(text, source, max_nodes, max_depth)
        return yaml.load(text, Loader=Loader)  # the safe loader (C when available)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or exc
        raise HarnessInputError(source, _where(exc), f"malformed YAML: {problem}") from None
    except RecursionError:
        raise HarnessInputError(source, None, f"nested more than {max_depth} levels deep") from None


def decode_text(raw: bytes, source: str | Path) -> str:
    """UTF-8 text or one line saying the file is not text."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessInputError(source, None, f"not UTF-8 text (binary data at byte {exc.start})") from None


def size_text(size: int) -> str:
    """A byte count as people read it (a limit in a refusal): 16 MiB, 256 KiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def read_limited(path: str | Path, max_bytes: int = MAX_BYTES, what: str = "file") -> bytes:
    """A user's file's bytes, refusing folders, special files, unreadable files and anything larger than
    `max_bytes`, each in one line naming the file as a `what` (a scoresheet, a protocol).

    Why before a byte is read: a device such as /dev/zero never ends (a read of it took a machine to its
    out-of-memory kill) and a named pipe waits for a writer that may never come, so the file is opened without
    waiting (O_NONBLOCK: a pipe opens at once) and what it is, and its size, come from the open descriptor.
    """
    path = Path(path)
    a_what = f"{'an' if what[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {what}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except IsADirectoryError:
        raise HarnessInputError(path, None, f"is a folder, not {a_what}") from None
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        found = os.fstat(fd)
        if stat.S_ISDIR(found.st_mode):
            raise HarnessInputError(path, None, f"is a folder, not {a_what}")
        if not stat.S_ISREG(found.st_mode):
            raise HarnessInputError(path, None, f"is {_kind(found.st_mode)}, not {a_what} (a regular file)")
        if found.st_size > max_bytes:
            raise HarnessInputError(path, None, f"larger than the {size_text(max_bytes)} limit for {a_what}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:   # grown since it was measured
        raise HarnessInputError(path, None, f"larger than the {size_text(max_bytes)} limit for {a_what}")
    return raw


def load_yaml_file(path: str | Path, *, max_bytes: int = MAX_BYTES, max_nodes: int = MAX_NODES) -> Any:
    """Read and parse a user's YAML file with every limit applied."""
    return load_yaml_text(decode_text(read_limited(path, max_bytes), path), path, max_nodes=max_nodes)
