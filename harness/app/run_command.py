"""`harness run`: resolve settings, lock or resume the scoresheet, build the run, run it.

Torque is released on every way out: the engine releases it whenever its run ends, and
`RunSetup.close` releases it again and disconnects on normal end, exception, Ctrl-C and SIGTERM.
A pause (fault, emergency stop, abort) propagates as `RunPaused`; the CLI maps it to exit 3.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from harness.app.build import FrontEnd, RunSetup, prepare_run
from harness.app.parts import Parts
from harness.app.sheet import resolve_sheet
from harness.models.protocol import load_protocol
from harness.models.scoresheet import load_scoresheet
from harness.reports.summary import format_summary, summarize


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def wants_tui(args: argparse.Namespace) -> bool:
    return not args.headless and sys.stdin.isatty() and sys.stdout.isatty()


def run_from_args(args: argparse.Namespace, parts: Parts | None = None) -> int:
    protocol_path = Path(args.protocol)
    protocol = load_protocol(protocol_path)
    sheet, created = resolve_sheet(args, protocol, protocol_path)
    if sheet.complete:
        print(f"{sheet.path}: all {sheet.locked.trial_count} trials are scored.\n")
        print(format_summary(summarize(sheet)))
        return 0
    front_end = FrontEnd.TUI if wants_tui(args) else FrontEnd.PLAIN
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    setup: RunSetup | None = None
    try:
        try:
            setup = prepare_run(args, protocol, sheet, front_end, parts)
        except BaseException:
            if created:
                sheet.path.unlink(missing_ok=True)  # bad input, or an arm that never connected: nothing locked
            raise
        if front_end is FrontEnd.TUI:
            from harness.app.tui import make_app

            code = make_app(setup).run()
            print(format_summary(summarize(load_scoresheet(sheet.path))))
            return code if isinstance(code, int) else 0
        pending = len(sheet.pending_trials())
        print(f"{sheet.path}: {pending} of {sheet.locked.trial_count} trials to run "
              f"({sheet.locked.policy.ref} on {sheet.locked.robot})", flush=True)
        setup.engine.run()
    except KeyboardInterrupt:
        print("harness: interrupted; scored trials are saved. Continue with --resume.", file=sys.stderr)
        return 130
    finally:
        if setup is not None:
            setup.close()
        signal.signal(signal.SIGTERM, previous)
    print()
    print(format_summary(summarize(load_scoresheet(sheet.path))))
    return 0
