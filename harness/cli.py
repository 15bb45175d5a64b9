"""The `harness` command: parse arguments, set up logging, dispatch, and map errors to exit codes.

Each subcommand is one module in `harness/app/commands/` with a `register(sub)` that adds its
parser and handler; adding a command is adding a module and one entry to `COMMANDS`. This file
is the only place that turns a `HarnessError` into a printed line and an exit code.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from harness.app.commands import (
    bus,
    collect,
    data,
    plan,
    protocol,
    rehearse,
    replay,
    report,
    run,
    score,
    sheet,
    smolvla,
    sweep,
    twin,
    vision,
)
from harness.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_INTERRUPTED, HarnessError
from harness.scratch import own_temporary_folder, remove_orphans

FILE_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.ENOSPC,
                         errno.EFBIG, errno.EROFS, errno.ENAMETOOLONG, errno.EEXIST, errno.EDQUOT})
EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away

COMMANDS = (protocol, report, plan, vision, data, score, bus, run, replay, sweep, collect, rehearse, twin, smolvla,
            sheet)


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
    args = build_parser().parse_args(argv)   # a bad flag: one line, SystemExit(2)
    configure_logging(args.verbose)
    remove_orphans()   # the scratch folders of runs that were killed (harness/scratch.py)
    own_temporary_folder()   # what libraries leave in the temporary folder goes with this process
    return run_parsed(args)


def run_parsed(args: argparse.Namespace) -> int:
    """Run a parsed command; the one place an error becomes its printed line and exit code."""
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except HarnessError as err:
        print(" ".join(err.cli_message().splitlines()), file=sys.stderr)   # one line, whatever the message holds
        return err.exit_code
    except BrokenPipeError:   # `harness report ... | head`: the reader has all it wanted; end quietly, as Unix tools do
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the final flush must not fail
        return EXIT_BROKEN_PIPE
    except (ConnectionError, TimeoutError) as err:   # a link lost (serial, socket, server): not the user's input
        print(f"harness: error: {type(err).__name__}: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        print(f"harness: error: {where}{err.strerror or err}", file=sys.stderr)
        # a file the command could not read or write (missing, forbidden, no room): one line, nothing half-written
        return EXIT_BAD_INPUT if err.filename or err.errno in FILE_ERRNOS else EXIT_ERROR
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
