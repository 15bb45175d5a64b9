"""`harness run`: the parser, built from `models.run_request.RUN_FLAGS`; the command itself is
`harness.app.run_command`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.models.run_request import RunFlag


def run(args: argparse.Namespace) -> int:
    from harness.app.run_command import run_from_args

    return run_from_args(args)


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run a protocol, trial by trial (resumable)")
    add_run_flags(parser)
    parser.set_defaults(func=run)


def add_run_flags(parser: argparse.ArgumentParser, skip: Collection[str] = (),
                  flags: Mapping[str, RunFlag] | None = None) -> None:
    """Every `harness run` flag (`RUN_FLAGS`: each defined once, on the `RunRequest` field it sets; or `flags`)
    but those whose destination is in `skip`: `harness rehearse` takes the run's flags it does not decide itself,
    so a new flag reaches rehearsals at once."""
    from harness.models.run_request import RUN_FLAGS

    for dest, spec in (RUN_FLAGS if flags is None else flags).items():
        if dest in skip:
            continue
        if not spec.option:
            parser.add_argument(spec.flag)
            continue
        kwargs: dict[str, Any] = {"help": spec.help}
        if dest != spec.flag.lstrip("-").replace("-", "_"):
            kwargs["dest"] = dest
        if spec.switch:
            parser.add_argument(spec.flag, action="store_true", **kwargs)
            continue
        if spec.repeat:
            kwargs["action"] = "append"
        if spec.optional_value:
            kwargs.update(nargs="?", const="")
        if spec.metavar is not None:
            kwargs["metavar"] = spec.metavar
        if spec.choices is not None:
            kwargs["choices"] = list(spec.choices)
        kind = argument_type(spec.parse) if spec.early else spec.type
        if kind is not None:
            kwargs["type"] = kind
        parser.add_argument(spec.flag, default=spec.default, **kwargs)


def argument_type(parse: Callable[[Any], tuple[Any, ...]]) -> Callable[[str], Any]:
    """A flag's own parser as argparse's `type`: a bad value is argparse's usage error with the parser's reason."""

    def convert(text: str) -> Any:
        try:
            (value,) = parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    convert.__name__ = parse.__name__.lstrip("_")
    return convert


def workers_type() -> Callable[[str], Any]:
    """`--workers N|auto` as `harness run` reads it, for the commands that take it too (`harness twin`)."""
    from harness.models.run_request import RUN_FLAGS

    return argument_type(RUN_FLAGS["workers"].parse)
