"""harness: evaluate learned SO-101 policies against pre-registered protocols.

From Python, a run is one typed request (docs/programmatic.md)::

    from harness import RunRequest, evaluate
    evaluate(RunRequest(protocol="protocols/randomized.yaml", policies=("expert",), headless=True))
"""

from __future__ import annotations

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
    from harness.app.run_command import run_request

    return run_request(request)


def __getattr__(name: str) -> Any:
    if name == "RunRequest":   # lazily: `import harness` stays as light as the CLI's start needs
        from harness.models.run_request import RunRequest

        return RunRequest
    raise AttributeError(name)
