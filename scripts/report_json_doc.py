"""Write the JSON Schema at the end of docs/report-json.md from the models `harness report --json` prints.

    python scripts/report_json_doc.py          # rewrite the schema block of docs/report-json.md
    python scripts/report_json_doc.py --check  # exit 1 when the page's schema is not the models'

The page's prose and example are written by hand; the schema under "## JSON Schema" is
`harness.reports.analysis.ReportJson.model_json_schema(by_alias=True)`, so a field added to a report model is
one run of this script away from the page. tests/unit/reports/test_report_json.py runs the check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "report-json.md"
HEADING = "## JSON Schema\n\n```json\n"


def schema_text() -> str:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from harness.reports.analysis import ReportJson

    return json.dumps(ReportJson.model_json_schema(by_alias=True), indent=2) + "\n"


def render(page: str) -> str:
    """The page with its schema block (from the heading to the end of the file) generated again."""
    head, found, _ = page.partition(HEADING)
    if not found:
        raise SystemExit(f"{DOC}: no '## JSON Schema' section with a json block to write")
    return head + HEADING + schema_text() + "```\n"


def main(argv: list[str]) -> int:
    page = DOC.read_text()
    wanted = render(page)
    if "--check" in argv:
        if page != wanted:
            print(f"{DOC.relative_to(REPO)} is out of date: run python scripts/report_json_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted)
    print(f"wrote {DOC.relative_to(REPO)} ({len(wanted.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
