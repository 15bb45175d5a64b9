"""The `harness` command: parse arguments, set up logging, dispatch, and map errors to exit codes.

Each subcommand is one module in `harness/app/commands/` with a `register(sub)` that adds its
parser and handler; adding a command is adding a module and one entry to `COMMANDS`. This file
is the only place that turns a `HarnessError` into a printed line and an exit code.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from harness.app.commands import bus, collect, data, plan, protocol, rehearse, replay, report, run, sweep, vision
from harness.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, HarnessError

COMMANDS = (protocol, report, plan, vision, data, bus, run, replay, sweep, collect, rehearse)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (not the usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="harness", description="Evaluate learned SO-101 policies.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log what happens on stderr: -v engine phases and trials, -vv also bus and "
                             "camera timings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def configure_logging(verbosity: int) -> None:
    """Warnings always; -v: INFO (engine phases, trials); -vv: DEBUG (bus traffic, camera frame ages)."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("harness").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    # Nothing in this project reaches the network: LeRobot and the Hub must not try to download.
    os.environ["HF_HUB_OFFLINE"] = "1"
    args = build_parser().parse_args(argv)   # a bad flag: one line, SystemExit(2)
    configure_logging(args.verbose)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except HarnessError as err:
        print(err.cli_message(), file=sys.stderr)
        return err.exit_code
    except OSError as err:   # a file the command could not read or write: still one line, nothing half-written
        where = f"{err.filename}: " if err.filename else ""
        print(f"harness: error: {where}{err.strerror or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script: `main`, then an exit that skips the interpreter's native teardown.

    pyarrow (every parquet read) leaves C++ thread pools that, at interpreter teardown, now and then
    abort the process (`terminate called without an active exception`, exit 134) after the command
    has done its work and printed its verdict (apache/arrow#34314). Everything Python promises at
    exit still happens here, in Python's own order: non-daemon threads are joined, atexit handlers
    run (Ray's shutdown, multiprocessing's joins, temporary folders), the streams are flushed. Only
    the C++ static destructors are skipped; every file this project writes is already closed,
    fsynced and renamed by then.
    """
    code = main(argv)
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):   # a closed pipe (`harness ... | head`)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
