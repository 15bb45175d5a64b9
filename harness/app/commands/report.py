"""`harness report`: numbers on the terminal, `--json`, or an HTML/Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def training_starts(path: str) -> list[tuple[float, float]]:
    """`dx_cm,dy_cm` per line (offsets of each training episode's cube from the trained position)."""
    starts = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith(("#", "dx")):
            continue
        try:
            dx, dy = (float(v) for v in line.split(",")[:2])
        except ValueError:
            raise HarnessInputError(path, f"line {number}", f"'{line}' is not dx_cm,dy_cm") from None
        starts.append((dx, dy))
    return starts


def report(args: argparse.Namespace) -> int:
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.summary import format_summary, summarize

    sheets = [load_scoresheet(path) for path in args.scoresheets]
    summaries = [summarize(sheet) for sheet in sheets]
    if args.output or args.md:
        from harness.models.atomic import write_text_atomic
        from harness.reports.blocks import to_html, write_markdown
        from harness.reports.document import report_blocks, report_title

        starts = training_starts(args.training_starts) if args.training_starts else None
        blocks, title = report_blocks(sheets, starts), report_title(sheets)
        if args.output:
            write_text_atomic(args.output, to_html(title, blocks))
            print(f"wrote {args.output}")
        if args.md:
            write_markdown(Path(args.md), title, blocks)
            print(f"wrote {args.md}")
        return 0
    if args.json:
        from harness.reports.summary import ReportJson

        print(ReportJson(runs=summaries).to_json())
    else:
        print("\n\n".join(format_summary(s) for s in summaries))
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("report", help="summarize one or more scoresheets")
    parser.add_argument("scoresheets", nargs="+")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output, schema harness.report/1 (docs/report-json.md)")
    parser.add_argument("-o", "--output", metavar="REPORT.html", help="write a self-contained HTML report")
    parser.add_argument("--md", metavar="REPORT.md", help="write a Markdown report (figures in REPORT_files/)")
    parser.add_argument("--training-starts", metavar="CSV",
                        help="training episodes' cube offsets (dx_cm,dy_cm per line) to draw on the top-view map")
    parser.set_defaults(func=report)
