"""`harness run`: resolve settings, lock or resume the scoresheet, build the run, run it.

Torque is released on every way out: the engine releases it whenever its run ends, and
`RunSetup.close` releases it again and disconnects on normal end, exception, Ctrl-C and SIGTERM.
A pause (fault, emergency stop, abort) propagates as `RunPaused`; the CLI maps it to exit 3.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, cast

from harness.app.build import FrontEnd, RunSetup, check_policy_fits_robot, check_run_request, prepare_run, video_mode
from harness.app.compare_run import comparison_refs, run_comparison
from harness.app.operator_parts import placement_files
from harness.app.parallel.runs import check_workers, run_parallel
from harness.app.parts import Parts
from harness.app.request import as_request
from harness.app.sheet import resolve_sheet, sheet_path, trials_to_run
from harness.app.third_party_log import third_party_output_to
from harness.errors import HarnessInputError
from harness.models.protocol import Protocol, load_protocol
from harness.models.run_request import RunRequest
from harness.models.run_settings import BuiltinPolicy, InferenceEngine
from harness.models.scoresheet import Scoresheet
from harness.policies.background import BackgroundPolicy
from harness.policies.base import EvalPolicy
from harness.policies.hub import pinned_ref
from harness.reports.summary import format_summary, summarize
from harness.run.terminal import StopKey, TerminalObserver
from harness.storage.lock import WriterLock


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _asking(observer: object) -> Callable[[], bool]:
    """Whether plain mode's engine is blocked on a typed line (a caller's own observer never is)."""
    if isinstance(observer, TerminalObserver):
        return lambda: observer.asking
    return lambda: False


def wants_tui(request: RunRequest) -> bool:
    return not request.headless and sys.stdin.isatty() and sys.stdout.isatty()


def run_from_args(args: argparse.Namespace, parts: Parts | None = None, observer: Any = None) -> int:
    """`harness run`'s handler: the command line becomes a `RunRequest`, once (a bad flag is one line)."""
    return run_request(as_request(args), parts, observer)


def run_request(request: RunRequest, parts: Parts | None = None, observer: Any = None) -> int:
    """Check everything that needs no lock first, so bad input leaves nothing behind: the request, the
    protocol, the scoresheet to resume (read and verified), the policy (loaded). Then the writer
    locks (the scoresheet and its runs folder, held to the end, so a second run or a `measure` is
    refused naming this one), the robot and cameras, and only then is a new sheet written. A real arm's policy
    loads in the background meanwhile: its sheet is written once it has loaded (`policies.background`). Two or
    more policies (the request's, else the protocol's `run.policies`) are a blind comparison
    (`app/compare_run.py`), built from the same request."""
    check_run_request(request)
    protocol_path = request.protocol
    protocol = load_protocol(protocol_path)
    refs = comparison_refs(request, protocol)
    if refs is not None:
        return run_comparison(request, protocol, refs, FrontEnd.TUI if wants_tui(request) else FrontEnd.PLAIN,
                              _third_party_output, parts)
    placement_files(request.placement, protocol)   # --bowl-calibration, --trained-spot: read and checked
    path = sheet_path(request, protocol, protocol_path)
    sheet, created = resolve_sheet(request, protocol, protocol_path, path, create=False)
    mode = video_mode(request, sheet.locked.robot)   # --video on a real arm: refused before anything is locked
    parts = parts or Parts()
    check_policy_fits_robot(sheet.locked.policy.ref, sheet.locked.robot, parts.emulated_truth is not None)
    if request.workers.count == "auto":
        from harness.app.parallel.scaling import auto_workers

        pending = len(sheet.pending_trials())
        count = auto_workers(pending, mode=mode) if sheet.locked.robot.simulated else 1
        request = request.updated(workers={"count": count})
        print(f"--workers auto: {count} for {pending} trials on {sheet.locked.robot} "
              f"({'serial' if count == 1 else 'Ray workers'})", file=sys.stderr, flush=True)
    check_workers(request, sheet.locked.robot)
    if sheet.complete:
        print(f"{sheet.path}: all {sheet.locked.trial_count} trials are scored.\n")
        print(format_summary(summarize(sheet)))
        return 0
    def load() -> EvalPolicy:
        loaded = parts.policy(pinned_ref(sheet.locked.policy), protocol, sheet.settings, request.device,
                              sheet.locked.robot, sheet.inference)
        # What is built by now (torch, LeRobot, transformers: half a million objects) lives as long as the run: out
        # of the collector's reach until it ends, a full collection no longer walks it holding the interpreter
        # lock (0.35 s of CPU, 1-4 s on two loaded cores: it held up the first cube prompt, issue 40, and would
        # hold up a control step).
        gc.freeze()
        return loaded

    # A real arm's serial run loads its policy beside the arm's connection and check (`policies.background`):
    # the simulator needs the policy's cameras and size to be built, a parallel run hands it to its worker, and
    # LeRobot's policy server is bad input when it does not answer, refused before the arm is touched.
    background = (not sheet.locked.robot.simulated and not request.workers.parallel
                  and sheet.inference.engine is not InferenceEngine.ASYNC)
    if background:
        check_policy_folder(pinned_ref(sheet.locked.policy))   # the plain mistake still refused before any lock
    # (an `EvalPolicy` whose `name` and `camera_keys` are read-only properties that follow the load)
    policy = cast(EvalPolicy, BackgroundPolicy(load, sheet.locked.policy.ref)) if background else load()
    handed_over = False
    try:
        with WriterLock(path, "harness run") as writer, \
                WriterLock(request.runs_dir / path.stem, "harness run", folder=True):
            if writer.took_over is not None:
                print(f"note: {path}: took over the lock of {writer.took_over.describe()}, which is no longer "
                      "running", file=sys.stderr)
            if sheet.changed_on_disk():   # written between the read and the lock: read it again
                sheet, created = resolve_sheet(request, protocol, protocol_path, path, create=False)
            sheet.hold_writer_lock(writer)
            handed_over = True
            log = request.runs_dir / path.stem / "third_party.log"
            try:
                with _third_party_output(request, path):
                    return _run_locked(request, protocol, sheet, created, parts, policy, observer)
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
        gc.unfreeze()   # the run's objects collectable again: a process running runs one after another keeps none


def check_policy_folder(ref: str) -> None:
    """A folder that is not a LeRobot policy at all, refused in one line before anything is locked or
    connected, as a policy loaded up front would be (one that fails later, loading, leaves no sheet)."""
    if BuiltinPolicy.named(ref) is not None:
        return
    from harness.policies.hub import checkpoint_folder

    folder = Path(checkpoint_folder(ref))
    if not (folder / "config.json").is_file():
        raise HarnessInputError(folder, "config.json", "not a LeRobot pretrained policy folder")


def _third_party_output(request: RunRequest, path: Path) -> AbstractContextManager[object]:
    """Plain mode: encoder and decoder chatter goes to runs/<sheet>/third_party.log, not the terminal
    (the TUI owns its screen already)."""
    if wants_tui(request):
        return nullcontext()
    log = request.runs_dir / path.stem / "third_party.log"
    print(f"third-party library output (video encoders, decoders) goes to {log}", flush=True)
    return third_party_output_to(log)


def _run_locked(request: RunRequest, protocol: Protocol, sheet: Scoresheet, created: bool,
                parts: Parts, policy: EvalPolicy, observer: Any = None) -> int:
    front_end = FrontEnd.TUI if wants_tui(request) else FrontEnd.PLAIN
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    setup: RunSetup | None = None
    try:
        if request.workers.parallel:
            run_parallel(request, protocol, sheet, created, observer, parts, policy)   # the driver's worker owns it
            print()
            print(format_summary(summarize(sheet)))
            return 0
        setup = prepare_run(request, protocol, sheet, front_end, parts, policy)
        if created and isinstance(policy, BackgroundPolicy):   # written once the policy has loaded and fits
            policy.on_ready(lambda _: sheet.create())
        elif created:
            sheet.create()   # policy loaded, robot connected, cameras there: now the sheet is locked
        if front_end is FrontEnd.TUI:
            from harness.app.tui_run import make_app

            code = make_app(setup).run()
            print(format_summary(summarize(sheet)))
            return code if isinstance(code, int) else 0
        for warning in setup.robot.connect_warnings:   # the TUI shows these on its check screen
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        print(f"{sheet.path}: {trials_to_run(sheet, request.max_trials)} "
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

