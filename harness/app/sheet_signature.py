"""An optional signature over a scoresheet, with a key its user keeps: what the hash chain alone cannot give.

Why: every hash in a sheet can be recomputed by anyone (the scheme has no secret), so a deliberate forger
who flips an outcome and re-hashes the whole chain, `.chain` included, is caught only by something they
cannot recompute. `harness sheet sign` signs a statement of the sheet's progress (its lock hash, how many
records of each kind the journal holds, and the chain hash of the last of each) with an Ed25519 key, through OpenSSH's
`ssh-keygen -Y sign` (the standard, audited tool, on every platform OpenSSH runs on; no new dependency).
`SHEET.sig` holds the statement and the signature. `harness report` checks a signature when one is
present: the signature must verify, and the sheet's records up to the signed count must be the ones
signed (records appended since are reported as unsigned, never refused); `--signed-by KEY.pub` also
demands that the key is the one named (a forger could sign with a key of their own).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import HarnessInputError, StaleRunError
from harness.models.scoresheet import Scoresheet
from harness.storage.atomic import write_text_atomic
from harness.storage.journal import KINDS
from harness.storage.safe_yaml import read_limited

NAMESPACE = "harness-scoresheet"
# 2: the unblinding records are counted too (a version-1 statement, signed before they were, still verifies: its
# canonical bytes are unchanged, and any unblinding record is then reported as appended since, unsigned)
SCHEMA = "harness.sheet-signature/2"


class Statement(BaseModel):
    """What a signature vouches for: this sheet's records of every kind the journal holds, as far as the counts
    go (each kind's count and the chain hash of its last record)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_: str = SCHEMA
    lock_sha256: str
    attempts: int
    attempt_head: str
    measurements: int
    measurement_head: str
    unblindings: int | None = None   # None: a version-1 statement, which signed none
    unblinding_head: str | None = None

    def canonical(self) -> bytes:
        return json.dumps(self.model_dump(by_alias=True, exclude_none=True), sort_keys=True,
                          separators=(",", ":")).encode()

    def counts(self) -> dict[str, tuple[int, str]]:
        """Each journal record kind this statement signs: how many, and the chain hash of the last."""
        found = {"attempt": (self.attempts, self.attempt_head),
                 "measurement": (self.measurements, self.measurement_head)}
        if self.unblindings is not None and self.unblinding_head is not None:
            found["unblinding"] = (self.unblindings, self.unblinding_head)
        return found


class SignatureFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    statement: Statement
    signature: str   # `ssh-keygen -Y sign`'s armoured SSHSIG


def signature_path(sheet: Path) -> Path:
    return Path(f"{sheet}.sig")


def _chains(sheet: Scoresheet) -> dict[str, list[str]]:
    """Every record kind the journal holds (`journal.KINDS`), each as its chain of hashes."""
    chains = {"attempt": [a.chain_sha256 for a in sheet.records],
              "measurement": [m.chain_sha256 for m in sheet.measurements],
              "unblinding": [u.chain_sha256 for u in sheet.unblindings]}
    assert set(chains) == set(KINDS), "a journal record kind the signature does not count"
    return chains


def statement_of(sheet: Scoresheet) -> Statement:
    lock = str(sheet.lock["sha256"])
    chains = _chains(sheet)
    return Statement(lock_sha256=lock, attempts=len(chains["attempt"]),
                     attempt_head=chains["attempt"][-1] if chains["attempt"] else lock,
                     measurements=len(chains["measurement"]),
                     measurement_head=chains["measurement"][-1] if chains["measurement"] else lock,
                     unblindings=len(chains["unblinding"]),
                     unblinding_head=chains["unblinding"][-1] if chains["unblinding"] else lock)


def _ssh_keygen(flag: str) -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise HarnessInputError(None, flag, "ssh-keygen (OpenSSH) is not on PATH: install OpenSSH to sign or "
                                            "check scoresheet signatures")
    return found


def generate_key(path: Path) -> Path:
    """A new unencrypted Ed25519 key at `path` (and `path`.pub); refuses to overwrite one."""
    if path.exists() or Path(f"{path}.pub").exists():
        raise HarnessInputError(path, None, "exists: a key is never overwritten")
    done = subprocess.run([_ssh_keygen("KEY"), "-q", "-t", "ed25519", "-N", "", "-C", NAMESPACE, "-f", str(path)],
                          capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise HarnessInputError(path, None, f"ssh-keygen could not make the key: {_first_line(done.stderr)}")
    return Path(f"{path}.pub")


def sign_sheet(sheet: Scoresheet, key: Path) -> tuple[Path, Statement]:
    """Sign the sheet's records so far; SHEET.sig is replaced atomically."""
    if not key.is_file():
        raise HarnessInputError(key, "--key", "no such key file")
    statement = statement_of(sheet)
    done = subprocess.run([_ssh_keygen("--key"), "-Y", "sign", "-f", str(key), "-n", NAMESPACE],
                          input=statement.canonical(), capture_output=True, check=False)
    if done.returncode != 0 or not done.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----"):
        raise HarnessInputError(key, "--key", f"ssh-keygen could not sign with it: "
                                              f"{_first_line(done.stderr.decode(errors='replace'))}")
    path = signature_path(sheet.path)
    content = SignatureFile(statement=statement, signature=done.stdout.decode())
    write_text_atomic(path, content.model_dump_json(by_alias=True, indent=2) + "\n")
    return path, statement


@dataclass(frozen=True)
class Checked:
    """A signature that verified: whose key, and how far it reaches."""

    fingerprint: str
    signed_records: int
    records: int

    def describe(self, sheet: Path) -> str:
        later = self.records - self.signed_records
        since = (f"; {later} record{'s' if later != 1 else ''} appended since {'are' if later != 1 else 'is'} not "
                 "signed") if later else ""
        return f"{sheet}: signed by ED25519 key {self.fingerprint} through {self.signed_records} records{since}"


def _public_blob(armoured: str) -> bytes:
    """The signer's public key inside an SSHSIG (PROTOCOL.sshsig: magic, version, then the key as a string)."""
    body = "".join(line for line in armoured.splitlines() if line and not line.startswith("-----"))
    raw = base64.b64decode(body)
    if not raw.startswith(b"SSHSIG") or len(raw) < 14:
        raise ValueError("not an SSH signature")
    length = int.from_bytes(raw[10:14], "big")
    return raw[14:14 + length]


def fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _key_blob(public_key: Path) -> bytes:
    raw = read_limited(public_key, 64 * 1024, what="public key")   # /dev/zero or a pipe: one line, never read
    try:
        parts = raw.decode().split()
        return base64.b64decode(parts[1], validate=True)
    except (OSError, IndexError, ValueError, UnicodeDecodeError):
        raise HarnessInputError(public_key, "--signed-by", "not an OpenSSH public key (KEY.pub)") from None


def check_signature(sheet: Scoresheet, signed_by: Path | None = None) -> Checked | None:
    """Check SHEET.sig when present (None: there is none, and none was demanded); refuses a bad one."""
    path = signature_path(sheet.path)
    if not path.is_file():
        if signed_by is not None:
            raise StaleRunError(sheet.path, "--signed-by", f"not signed: {path.name} is missing")
        return None
    try:
        content = SignatureFile.model_validate_json(path.read_bytes())
        blob = _public_blob(content.signature)
    except (OSError, ValidationError, ValueError):
        raise StaleRunError(path, None, "not a scoresheet signature (damaged?)") from None
    statement = content.statement
    if statement.lock_sha256 != sheet.lock["sha256"]:
        raise StaleRunError(path, "lock_sha256", f"signs another scoresheet, not {sheet.path}")
    if signed_by is not None and _key_blob(signed_by) != blob:
        raise StaleRunError(path, "--signed-by", f"signed by key {fingerprint(blob)}, not by {signed_by}")
    with tempfile.TemporaryDirectory(prefix="harness-sig-") as folder:
        armoured = Path(folder) / "sig"
        armoured.write_text(content.signature)
        done = subprocess.run([_ssh_keygen("SHEET.sig"), "-Y", "check-novalidate", "-n", NAMESPACE, "-s",
                               str(armoured)], input=statement.canonical(), capture_output=True, check=False)
    if done.returncode != 0:
        raise StaleRunError(path, "signature", "does not verify: the signed statement or the signature was "
                                               "changed after signing")
    lock = str(sheet.lock["sha256"])
    heads = _chains(sheet)
    signed = statement.counts()
    for kind, (count, head) in signed.items():
        chain = heads[kind]
        at = chain[count - 1] if 0 < count <= len(chain) else (lock if count == 0 else None)
        if at != head:
            raise StaleRunError(sheet.path, f"{kind}s", f"not the records {path.name} signed ({count} {kind} "
                                                        "records): changed, rolled back or re-hashed since")
    return Checked(fingerprint(blob), sum(count for count, _ in signed.values()),
                   sum(len(chain) for chain in heads.values()))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no reason given")
