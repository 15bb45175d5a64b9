"""The one place a parsed `harness run` command line becomes a `RunRequest`; below here only the request travels."""

from __future__ import annotations

import argparse

from harness.models.run_request import RunRequest


def as_request(args: argparse.Namespace) -> RunRequest:
    """A parsed `harness run` command line as the run's request (a bad flag value is one line naming the flag),
    converted here once by the command handlers and read no further."""
    return RunRequest.from_flags(vars(args))
