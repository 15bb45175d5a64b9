"""`harness twin`: a real-arm run's scored attempts again in the simulated arm (see `harness.app.twin`)."""

from __future__ import annotations

import argparse
from typing import Any


def twin(args: argparse.Namespace) -> int:
    """The command line becomes a `TwinRequest`, once; `app.twin` reads no parsed argument."""
    from harness.app.twin import run_twin
    from harness.models.twin_request import TwinRequest

    return run_twin(TwinRequest.from_flags(vars(args)))


def register(sub: Any) -> None:
    from harness.app.commands.run import workers_type

    parser = sub.add_parser("twin", help="re-run every scored attempt of a real-arm (or rehearsed) scoresheet in "
                                         "the simulated arm, from each attempt's measured start, into a twin "
                                         "scoresheet; `harness report TWIN_SHEET` says how well the twin predicts")
    parser.add_argument("real_sheet", help="the real run's scoresheet (--robot so101, or harness rehearse's)")
    parser.add_argument("--scoresheet", help="the twin's scoresheet (default: beside the real one, <name>-twin.yaml)")
    parser.add_argument("--runs-dir", default="runs", help="where the twin's per-trial evidence goes (default runs/)")
    parser.add_argument("--twins-dir", default="twins",
                        help="where the twin's protocol (the real starts as trials) is written (default twins/)")
    parser.add_argument("--resume", action="store_true", help="continue the twin's scoresheet where it stopped")
    parser.add_argument("--workers", type=workers_type(), default=1, metavar="N|auto",
                        help="run the twin's trials on N Ray workers, as `harness run --workers` does")
    parser.add_argument("--device", help="torch device for the policy (default: cuda if available)")
    parser.add_argument("--max-trials", type=int, help="stop after this many attempts (the twin stays resumable)")
    parser.add_argument("--extra", type=int, metavar="N",
                        help="also run N trials at the protocol's own starts, drawn at random: the twin's success rate "
                             "for the report's twin-assisted estimate of the real rate (docs/twin.md)")
    parser.set_defaults(func=twin)
