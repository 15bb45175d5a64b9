"""The one place a parsed `harness run` command line becomes a `RunRequest`; below here only the request travels."""

from __future__ import annotations

import argparse

from harness.models.run_request import RunRequest


def as_request(request: RunRequest | argparse.Namespace) -> RunRequest:
    """The run's request; a parsed command line (as the run's handler, and older callers and tests, hold one)
    is converted here, once, and read no further."""
    if isinstance(request, RunRequest):
        return request
    return RunRequest.from_flags(vars(request))
