"""`harness report`: numbers on the terminal, `--json`, or an HTML/Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def training_starts(path: str) -> list[tuple[float, float]]:
    """`dx_cm,dy_cm` per line (offsets of each training episode's cube from the trained position)."""
    import math

    from harness.storage.safe_yaml import read_limited

    starts = []
    raw = read_limited(path, what="list of training starts")   # a device or a pipe: refused, never read
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise HarnessInputError(path, None, f"not a text file (byte {exc.start} is not UTF-8)") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith(("#", "dx")):
            continue
        try:
            dx, dy = (float(v) for v in line.split(",")[:2])
        except ValueError:
            raise HarnessInputError(path, f"line {number}", f"{line[:40]!r} is not dx_cm,dy_cm") from None
        if not (math.isfinite(dx) and math.isfinite(dy)):
            raise HarnessInputError(path, f"line {number}", f"{line[:40]!r}: offsets must be finite numbers")
        starts.append((dx, dy))
    return starts


def starts_per_sheet(paths: list[str], n_sheets: int) -> list[list[tuple[float, float]] | None]:
    """One `--training-starts` for every scoresheet, or one per scoresheet in order (`none` for a sheet
    without): the coverage experiment reports two policies trained on different starts side by side."""
    if len(paths) not in (0, 1, n_sheets):
        raise HarnessInputError(None, "--training-starts", f"given {len(paths)} times for {n_sheets} scoresheets: "
                                "give it once (for all) or once per scoresheet, in order ('none' for a sheet without)")
    if len(paths) == 1:
        paths = paths * n_sheets
    return [None if path == "none" else training_starts(path) for path in paths] or [None] * n_sheets


def _not_comparable(sheets: list[Any], force: bool) -> str | None:
    """Refuse to put runs of different tasks or success definitions side by side, unless forced;
    when forced, the words that go into the report's title."""
    first = sheets[0]
    for field in ("task", "success_definition", "taxonomy"):
        other = next((s for s in sheets if getattr(s.locked, field) != getattr(first.locked, field)), None)
        if other is None:
            continue
        if not force:
            raise HarnessInputError(other.path, f"locked.{field}", f"differs from {first.path}'s: these runs measured "
                                    "different things; pass --force-compare to report them together anyway")
        return f"NOT COMPARABLE ({field.replace('_', ' ')} differs, forced with --force-compare)"
    return None


def report(args: argparse.Namespace) -> int:
    import sys

    from harness.models.scoresheet import drift, load_scoresheet
    from harness.reports.summary import format_summary, summarize

    for flag, out in (("-o", args.output), ("--md", args.md)):
        if out:
            try:
                out.encode("utf-8")   # its name goes into the report's own text
            except UnicodeEncodeError:
                raise HarnessInputError(None, flag, "the file name is not UTF-8 text") from None
            from harness.storage.atomic import check_output_path

            check_output_path(out)
            if Path(out).exists() and not args.force:
                raise HarnessInputError(out, None, "exists; pass --force to overwrite")
    from harness.models.posthoc import is_posthoc

    posthoc = [path for path in args.scoresheets if is_posthoc(path)]
    if posthoc:
        return _posthoc_report(args, posthoc)
    if args.model_card is not None:
        return _model_card(args)
    starts = starts_per_sheet(args.training_starts or [], len(args.scoresheets))
    sheets = [load_scoresheet(path) for path in args.scoresheets]
    from harness.app.sheet_signature import check_signature
    from harness.models.evidence_audit import check_evidence
    from harness.run.reanalyze import run_folder_candidates

    for sheet in sheets:   # a sheet whose own evidence names attempts it lost is refused, as on resume
        check_evidence(sheet, run_folder_candidates(sheet, Path(args.runs_dir) if args.runs_dir else None))
        checked = check_signature(sheet, Path(args.signed_by) if args.signed_by else None)
        if checked is not None:
            print(checked.describe(sheet.path), file=sys.stderr)
    warnings = [said for sheet in sheets for said in (sheet.stored.warnings if sheet.stored else [])]   # logged
    if args.reanalyze:
        sheets = _reanalyzed(sheets, Path(args.runs_dir) if args.runs_dir else None)
    caveat = _not_comparable(sheets, args.force_compare) if len(sheets) > 1 else None
    if caveat:
        print(f"warning: {caveat}", file=sys.stderr)
        warnings.append(caveat)
    from harness.policies.hub import policy_fingerprint

    def cached_fingerprint(ref: str) -> str:   # a report never downloads a Hub policy
        return policy_fingerprint(ref, offline=True)

    drifted = {sheet.path: drift(sheet, cached_fingerprint) for sheet in sheets}
    for path, found in drifted.items():
        for item in found:
            print(f"warning: {path}: {item}", file=sys.stderr)
            warnings.append(f"{path}: {item}")
    revealed, compared = _comparison_blocks(sheets, args)
    if compared and not revealed:   # open and sealed: timing per trial would name the slower arm
        from harness.reports.comparison import pooled_timing

        sheets = [pooled_timing(sheet) for sheet in sheets]
    summaries = [summarize(sheet) for sheet in sheets]
    if args.output or args.md:
        from harness.reports.blocks import to_html, write_markdown
        from harness.reports.document import report_blocks, report_title
        from harness.storage.atomic import write_text_atomic

        blocks, title = [*compared, *report_blocks(sheets, starts)], report_title(sheets)
        if caveat:
            title = f"{caveat}: {title}"
        if any(drifted.values()):
            title += " (changed since locking: " + ", ".join(p.name for p, f in drifted.items() if f) + ")"
        if args.reanalyze:
            title += " (anatomy re-analysed with the current rules)"
        written = sys.stderr if args.json else sys.stdout   # with --json, stdout is the JSON alone
        if args.output:
            write_text_atomic(args.output, to_html(title, blocks))
            print(f"wrote {args.output}", file=written)
        if args.md:
            write_markdown(Path(args.md), title, blocks)
            print(f"wrote {args.md}", file=written)
    if args.json:
        from harness.reports.analysis import analyze_report

        analysis = analyze_report(sheets, starts, warnings)
        if compared:
            from harness.reports.comparison import comparison_json

            analysis = analysis.model_copy(update={"blind_comparison": comparison_json(sheets[0], revealed)})
        print(analysis.to_json())
    elif not (args.output or args.md):
        from harness.reports.analysis import run_anatomy

        texts = []
        for s, sheet in zip(summaries, sheets, strict=True):
            anatomy = run_anatomy(sheet)
            texts.append(format_summary(s) + "".join(f"\nChanged     {item}" for item in drifted[sheet.path])
                         + "".join(f"\n{line}" for line in (anatomy.lines() if anatomy else [])))
        if compared:
            from harness.reports.comparison import comparison_text

            texts.insert(0, comparison_text(compared))
        from harness.reports.analysis import twin_report
        from harness.reports.fidelity import assisted_text, fidelity_text

        twins = twin_report(sheets)
        if twins is not None:   # as -o, --md and --json put it: before the runs themselves
            texts.insert(0, fidelity_text(twins))
            assisted = assisted_text(twins)
            if assisted:   # a twin with its own trials: the real success rate alone and with the twin's help
                texts.insert(1, assisted)
        print("\n\n".join(([caveat] if caveat else []) + texts))
    return 0


def _posthoc_report(args: argparse.Namespace, posthoc: list[str]) -> int:
    """A `harness score` sheet (not pre-registered): its own report, whose first line says so; never beside a
    protocol run's sheets, nor on a model card."""
    from harness.models.posthoc import NOTICE, load_posthoc

    if len(args.scoresheets) > 1 or args.model_card or args.output or args.md or args.json:
        raise HarnessInputError(posthoc[0], None, f"{NOTICE.split(':')[0]}: a `harness score` sheet is reported "
                                "alone, as text, and never put on a model card or beside a protocol run")
    print("\n".join(load_posthoc(posthoc[0]).report_lines()))
    return 0


def _model_card(args: argparse.Namespace) -> int:
    """`--model-card CHECKPOINT/README.md`: the sheet's success rate into the card's `model-index` (docs/running.md)."""
    from harness import __version__
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.comparison import may_reveal
    from harness.reports.model_card import write_model_card

    if len(args.scoresheets) != 1:
        raise HarnessInputError(None, "--model-card", f"takes one scoresheet, not {len(args.scoresheets)}")
    for flag, given in (("--json", args.json), ("-o", args.output), ("--md", args.md)):
        if given:
            raise HarnessInputError(None, "--model-card", f"writes the card alone: run the report with {flag} apart")
    sheet = load_scoresheet(args.scoresheets[0])
    revealed = sheet.locked.comparison is not None and may_reveal(sheet, args.reveal, args.unblind)
    card = Path(args.model_card)
    for line in write_model_card(card, sheet, revealed, __version__):
        print(line)
    return 0


def _reanalyzed(sheets: list[Any], runs: Path | None) -> list[Any]:
    """Each sheet with its anatomy recomputed from the recorded traces (in memory: the files are not written)."""
    import sys

    from harness.run.anatomy import GraspPoints
    from harness.run.reanalyze import reanalyze

    fk = GraspPoints()
    out = []
    for sheet in sheets:
        result = reanalyze(sheet, runs, fk)
        print(result.describe(), file=sys.stderr)
        out.append(result.sheet)
    return out


def _comparison_blocks(sheets: list[Any], args: argparse.Namespace) -> tuple[bool, list[Any]]:
    """A blind comparison's section (one sheet holds every arm), and whether its arms may be named (only
    once it may be revealed); no blocks for any other sheet."""
    comparisons = [sheet for sheet in sheets if sheet.locked.comparison is not None]
    if not comparisons:
        if args.reveal or args.unblind:
            raise HarnessInputError(sheets[0].path, "--reveal", "not a comparison: there is nothing to reveal")
        return False, []
    if len(sheets) > 1:
        raise HarnessInputError(comparisons[0].path, None, "a comparison's scoresheet holds every arm: report it "
                                                           "on its own")
    from harness.reports.comparison import comparison_blocks, may_reveal

    sheet = comparisons[0]
    revealed = may_reveal(sheet, args.reveal, args.unblind)
    return revealed, comparison_blocks(sheet, revealed)


def register(sub: Any) -> None:
    parser = sub.add_parser("report", help="summarize one or more scoresheets")
    parser.add_argument("scoresheets", nargs="+")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output, schema harness.report/1 (docs/report-json.md)")
    parser.add_argument("-o", "--output", metavar="REPORT.html", help="write a self-contained HTML report")
    parser.add_argument("--md", metavar="REPORT.md", help="write a Markdown report (figures in REPORT_files/)")
    parser.add_argument("--training-starts", metavar="CSV", action="append",
                        help="training episodes' cube offsets (dx_cm,dy_cm per line) to draw on the top-view map; "
                             "once for every scoresheet, or once per scoresheet in order ('none' for one without)")
    parser.add_argument("--reanalyze", action="store_true",
                        help="recompute each attempt's failure anatomy from its recorded trace with the current "
                             "rules (the scoresheet is not changed; attempts without a trace keep what was stored)")
    parser.add_argument("--runs-dir", metavar="DIR",
                        help="the run folder holding the evidence folders (checked against the sheet's records, and "
                             "read by --reanalyze), or the runs root holding one per scoresheet name (default: "
                             "runs/<sheet> here or beside the sheet)")
    parser.add_argument("--signed-by", metavar="KEY.pub",
                        help="demand that each scoresheet is signed (`harness sheet sign`) by this public key")
    parser.add_argument("--force", action="store_true", help="overwrite an existing -o / --md report")
    parser.add_argument("--force-compare", action="store_true",
                        help="report scoresheets of different tasks or success definitions together (the title "
                             "then says they are not comparable)")
    parser.add_argument("--reveal", action="store_true",
                        help="a blind comparison: name the policy behind each arm (refused while the run is open)")
    parser.add_argument("--unblind", action="store_true",
                        help="a blind comparison still open: reveal its arms now; the unblinding is recorded in "
                             "the scoresheet's chain and every later report says so")
    parser.add_argument("--model-card", metavar="CHECKPOINT/README.md",
                        help="add or update the scoresheet's success rate (Wilson interval, trial count, protocol "
                             "and its hash, harness version) in a Hugging Face model card's model-index; the rest "
                             "of the card is left as it is (a comparison: each arm, once its arms are revealed)")
    parser.set_defaults(func=report)
