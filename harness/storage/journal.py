"""A scoresheet's bytes on disk (format 2): a YAML header, an append-only tail, a chain witness.

    format: harness.scoresheet/2
    locked: ...            # written once, when the sheet is locked
    lock: ...
    settings: ...
    records:
    - {"attempt":{...},"chain_sha256":"..."}       # one JSON line per record, appended
    - {"measurement":{...},"chain_sha256":"..."}

Every record line is JSON (a YAML flow mapping, so the file stays one readable YAML
document), appended with one write and one fsync: recording a trial costs the same at the
5,000th attempt as at the first, where rewriting the whole file cost 22 s or more. The header's
values are JSON too, so loading never runs YAML's (Python) constructor; a sheet laid out any
other way (reformatted by a YAML tool, or format 1) is read by the C YAML loader instead. Each
record is written in its canonical JSON form, so the chain link
`sha256({"prev": previous, "record": record})` is checked over the bytes as they lie on disk,
without encoding the record again.

`<sheet>.chain`, the witness, gets one line per record (`kind count chain_sha256`) after the
record itself is durable. It anchors how many records exist and the head of each chain outside
the YAML, so deleting the last attempts from the YAML by hand (which leaves a valid, shorter
chain) is caught: the witness names records the file no longer has. Order makes this safe
under crashes and concurrent readers: the writer makes its records durable before their witness
lines, and a reader reads the witness before the sheet, so a reader may see records the witness
does not name yet (a writer killed in between, or one appending while it read), never the reverse.
More than that (records of two appends unwitnessed, an emptied witness, a line that is not a witness
line) is not a kill: it is refused, and only `harness sheet repair-chain` rebuilds the witness, which
it records. After the witness line, the append writes its line in the sheet's progress witness in the
user's state folder (`harness.storage.progress`), which a restored copy of both files cannot match.

A line cut short by a kill mid-append was never acknowledged (its fsync had not returned and
its witness line does not exist); readers skip it and the next append, under the writer lock,
cuts it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError, StaleRunError
from harness.storage import progress
from harness.storage.atomic import fsync_folder, write_bytes_atomic
from harness.storage.safe_yaml import decode_text, load_yaml_text, read_limited

log = logging.getLogger(__name__)

FORMAT = "harness.scoresheet/2"
FORMAT_NUMBER = 2   # what `locked.journal.format` and the progress witness's `format` line say of FORMAT
FORMAT_V1 = "harness.scoresheet/1"
KINDS: tuple[str, ...] = ("attempt", "measurement", "unblinding")   # unblinding: a comparison revealed early
MARKER = b"\nrecords:\n"
MAX_HEADER_BYTES = 32 * 1024 * 1024
MAX_SHEET_BYTES = 2 * 1024 * 1024 * 1024
MAX_NODES = 20_000_000


def witness_path(path: Path) -> Path:
    """The witness beside the real file: a sheet opened through a symlink has the same one."""
    real = Path(path)
    if real.is_symlink():
        real = real.resolve()
    return Path(f"{real}.chain")


def canonical_bytes(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def record_line(kind: str, record: dict[str, Any]) -> bytes:
    body = canonical_bytes({k: v for k, v in record.items() if k != "chain_sha256"})
    return b'- {"' + kind.encode() + b'":' + body + b',"chain_sha256":"' + record["chain_sha256"].encode() + b'"}\n'


def link_sha256(previous: str, body: bytes) -> str:
    """The chain link over a record's canonical bytes: equal to sha256 of the canonical JSON of
    {"prev": previous, "record": record}, the definition format 1 used."""
    return hashlib.sha256(b'{"prev":"' + previous.encode() + b'","record":' + body + b"}").hexdigest()


def witness_line(kind: str, count: int, chain: str) -> bytes:
    return f"{kind} {count} {chain}\n".encode()


@dataclass
class Contents:
    """What a read found, and where the next append goes."""

    format: str
    header: dict[str, Any]
    records: list[tuple[str, dict[str, Any]]]   # kind, record with its chain_sha256
    canonical: bool            # the records are the one-JSON-line form written here (not reformatted)
    size: int = 0              # bytes of the sheet when read: an append refuses if it changed
    end: int = 0               # just after the last complete record (less than size after a torn append)
    witness_size: int = 0
    witness_end: int = 0
    witnessed: int = 0         # records the witness names
    backlog: list[bytes] = field(default_factory=list)   # witness lines still to write (killed writer)
    needs_newline: bool = False   # the last record line lost only its newline
    bodies: list[bytes | None] = field(default_factory=list)   # each record's canonical bytes, as on disk
    warnings: list[str] = field(default_factory=list)   # what a reader should be told (a torn tail)
    progress_key: str = ""     # the sheet's progress witness in the user's state folder (harness.storage.progress)
    progress_backlog: list[bytes] = field(default_factory=list)   # its lines still to write
    progress_seen: int = 0     # records it names


def _split_header(raw: bytes, path: Path) -> tuple[str, int | None]:
    """The header text and the offset where the record lines start (None: no records section found)."""
    at = raw.find(MARKER, 0, MAX_HEADER_BYTES + len(MARKER))
    if at < 0:
        if len(raw) > MAX_HEADER_BYTES and not raw.startswith(b"format: " + FORMAT_V1.encode()):
            raise HarnessInputError(path, None, "not a scoresheet (no records section in the first 32 MiB)")
        return decode_text(raw, path), None
    return decode_text(raw[: at + 1], path), at + len(MARKER)


_TAIL = len(b',"chain_sha256":"') + 64 + len(b'"}')


def _parse_line(line: bytes) -> tuple[str, dict[str, Any], bytes] | None:
    """A record line as `record_line` writes it: kind, record, and the record's canonical bytes."""
    if not line.startswith(b'- {"'):
        return None
    try:
        value = json.loads(line[2:])
    except ValueError:
        return None
    if not isinstance(value, dict) or len(value) != 2 or not isinstance(value.get("chain_sha256"), str):
        return None
    kind = next((k for k in value if k != "chain_sha256"), None)
    if kind not in KINDS or not isinstance(value[kind], dict):
        return None
    start = len(b'- {"') + len(kind) + len(b'":')
    if (line[start - len(kind) - 2:start - 2].decode() != kind or len(line) < start + _TAIL
            or not line[len(line) - _TAIL:].startswith(b',"chain_sha256":"')):
        return None
    record = dict(value[kind], chain_sha256=value["chain_sha256"])
    return kind, record, line[start:len(line) - _TAIL]


def _records_from_yaml(data: Any, path: Path) -> list[tuple[str, dict[str, Any]]]:
    raw = data.get("records") or []
    if not isinstance(raw, list):
        raise HarnessInputError(path, "records", "not a list")
    records = []
    for position, item in enumerate(raw):
        kinds = [k for k in item if k in KINDS] if isinstance(item, dict) else []
        if len(kinds) != 1 or not isinstance(item[kinds[0]], dict) or set(item) - {kinds[0], "chain_sha256"}:
            raise HarnessInputError(path, f"records[{position}]", "not an attempt or a measurement")
        records.append((kinds[0], dict(item[kinds[0]], chain_sha256=item.get("chain_sha256"))))
    return records


def _read_bytes(path: Path) -> bytes:
    return read_limited(path, MAX_SHEET_BYTES, what="scoresheet")   # a folder, /dev/zero or a pipe: one line


def read(path: Path, *, repair: bool = False) -> Contents:
    """Parse a sheet of format 1 or 2 and check it against its witnesses (its `.chain`, and its progress
    witness in the user's state folder); chains are checked by the caller. A damaged `.chain`, or records
    neither witness saw, are refused unless `repair` (`harness sheet repair-chain`, which rebuilds it)."""
    for _ in range(3):
        contents = _read(path, repair)
        found = progress.read(contents.progress_key)
        if found is None or len(found.entries) <= len(contents.records):
            break
        try:   # it names more: a writer appended after this read of the sheet (read again), or a rollback
            if path.stat().st_size == contents.size:
                break
        except OSError:
            break
    return _progressed(contents, found, path, repair)


def _progressed(contents: Contents, found: progress.Progress | None, path: Path, repair: bool) -> Contents:
    """Check the records against the progress witness (none on this machine: nothing to check, and the next
    append writes it from the sheet); a format-1 sheet it knows was written in format 2 is refused."""
    if found is None:
        contents.progress_backlog = progress.lines_for(_chains(contents), 0)
        return contents
    if contents.format == FORMAT_V1:
        raise StaleRunError(path, "format", f"{FORMAT_V1}, but the progress witness {found.path} shows it was "
                                            f"written in format {found.format or 2}: a downgraded copy is refused")
    seen = contents.progress_seen = progress.check(found, _chains(contents), path, one_append, lagging_ok=repair)
    contents.progress_backlog = progress.lines_for(_chains(contents), seen)
    return contents


def _chains(contents: Contents) -> list[tuple[str, str]]:
    return [(kind, str(record.get("chain_sha256"))) for kind, record in contents.records]


def _read(path: Path, repair: bool) -> Contents:
    """One read of the sheet and its `.chain`, in that order (see the module doc)."""
    witness = witness_path(path)
    # before the sheet: see the module doc; limited as the sheet is (a chain line is shorter than its record), so a
    # `.chain` made huge or turned into a device is one line rather than memory exhausted
    witness_raw = read_limited(witness, MAX_SHEET_BYTES, what="scoresheet chain") if witness.is_file() else None
    raw = _read_bytes(path)
    if b"harness.scoresheet/" not in raw[:65536]:   # garbage is refused before any parsing
        raise HarnessInputError(path, "format", f"not a {FORMAT} scoresheet")
    header_text, records_at = _split_header(raw, path)
    if records_at is None:   # format 1, or a format-2 file rewritten by a YAML tool
        data = load_yaml_text(header_text, path, max_nodes=MAX_NODES)
        _check_format(data, path)
        if data["format"] == FORMAT_V1:
            v1 = [("attempt", a) for a in data.get("attempts") or []]
            v1 += [("measurement", m) for m in data.get("measurements") or []]
            return _format_1(Contents(FORMAT_V1, data, v1, canonical=False, size=len(raw), end=len(raw)),
                             witness_raw, path)
        contents = Contents(FORMAT, data, _records_from_yaml(data, path), canonical=False, size=len(raw), end=len(raw))
        return _witnessed(contents, witness_raw, path, repair)
    header = _header_from_json(header_text)
    if header is None:
        header = load_yaml_text(header_text, path, max_nodes=MAX_NODES)
    _check_format(header, path)
    if header["format"] != FORMAT:
        raise HarnessInputError(path, "format", f"a {header['format']} sheet cannot have a records section")
    records: list[tuple[str, dict[str, Any]]] = []
    bodies: list[bytes | None] = []
    offset = records_at
    canonical = True
    torn: str | None = None
    while offset < len(raw):
        newline = raw.find(b"\n", offset)
        line = raw[offset:] if newline < 0 else raw[offset:newline]
        parsed = _parse_line(line)
        if parsed is None:
            if newline < 0:   # a torn final line: never acknowledged, skipped, and said so
                torn = (f"{path}: the last {len(raw) - offset} bytes (from byte {offset}) are not a complete record "
                        "and are ignored; the next append overwrites them")
                break
            canonical = False
            break
        records.append(parsed[:2])
        bodies.append(parsed[2])
        offset = len(raw) if newline < 0 else newline + 1
    needs_newline = bool(records) and offset == len(raw) and not raw.endswith(b"\n")
    if not canonical:
        data = load_yaml_text(decode_text(raw, path), path, max_nodes=MAX_NODES)
        _check_format(data, path)
        contents = Contents(FORMAT, data, _records_from_yaml(data, path), canonical=False, size=len(raw), end=len(raw))
    else:
        contents = Contents(FORMAT, header, records, canonical=True, size=len(raw), end=offset,
                            needs_newline=needs_newline, bodies=bodies)
        if torn:
            log.warning("%s", torn)
            contents.warnings.append(torn)
    return _witnessed(contents, witness_raw, path, repair)


def _check_format(data: Any, path: Path) -> None:
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, FORMAT_V1):
        raise HarnessInputError(path, "format", f"not a {FORMAT} scoresheet")
    for key in ("locked", "lock"):
        if not isinstance(data.get(key), dict):
            raise HarnessInputError(path, key, "missing or not a mapping")


def locked_format(locked: dict[str, Any]) -> int:
    """The journal format the sheet's lock names (`locked.journal`, hashed with the lock); 1 for a sheet
    locked before the lock named it, which may have been written in either format."""
    journal = locked.get("journal")
    value = journal.get("format") if isinstance(journal, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _format_1(contents: Contents, witness_raw: bytes | None, path: Path) -> Contents:
    """A format-1 sheet is read only when nothing says it was ever format 2: its lock does not, and a `.chain`
    beside it (written only since format 2) names exactly its records, or one more (a conversion killed
    between writing the new `.chain` and the new sheet). The progress witness is checked by the caller."""
    contents.progress_key = progress.key(contents.header["locked"], contents.header["lock"])
    if locked_format(contents.header["locked"]) >= 2:
        raise StaleRunError(path, "format", f"{FORMAT_V1}, but its lock says it was written in format "
                                            f"{locked_format(contents.header['locked'])}: a downgraded copy is refused")
    if witness_raw is None:
        return contents
    lines = witness_raw.decode("ascii", errors="replace").splitlines()
    chains = [str(record.get("chain_sha256")) for _, record in contents.records]
    named = [line.split(" ")[-1] for line in lines]
    if named[: len(chains)] != chains or len(named) > len(chains) + 1:
        raise StaleRunError(path, "format", f"{FORMAT_V1}, but {witness_path(path).name} beside it names other "
                                            "records: a format-2 sheet rewritten as format 1 is refused")
    return contents


def _witnessed(contents: Contents, witness_raw: bytes | None, path: Path, repair: bool = False) -> Contents:
    """Compare the records with the witness: every witnessed record present, in order, unchanged; a witness
    damaged, or behind by more than one append, stops the reader (unless `repair`)."""
    witness = witness_path(path)
    contents.progress_key = progress.key(contents.header["locked"], contents.header["lock"])
    if witness_raw is None:
        if contents.records and not repair:
            raise StaleRunError(witness, None, "missing: the count of recorded attempts cannot be checked "
                                               "(restore it from where the scoresheet came from, or rebuild it "
                                               f"with `harness sheet repair-chain {path}`)")
        witness_raw = b""
    complete = witness_raw[: witness_raw.rfind(b"\n") + 1]
    contents.witness_size, contents.witness_end = len(witness_raw), len(complete)
    lines = complete.decode("ascii", errors="replace").splitlines()
    damaged = len(complete) < len(witness_raw)   # a torn last line
    for position, text in enumerate(lines):
        if not _witness_line_shape(text):   # damaged from here on: kept up to here, rebuilt from the sheet
            lines, damaged = lines[:position], True
            contents.witness_end = sum(len(line) + 1 for line in lines)
            break
    counts = dict.fromkeys(KINDS, 0)
    for position, text in enumerate(lines):
        parts = text.split(" ")
        kind, count, chain = parts[0], int(parts[1]), parts[2]
        counts[kind] += 1
        if position >= len(contents.records):
            lost = len(lines) - len(contents.records)
            raise StaleRunError(path, "records", f"{lost} recorded {'entry is' if lost == 1 else 'entries are'} "
                                                 f"missing from the end (the witness {witness.name} names "
                                                 f"{len(lines)}, the file holds {len(contents.records)}); "
                                                 "the scoresheet was cut short or edited by hand")
        record_kind, record = contents.records[position]
        if record_kind != kind or count != counts[kind] or record.get("chain_sha256") != chain:
            raise StaleRunError(path, f"records[{position}]", f"does not match line {position + 1} of "
                                                              f"{witness.name} (edited by hand?)")
    contents.witnessed = len(lines)
    for kind, record in contents.records[len(lines):]:   # durable, not yet witnessed: a writer killed in
        counts[kind] += 1                                 # between, or one appending while this read
        contents.backlog.append(witness_line(kind, counts[kind], str(record.get("chain_sha256"))))
    unwitnessed = [kind for kind, _ in contents.records[len(lines):]]
    if (damaged or not one_append(unwitnessed)) and not repair:   # not just a kill: refused
        raise StaleRunError(witness, None, f"damaged or cut short (it names {len(lines)} of the "
                                           f"{len(contents.records)} records): nothing is reported or run on it "
                                           f"until `harness sheet repair-chain {path}` rebuilds it")
    return contents


def one_append(kinds: list[str]) -> bool:
    """Whether records not yet witnessed can be one append a killed writer left: one record (an attempt is
    appended on its own), or measurements only (`harness measure` appends several at once)."""
    return len(kinds) <= 1 or all(kind == "measurement" for kind in kinds)


def _witness_line_shape(text: str) -> bool:
    parts = text.split(" ")
    return (len(parts) == 3 and parts[0] in KINDS and parts[1].isdigit() and len(parts[2]) == 64
            and all(c in "0123456789abcdef" for c in parts[2]))


def _pretty(value: Any, pad: str) -> str:
    """JSON laid out for people: short values on one line, longer ones one item per line."""
    compact = json.dumps(value, separators=(", ", ": "), ensure_ascii=True, allow_nan=False)
    if len(compact) <= 100 or not isinstance(value, dict | list) or not value:
        return compact
    inner = pad + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(key)}: {_pretty(item, inner)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [inner + _pretty(item, inner) for item in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def header_bytes(header: dict[str, Any]) -> bytes:
    """The header as YAML whose every top-level value is JSON (flow style): readable, and read back
    by `json` at C speed instead of YAML's Python constructor (2 s for a 5,000-trial protocol)."""
    text = "".join(f"{key}: {_pretty(value, '  ')}\n" for key, value in header.items())
    return text.encode() + b"records:\n"


def _header_from_json(text: str) -> dict[str, Any] | None:
    """Read a header written by `header_bytes`; None when it is laid out otherwise (then YAML reads it)."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith((" ", "\t")) and sections:
            sections[-1][1].append(line)
            continue
        key, sep, rest = line.partition(": ")
        if not sep or not key.isidentifier():
            return None
        sections.append((key, [rest]))
    try:
        return {key: json.loads("\n".join(lines)) for key, lines in sections}
    except ValueError:
        return None


def write_all(path: Path, header: dict[str, Any], records: list[tuple[str, dict[str, Any]]],
              progress_seen: int = 0) -> Contents:
    """Write a whole sheet and its witness atomically (lock time, migration), then the progress witness's
    lines for the records from `progress_seen` on (those it already names are not written twice)."""
    counts = dict.fromkeys(KINDS, 0)
    witness = []
    for kind, record in records:
        counts[kind] += 1
        witness.append(witness_line(kind, counts[kind], record["chain_sha256"]))
    witness_bytes = b"".join(witness)
    body = header_bytes(header) + b"".join(record_line(kind, record) for kind, record in records)
    witness_file = witness_path(path)
    # a new sheet whose writing fails (a full disk, a size limit) leaves nothing: no witness, no folder made for it
    fresh = not path.exists() and not witness_file.exists()
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()] if fresh else []
    try:
        write_bytes_atomic(witness_file, witness_bytes)   # the witness first: see the module doc
        write_bytes_atomic(path, body)
    except BaseException:
        if fresh:
            witness_file.unlink(missing_ok=True)
            for folder in made:   # deepest first; one something else wrote into meanwhile stays
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise
    key = progress.key(header["locked"], header["lock"])
    chains = [(kind, str(record["chain_sha256"])) for kind, record in records]
    progress.append(key, progress.lines_for(chains, progress_seen), FORMAT_NUMBER)
    return Contents(FORMAT, header, list(records), canonical=True, size=len(body), end=len(body),
                    witness_size=len(witness_bytes), witness_end=len(witness_bytes), witnessed=len(records),
                    progress_key=key)


def append(path: Path, contents: Contents, entries: list[tuple[str, dict[str, Any], int]]) -> None:
    """Append records (kind, record with its chain hash, its count in its chain): one write, one fsync each file.

    The caller holds the writer lock. A file that changed size since it was read means some
    other writer ignored the lock; appending then could fork the chain, so it is refused.
    """
    lines = b"".join(record_line(kind, record) for kind, record, _ in entries)
    if contents.needs_newline:
        lines = b"\n" + lines
    witness = witness_path(path)
    witness_size = witness.stat().st_size if witness.exists() else 0
    with path.open("r+b") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size != contents.size or witness_size != contents.witness_size:
            raise StaleRunError(path, None, "changed by another process since it was loaded; run the command again")
        handle.seek(contents.end)
        if contents.end < size:
            handle.truncate()
        handle.write(lines)
        handle.flush()
        os.fsync(handle.fileno())
        contents.size = contents.end = handle.tell()
    contents.needs_newline = False
    new_witness = b"".join([*contents.backlog, *(witness_line(k, n, r["chain_sha256"]) for k, r, n in entries)])
    created = not witness.exists()
    fd = os.open(witness, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
    with os.fdopen(fd, "r+b") as handle:
        handle.seek(contents.witness_end)
        handle.truncate()
        handle.write(new_witness)
        handle.flush()
        os.fsync(handle.fileno())
        contents.witness_size = contents.witness_end = handle.tell()
    if created:
        _fsync_folder(path.parent)
    contents.backlog = []
    contents.witnessed += len(entries)
    new_lines = [witness_line(k, n, r["chain_sha256"]) for k, r, n in entries]
    # last: see harness.storage.progress for the order under a kill
    progress.append(contents.progress_key, [*contents.progress_backlog, *new_lines], FORMAT_NUMBER)
    contents.progress_backlog = []


def rebuild_witness(path: Path, contents: Contents) -> None:
    """`harness sheet repair-chain`: the `.chain` rewritten from the records as read (whose chains the caller
    has verified), and the repair recorded in the progress witness, with the records it had not seen."""
    counts = dict.fromkeys(KINDS, 0)
    lines = []
    for kind, record in contents.records:
        counts[kind] += 1
        lines.append(witness_line(kind, counts[kind], str(record.get("chain_sha256"))))
    write_bytes_atomic(witness_path(path), b"".join(lines))
    progress.append(contents.progress_key, [*contents.progress_backlog, progress.repair_line(len(lines))],
                    FORMAT_NUMBER)


def _fsync_folder(folder: Path) -> None:
    fsync_folder(folder)
