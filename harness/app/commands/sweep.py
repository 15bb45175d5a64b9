"""`harness sweep`: the parser; the command itself is `harness.app.sweep_command`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def sweep(args: argparse.Namespace) -> int:
    from harness.app.sweep_command import report_only, run_sweep

    if args.report:
        return report_only(Path(args.spec), Path(args.scoresheets_dir))
    return run_sweep(Path(args.spec), args.resume, args.address, Path(args.runs_dir), Path(args.scoresheets_dir))


def register(sub: Any) -> None:
    parser = sub.add_parser("sweep", help="every checkpoint x protocol x condition on Ray workers, then a report "
                                          "that says which checkpoint to ship")
    parser.add_argument("spec", help="sweep file (YAML): name, checkpoints, protocols, conditions, workers")
    parser.add_argument("--resume", action="store_true", help="continue a sweep: scored cells are skipped")
    parser.add_argument("--address", help="an existing Ray cluster (default: a local Ray runtime)")
    parser.add_argument("--runs-dir", default="runs", help="where evidence goes (default runs/<sweep>/)")
    parser.add_argument("--scoresheets-dir", default="scoresheets",
                        help="the cells' scoresheets go to DIR/<sweep name>/ (default scoresheets/)")
    parser.add_argument("--report", action="store_true", help="only (re)write the sweep report from its scoresheets")
    parser.set_defaults(func=sweep)
