"""harness: evaluate learned SO-101 policies against pre-registered protocols.

From Python, a run is one typed request (docs/programmatic.md)::

    from harness import RunRequest, evaluate
    evaluate(RunRequest(protocol="protocols/randomized.yaml", policies=("expert",), headless=True))
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["RunRequest", "evaluate"]

if TYPE_CHECKING:
    from harness.models.run_request import RunRequest


def evaluate(request: RunRequest) -> int:
    """Run what `request` asks for, exactly as `harness run` would (resolve or resume the scoresheet, build,
    run, close); returns the command's exit code (0: done, 130: interrupted). Named `evaluate` because
    `harness.run` is the package that runs protocols. Bad input raises `HarnessInputError` before anything is
    written; a pause raises `RunPaused` (the run is resumable with `resume=True`)."""
    if _importing_the_script_in_a_child():
        # A process the run started (an evidence lane) is importing the caller's script: running again here would
        # start processes of its own and wait on the scoresheet its parent holds. Leave at once; the parent names
        # the cause from this exit code.
        from harness.errors import EXIT_SCRIPT_REIMPORTED, SCRIPT_REIMPORTED_ADVICE

        print(f"harness: error: not run in this child process: {SCRIPT_REIMPORTED_ADVICE}", file=sys.stderr)
        raise SystemExit(EXIT_SCRIPT_REIMPORTED)
    from harness.app.run_command import run_request

    return run_request(request)


def _importing_the_script_in_a_child() -> bool:
    """True while a `multiprocessing` child imports the main script: the flag multiprocessing's own check
    (`spawn._check_not_importing_main`) reads, set by spawn and forkserver children until the script is imported."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def __getattr__(name: str) -> Any:
    if name == "RunRequest":   # lazily: `import harness` stays as light as the CLI's start needs
        from harness.models.run_request import RunRequest

        return RunRequest
    raise AttributeError(name)
