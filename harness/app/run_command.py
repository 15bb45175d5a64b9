"""`harness run`: resolve settings, lock or resume the scoresheet, build the run, run it.

Torque is released on every way out: the engine releases it whenever its run ends, and
`RunSetup.close` releases it again and disconnects on normal end, exception, Ctrl-C and SIGTERM.
A pause (fault, emergency stop, abort) propagates as `RunPaused`; the CLI maps it to exit 3.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from harness.app.build import FrontEnd, RunSetup, check_policy_fits_robot, check_run_flags, prepare_run, video_mode
from harness.app.compare_run import comparison_refs, run_comparison
from harness.app.operator_parts import placement_files
from harness.app.parallel import check_workers, run_parallel
from harness.app.parts import Parts
from harness.app.sheet import rename_map_from, resolve_sheet, sheet_path, trials_to_run
from harness.app.third_party_log import third_party_output_to
from harness.errors import HarnessInputError
from harness.models.lock import WriterLock
from harness.models.protocol import Protocol, load_protocol
from harness.models.scoresheet import Scoresheet
from harness.policies.base import EvalPolicy
from harness.reports.summary import format_summary, summarize
from harness.run.terminal import StopKey, TerminalObserver


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _asking(observer: object) -> Callable[[], bool]:
    """Whether plain mode's engine is blocked on a typed line (a caller's own observer never is)."""
    if isinstance(observer, TerminalObserver):
        return lambda: observer.asking
    return lambda: False


def wants_tui(args: argparse.Namespace) -> bool:
    return not args.headless and sys.stdin.isatty() and sys.stdout.isatty()


def parallel(args: argparse.Namespace) -> bool:
    """`--workers` above one, or a Ray cluster named: the trials go to parallel workers."""
    return (getattr(args, "workers", 1) > 1 or bool(getattr(args, "address", None))
            or getattr(args, "on_ray", False) or getattr(args, "no_driver_worker", False))


def run_from_args(args: argparse.Namespace, parts: Parts | None = None, observer: Any = None) -> int:
    """Check everything that needs no lock first, so bad input leaves nothing behind: flags, the
    protocol, the scoresheet to resume (read and verified), the policy (loaded). Then the writer
    locks (the scoresheet and its runs folder, held to the end, so a second run or a `measure` is
    refused naming this one), the robot and cameras, and only then is a new sheet written."""
    check_run_flags(args)
    protocol_path = Path(args.protocol)
    protocol = load_protocol(protocol_path)
    refs = comparison_refs(args, protocol)   # two or more policies: a blind comparison (app/compare_run.py)
    if refs is not None:
        return run_comparison(args, protocol, refs, FrontEnd.TUI if wants_tui(args) else FrontEnd.PLAIN,
                              _third_party_output, parts)
    rename_map_from(args, protocol)
    placement_files(args, protocol)   # --bowl-calibration, --trained-spot, --placement-tolerance
    path = sheet_path(args, protocol, protocol_path)
    sheet, created = resolve_sheet(args, protocol, protocol_path, path, create=False)
    mode = video_mode(args, sheet.locked.robot)   # --video on a real arm: refused before anything is locked
    check_policy_fits_robot(sheet.locked.policy.ref, sheet.locked.robot)
    if getattr(args, "workers", 1) == "auto":
        from harness.app.scaling import auto_workers

        pending = len(sheet.pending_trials())
        args.workers = auto_workers(pending, mode=mode) if sheet.locked.robot.simulated else 1
        print(f"--workers auto: {args.workers} for {pending} trials on {sheet.locked.robot} "
              f"({'serial' if args.workers == 1 else 'Ray workers'})", file=sys.stderr, flush=True)
    check_workers(args, sheet.locked.robot)
    if sheet.complete:
        print(f"{sheet.path}: all {sheet.locked.trial_count} trials are scored.\n")
        print(format_summary(summarize(sheet)))
        return 0
    parts = parts or Parts()
    policy = parts.policy(sheet.locked.policy.ref, protocol, sheet.settings, args.device, sheet.locked.robot,
                          sheet.inference)
    handed_over = False
    try:
        with WriterLock(path, "harness run") as writer, \
                WriterLock(Path(args.runs_dir) / path.stem, "harness run", folder=True):
            if writer.took_over is not None:
                print(f"note: {path}: took over the lock of {writer.took_over.describe()}, which is no longer "
                      "running", file=sys.stderr)
            if sheet.changed_on_disk():   # written between the read and the lock: read it again
                sheet, created = resolve_sheet(args, protocol, protocol_path, path, create=False)
            sheet.hold_writer_lock(writer)
            handed_over = True
            log = Path(args.runs_dir) / path.stem / "third_party.log"
            try:
                with _third_party_output(args, path):
                    return _run_locked(args, protocol, sheet, created, parts, policy, observer)
            except BaseException as exc:
                if created and not path.exists():   # refused before the sheet was written: leave nothing
                    log.unlink(missing_ok=True)
                if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError) and exc.filename is None:
                    raise HarnessInputError(path, None, f"cannot write ({exc.strerror or exc}): the disk is full or "
                                            "a file-size limit was reached; attempts recorded before it are "
                                            "kept") from None
                raise
    finally:
        if not handed_over:
            policy.close()


def _third_party_output(args: argparse.Namespace, path: Path) -> AbstractContextManager[object]:
    """Plain mode: encoder and decoder chatter goes to runs/<sheet>/third_party.log, not the terminal
    (the TUI owns its screen already)."""
    if wants_tui(args):
        return nullcontext()
    log = Path(args.runs_dir) / path.stem / "third_party.log"
    print(f"third-party library output (video encoders, decoders) goes to {log}", flush=True)
    return third_party_output_to(log)


def _run_locked(args: argparse.Namespace, protocol: Protocol, sheet: Scoresheet, created: bool,
                parts: Parts, policy: EvalPolicy, observer: Any = None) -> int:
    front_end = FrontEnd.TUI if wants_tui(args) else FrontEnd.PLAIN
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    setup: RunSetup | None = None
    try:
        if parallel(args):
            run_parallel(args, protocol, sheet, created, observer, parts, policy)   # the driver's worker owns it
            print()
            print(format_summary(summarize(sheet)))
            return 0
        setup = prepare_run(args, protocol, sheet, front_end, parts, policy)
        if created:
            sheet.create()   # policy loaded, robot connected, cameras there: now the sheet is locked
        if front_end is FrontEnd.TUI:
            from harness.app.tui_run import make_app

            code = make_app(setup).run()
            print(format_summary(summarize(sheet)))
            return code if isinstance(code, int) else 0
        for warning in setup.robot.connect_warnings:   # the TUI shows these on its check screen
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        print(f"{sheet.path}: {trials_to_run(sheet, args.max_trials)} "
              f"({sheet.locked.policy.ref} on {sheet.locked.robot})", flush=True)
        if setup.dataset is not None:
            width, height = setup.dataset.size
            print(f"dataset: {setup.dataset.root} (LeRobot v3.0, {width}x{height} {setup.dataset.options.vcodec}, "
                  f"one episode per attempt)", flush=True)
        with StopKey(setup.robot, _asking(setup.observer)):
            setup.engine.run()
    except KeyboardInterrupt:
        print("harness: interrupted; scored trials are saved. Continue with --resume.", file=sys.stderr)
        return 130
    finally:
        if setup is not None:
            setup.close()
        signal.signal(signal.SIGTERM, previous)
    print()
    print(format_summary(summarize(sheet)))
    return 0

