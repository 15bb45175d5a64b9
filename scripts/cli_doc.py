"""Write docs/cli.md from the `harness` argument parsers: every command, its flags and their help.

    python scripts/cli_doc.py          # rewrite docs/cli.md
    python scripts/cli_doc.py --check  # exit 1 when docs/cli.md is not what the parsers say

tests/system/test_cli_doc.py runs the check, so a flag added or changed without rerunning this fails the suite.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"
WIDTH = 100   # argparse wraps help to the terminal's width: fixed here so the page does not depend on it


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, one-line help) of each subcommand, in the order `harness --help` lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return found


def _sections(parser: argparse.ArgumentParser, path: str, level: int) -> list[str]:
    lines = []
    for name, sub, summary in _subcommands(parser):
        title = f"{path} {name}"
        lines += [f"{'#' * level} `{title}`", ""]
        if summary:
            lines += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        lines += ["```text", sub.format_help().rstrip(), "```", ""]
        lines += _sections(sub, title, min(level + 1, 4))
    return lines


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    """Each parser (a fresh one from `build_parser`) keeps its formatter class, at `WIDTH` columns."""
    parser.formatter_class = functools.partial(parser.formatter_class, width=WIDTH)
    for _, sub, _ in _subcommands(parser):
        _fixed_width(sub)


def render() -> str:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from harness.cli import build_parser

    parser = build_parser()
    _fixed_width(parser)
    commands = _subcommands(parser)
    lines = ["# Command reference", "",
             "Every `harness` command with all its flags, as `harness COMMAND --help` prints them. Generated from "
             "the argument parsers by `python scripts/cli_doc.py` (tests/system/test_cli_doc.py fails when this page "
             "and the parsers disagree); exit codes are in the [README](../README.md#exit-codes).", "",
             "```text", parser.format_help().rstrip(), "```", "",
             "Commands: " + ", ".join(f"[`{name}`](#harness-{name})" for name, _, _ in commands) + ".", ""]
    lines += _sections(parser, "harness", 2)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if DOC.read_text() == text else 1)
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(REPO)} ({len(text.splitlines())} lines)")
