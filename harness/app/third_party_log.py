"""Third-party output (video encoders, libav, torchcodec's fallback traceback) into a log file, not the
terminal. Recording a dataset printed two thousand lines of x264/SVT-AV1 and decoder chatter on
stderr, burying the harness's own lines; they are kept, in the run's folder, for whoever needs them.

C libraries write to file descriptor 2 directly, so the descriptor itself is pointed at the log;
Python's `sys.stderr` keeps the terminal, and log records from outside `harness` go to the file.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class _OnlyHarness(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == "harness" or record.name.startswith("harness.")


@contextmanager
def third_party_output_to(path: Path) -> Iterator[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    terminal_fd = os.dup(2)
    terminal = os.fdopen(terminal_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    previous = sys.stderr
    root = logging.getLogger()
    moved = [h for h in root.handlers if isinstance(h, logging.StreamHandler)
             and getattr(h.stream, "fileno", None) is not None and _fd(h.stream) == 2]
    only_harness = _OnlyHarness()
    with path.open("ab") as log:
        file_handler = logging.StreamHandler(open(log.fileno(), "w", closefd=False, encoding="utf-8"))  # noqa: SIM115
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname).1s %(name)s: %(message)s"))
        file_handler.addFilter(lambda record: not only_harness.filter(record))
        os.dup2(log.fileno(), 2)
        sys.stderr = terminal
        for handler in moved:
            handler.setStream(terminal)
            handler.addFilter(only_harness)
        root.addHandler(file_handler)
        bars = _quiet_progress_bars()
        try:
            yield path
        finally:
            bars()
            root.removeHandler(file_handler)
            for handler in moved:
                handler.removeFilter(only_harness)
                handler.setStream(previous)
            sys.stderr = previous
            terminal.flush()
            os.dup2(terminal_fd, 2)
            terminal.close()


def _quiet_progress_bars() -> Callable[[], None]:
    """Hugging Face `datasets` draws a progress bar per saved episode on Python's stderr; off for the
    window (set before its import, or switched off if it is loaded). Returns the undo."""
    previous = os.environ.get("HF_DATASETS_DISABLE_PROGRESS_BARS")
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    module = sys.modules.get("datasets")
    enabled_before = module.is_progress_bar_enabled() if module is not None else True
    if module is not None:
        module.disable_progress_bars()

    def undo() -> None:
        if previous is None:
            os.environ.pop("HF_DATASETS_DISABLE_PROGRESS_BARS", None)
        else:
            os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = previous
        loaded = sys.modules.get("datasets")
        if loaded is not None and enabled_before:
            loaded.enable_progress_bars()

    return undo


def _fd(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return None
