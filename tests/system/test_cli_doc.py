"""docs/cli.md is what the argument parsers say: a flag added, renamed or re-worded without rerunning
`python scripts/cli_doc.py` fails here, with the command that fixes it."""

from __future__ import annotations

import runpy

from tests.helpers import REPO


def test_the_command_reference_is_generated_from_the_parsers_as_they_are() -> None:
    generator = runpy.run_path(str(REPO / "scripts" / "cli_doc.py"))
    written = (REPO / "docs" / "cli.md").read_text()
    assert written == generator["render"](), "docs/cli.md is stale: run `python scripts/cli_doc.py`"


def test_every_command_and_flag_is_on_the_page() -> None:
    from harness.cli import build_parser

    generator = runpy.run_path(str(REPO / "scripts" / "cli_doc.py"))
    page = (REPO / "docs" / "cli.md").read_text()
    for name, parser, _ in generator["_subcommands"](build_parser()):
        assert f"## `harness {name}`" in page
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in page, f"harness {name} {flag} is not in docs/cli.md"
