"""The optional signature (issue 62): what the hash chain cannot stop, a key the user keeps does. A deliberate
forger who flips an outcome and re-hashes every record, `.chain` and progress witness included, is accepted
without a signature and refused with one; a signature that does not verify, or is not the named key's, is
refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.models.scoresheet import load_scoresheet, sha256_of
from harness.storage import journal, progress
from tests.helpers import fake_attempt, locked_sheet, refused

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is not installed")


def _sheet(folder: Path):
    sheet = locked_sheet(folder)
    for index, label in enumerate(("no_grasp", "success"), start=1):
        sheet.add_attempt(fake_attempt(index, 1, label))
    return sheet


def _key(folder: Path, capsys, name: str = "key") -> Path:
    key = folder / "keys" / name
    key.parent.mkdir(exist_ok=True)
    assert main(["sheet", "keygen", str(key)]) == 0
    capsys.readouterr()
    return key


def _forge(path: Path) -> None:
    """The full re-hash: trial 1's failure made a success, every chain hash recomputed, the `.chain` rewritten
    and the progress witness deleted (it is the user's own file)."""
    header = yaml.safe_load(path.read_text().split("\nrecords:\n")[0])
    records = [line for line in path.read_text().split("\nrecords:\n")[1].splitlines() if line]
    previous, forged = header["lock"]["sha256"], []
    for line in records:
        record = yaml.safe_load(line[2:])["attempt"]
        if record["outcome"] == "failure":
            record.update(outcome="success", failure_mode=None)
        body = {k: v for k, v in record.items() if k != "chain_sha256" and v is not None}
        body["failure_mode"] = record["failure_mode"]
        previous = sha256_of({"prev": previous, "record": body})
        forged.append(("attempt", {**body, "chain_sha256": previous}))
    progress.witness_file(progress.key(header["locked"], header["lock"])).unlink()
    path.unlink()
    journal.write_all(path, header, forged)
    progress.witness_file(progress.key(header["locked"], header["lock"])).unlink()


def test_a_signed_sheet_reports_its_signer_and_a_forged_one_is_refused(tmp_path: Path, capsys) -> None:
    sheet = _sheet(tmp_path)
    key = _key(tmp_path, capsys)
    assert main(["sheet", "sign", str(sheet.path), "--key", str(key)]) == 0
    capsys.readouterr()
    assert main(["report", str(sheet.path), "--signed-by", f"{key}.pub"]) == 0
    err = capsys.readouterr().err
    assert "signed by ED25519 key SHA256:" in err and "through 2 records" in err
    load_scoresheet(sheet.path).add_attempt(fake_attempt(3, 1, "success"))   # appended since: said, not refused
    assert main(["report", str(sheet.path)]) == 0
    assert "1 record appended since is not signed" in capsys.readouterr().err
    _forge(sheet.path)
    assert load_scoresheet(sheet.path).attempts[0].outcome.value == "success"   # the chain alone cannot tell
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "not the records" in line and "re-hashed" in line, line


def test_without_a_signature_the_forgery_goes_through_as_documented(tmp_path: Path, capsys) -> None:
    """What docs/scoresheet.md says the sheet cannot resist without a key: stated by a test, so it stays true."""
    sheet = _sheet(tmp_path)
    _forge(sheet.path)
    capsys.readouterr()
    assert main(["report", str(sheet.path)]) == 0
    assert "2/2" in capsys.readouterr().out


def test_a_bad_or_foreign_signature_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    sheet = _sheet(tmp_path)
    key, other = _key(tmp_path, capsys), _key(tmp_path, capsys, "other")
    assert main(["sheet", "sign", str(sheet.path), "--key", str(key)]) == 0
    line = refused(["report", str(sheet.path), "--signed-by", f"{other}.pub"], tmp_path, capsys)
    assert "not by" in line, line
    signature = Path(f"{sheet.path}.sig")
    signature.write_text(signature.read_text().replace('"attempts": 2', '"attempts": 1'))
    line = refused(["report", str(sheet.path)], tmp_path, capsys)
    assert "does not verify" in line, line
    signature.unlink()
    line = refused(["report", str(sheet.path), "--signed-by", f"{key}.pub"], tmp_path, capsys)
    assert "not signed" in line, line


def test_the_signature_counts_every_record_kind_and_old_signatures_still_verify(tmp_path: Path, capsys) -> None:
    """Signed at 2 attempts, then an unblinding and one more attempt: 2 records appended since, not 1; the signed
    statement covers every kind the journal holds; a signature made before unblindings were counted (schema 1)
    still verifies, and the unblinding appended after it is said to be unsigned."""
    import json

    from harness.app.sheet_signature import NAMESPACE, SignatureFile, Statement, signature_path, statement_of

    sheet = _sheet(tmp_path)
    key = _key(tmp_path, capsys)
    assert main(["sheet", "sign", str(sheet.path), "--key", str(key)]) == 0
    capsys.readouterr()
    reread = load_scoresheet(sheet.path)
    reread.add_unblinding("2026-01-01T00:00:00+00:00", "test")
    reread.add_attempt(fake_attempt(3, 1, "success"))
    assert main(["report", str(sheet.path)]) == 0
    assert "2 records appended since are not signed" in capsys.readouterr().err
    statement = statement_of(load_scoresheet(sheet.path))
    assert set(statement.counts()) == set(journal.KINDS)
    assert main(["sheet", "sign", str(sheet.path), "--key", str(key)]) == 0
    capsys.readouterr()
    assert main(["report", str(sheet.path)]) == 0
    err = capsys.readouterr().err
    assert "through 4 records" in err and "appended since" not in err, err
    # an old (schema 1) statement over the first two attempts, signed as the old harness signed it
    old = Statement(schema_="harness.sheet-signature/1", lock_sha256=statement.lock_sha256, attempts=2,
                    attempt_head=load_scoresheet(sheet.path).records[1].chain_sha256, measurements=0,
                    measurement_head=statement.lock_sha256)
    assert b"unblinding" not in old.canonical()
    import subprocess
    done = subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", NAMESPACE], input=old.canonical(),
                          capture_output=True, check=True)
    signature_path(sheet.path).write_text(json.dumps({"statement": json.loads(old.canonical()),
                                                      "signature": done.stdout.decode()}))
    SignatureFile.model_validate_json(signature_path(sheet.path).read_bytes())
    assert main(["report", str(sheet.path)]) == 0
    err = capsys.readouterr().err
    assert "through 2 records" in err and "2 records appended since are not signed" in err, err
