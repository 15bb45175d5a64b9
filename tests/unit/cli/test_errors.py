"""One exception hierarchy: each class carries its exit code and its one printed line."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.errors import (
    EXIT_BAD_INPUT,
    EXIT_PAUSED,
    BusError,
    EmergencyStopped,
    HarnessError,
    HarnessInputError,
    NoServoAnswers,
    RobotFault,
    RunPaused,
    StaleRunError,
)
from harness.models.taxonomy import Void, VoidKind


def test_exit_codes_ride_on_the_class() -> None:
    assert HarnessInputError("f.yaml", "trials", "empty").exit_code == EXIT_BAD_INPUT
    assert StaleRunError("f.yaml", "policy.ref", "changed").exit_code == EXIT_BAD_INPUT
    assert RunPaused(Void(VoidKind.EMERGENCY_STOP)).exit_code == EXIT_PAUSED
    assert EmergencyStopped("stop").exit_code == RobotFault("x").exit_code == HarnessError("x").exit_code == 1


def test_bus_errors_are_runtime_errors_too_and_told_apart_by_class() -> None:
    with pytest.raises(RuntimeError):
        raise NoServoAnswers("no servo answers at this baud rate")
    assert issubclass(NoServoAnswers, BusError) and not issubclass(BusError, NoServoAnswers)


def test_a_pause_says_why_and_how_to_continue() -> None:
    paused = RunPaused(Void(VoidKind.CAMERA_DROPOUT, "top repeated the same frame for 1.0 s"))
    assert paused.cli_message() == ("harness: run paused: camera dropout: top repeated the same frame for 1.0 s. "
                                    "Fix the cause, then run again with --resume.")
    assert paused.void.kind.pauses_run


def test_the_cli_boundary_prints_one_line_and_returns_the_class_exit_code(tmp_path, capsys) -> None:
    assert main(["protocol", "check", str(tmp_path / "missing.yaml")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ") and err.count("\n") == 1 and "missing.yaml" in err


def test_an_operator_void_keeps_the_operators_words() -> None:
    assert Void(VoidKind.OPERATOR_VOID, "cube bumped").reason == "cube bumped"
    assert Void(VoidKind.OPERATOR_VOID).reason == "voided by operator"
    assert Void(VoidKind.ROBOT_IO_ERROR, "ConnectionError: no status packet").reason.startswith("robot I/O error: ")


def test_every_exception_the_package_defines_is_a_harness_error() -> None:
    """A user meets only `HarnessError`s: each carries its exit code and its one line."""
    import importlib
    import inspect
    import pkgutil

    import harness

    defined = []
    for info in pkgutil.walk_packages(harness.__path__, "harness."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                defined.append(cls)
    assert len(defined) >= 20, "the walk found the package's exceptions"
    outside = [f"{c.__module__}.{c.__qualname__}" for c in defined if not issubclass(c, HarnessError)]
    assert outside == []


@pytest.mark.parametrize(("raised", "code"), [
    (ConnectionError("serial link lost"), 1),
    (TimeoutError("no reply from the server"), 1),
    (FileNotFoundError(2, "No such file or directory", "missing.yaml"), EXIT_BAD_INPUT),
    (OSError(28, "No space left on device"), EXIT_BAD_INPUT),
    (OSError(5, "Input/output error"), 1),
])
def test_the_cli_maps_an_os_error_by_what_it_means(command_raising, raised, code, capsys) -> None:
    assert command_raising(raised) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("harness: error: ")


@pytest.fixture
def command_raising():
    """The CLI boundary over a parsed command whose handler raises the given error."""
    import argparse

    from harness import cli

    def run(raised: BaseException) -> int:
        def fail(args: argparse.Namespace) -> int:
            raise raised

        parser = cli.build_parser()
        args = parser.parse_args(["plan", "--p0", "0.9", "--delta", "-0.2"])
        args.func = fail
        return cli.run_parsed(args)

    return run
