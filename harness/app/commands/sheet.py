"""`harness sheet`: a scoresheet's upkeep: rebuild a damaged `.chain` (recorded), sign it with a key you keep.

Both write beside a sheet, never in it: the records stay as they were appended (docs/scoresheet.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def _sheet_path(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise HarnessInputError(path, None, "no such scoresheet")
    return path


def repair_chain(args: argparse.Namespace) -> int:
    from harness.models.evidence_audit import check_evidence
    from harness.models.scoresheet import Scoresheet
    from harness.models.scoresheet import repair_chain as rebuild
    from harness.run.reanalyze import run_folder_candidates
    from harness.storage import journal
    from harness.storage.progress import key, witness_file

    path = _sheet_path(args.scoresheet)
    runs = Path(args.runs_dir) if args.runs_dir else None
    sheets: list[Scoresheet] = []

    def audit(sheet: Scoresheet) -> None:   # the run's own evidence must agree before the witness is rebuilt
        check_evidence(sheet, run_folder_candidates(sheet, runs))
        sheets.append(sheet)

    count = rebuild(path, audit)
    where = witness_file(key(sheets[0].locked_data, sheets[0].lock))
    print(f"{journal.witness_path(path)}: rebuilt from the sheet's {count} verified records; the repair is "
          f"recorded in {where}")
    return 0


def keygen(args: argparse.Namespace) -> int:
    from harness.app.sheet_signature import generate_key

    public = generate_key(Path(args.key))
    print(f"{args.key}: a new Ed25519 key (keep it private); its public half: {public}")
    return 0


def sign(args: argparse.Namespace) -> int:
    from harness.app.sheet_signature import sign_sheet
    from harness.models.scoresheet import load_scoresheet

    path = _sheet_path(args.scoresheet)
    sheet = load_scoresheet(path)
    written, statement = sign_sheet(sheet, Path(args.key))
    print(f"{written}: {path} signed through {statement.attempts} attempt records and {statement.measurements} "
          "measurements")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("sheet", help="a scoresheet's upkeep: repair-chain, keygen, sign")
    verbs = parser.add_subparsers(dest="verb", required=True)
    repair = verbs.add_parser("repair-chain", help="rebuild a damaged or missing SHEET.chain from the sheet's own "
                                                   "verified records and its evidence, and record that it was")
    repair.add_argument("scoresheet")
    repair.add_argument("--runs-dir", metavar="DIR",
                        help="the run folder holding the evidence folders, or the runs root (default: runs/<sheet> "
                             "here or beside the sheet)")
    repair.set_defaults(func=repair_chain)
    gen = verbs.add_parser("keygen", help="make an Ed25519 signing key (OpenSSH format, via ssh-keygen)")
    gen.add_argument("key", help="where the private key goes (KEY.pub gets the public half)")
    gen.set_defaults(func=keygen)
    signer = verbs.add_parser("sign", help="sign SHEET's records so far with a key you keep: SHEET.sig, checked "
                                           "by `harness report`")
    signer.add_argument("scoresheet")
    signer.add_argument("--key", required=True, help="an Ed25519 private key (OpenSSH format)")
    signer.set_defaults(func=sign)
