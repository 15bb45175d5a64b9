"""`harness protocol new|check`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def new(args: argparse.Namespace) -> int:
    from harness.models.protocol import (
        Generator,
        Scene,
        Trial,
        check_generator_inputs,
        generate_randomized_trials,
        protocol_to_yaml,
    )
    from harness.storage.atomic import write_text_atomic

    check_generator_inputs(args.n, args.radius_cm, args.min_spacing_cm, args.seed, args.max_yaw_deg)
    scene = Scene()
    if args.randomized:
        trials = generate_randomized_trials(scene, args.n, args.radius_cm, args.min_spacing_cm, args.seed,
                                            args.max_yaw_deg)
        generator = Generator(kind="randomized", n=args.n, radius_cm=args.radius_cm,
                              min_spacing_cm=args.min_spacing_cm, seed=args.seed, max_yaw_deg=args.max_yaw_deg)
    else:
        trials = [Trial(index=i + 1, dx_cm=0.0, dy_cm=0.0) for i in range(args.n)]
        generator = Generator(kind="fixed", n=args.n)
    if not args.time_limit_s > 0:
        raise HarnessInputError(None, "--time-limit-s", f"{args.time_limit_s}: must be positive")
    from pydantic import ValidationError

    for flag, text in (("--name", args.name), ("--task", args.task)):
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError:   # undecodable bytes on the command line arrive as surrogates
            raise HarnessInputError(None, flag, "not UTF-8 text") from None
    try:
        protocol = _new_protocol(args, scene, generator, trials)
    except ValidationError as exc:   # e.g. a name (from -o's stem) longer than a protocol allows
        first = exc.errors()[0]
        field = "--name" if first["loc"][:1] == ("name",) and args.name else ".".join(map(str, first["loc"]))
        raise HarnessInputError(args.output, field, first["msg"]) from None
    out = Path(args.output)
    if out.exists() and not args.force:
        raise HarnessInputError(out, None, "exists; pass --force to overwrite")
    write_text_atomic(out, protocol_to_yaml(protocol))
    print(f"wrote {out}: {len(trials)} trials")
    return 0


def _new_protocol(args: argparse.Namespace, scene: Any, generator: Any, trials: list[Any]) -> Any:
    """The protocol `new` writes, validated by its model (which may refuse, e.g., a too-long name)."""
    from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS, DEFAULT_TASK
    from harness.models.protocol import Protocol, RunDefaults
    from harness.models.run_settings import BuiltinPolicy, RobotKind

    return Protocol(
        name=args.name or Path(args.output).stem,
        task=args.task or DEFAULT_TASK,
        scene=scene,
        start_pose=dict(DEFAULT_START_POSE),
        success_definition=DEFAULT_SUCCESS,
        generator=generator,
        run=RunDefaults(robot=RobotKind.SIM, policy=BuiltinPolicy.EXPERT.value),
        fps=args.fps,
        episode_time_limit_s=args.time_limit_s,
        trials=trials,
    )


def check(args: argparse.Namespace) -> int:
    from harness.models.protocol import load_protocol

    protocol = load_protocol(args.protocol)
    note = _check_sequential_cap(protocol, Path(args.protocol))
    print(f"{args.protocol}: ok, '{protocol.name}', {len(protocol.trials)} trials at {protocol.fps} Hz{note}")
    return 0


def _check_sequential_cap(protocol: Any, path: Path) -> str:
    """The cap check `harness run` applies at the lock (`sequential.locked_design`), so a protocol that checks
    clean runs. The number of comparisons comes from the rule's `comparisons`, else every pair of
    `run.policies`; with neither, the policies are only known at run time: checked for one comparison (two
    policies) and the returned note says so, since more policies need a larger cap."""
    from harness.models.comparison import arm_codes, default_comparisons
    from harness.stats import sequential

    rule = protocol.stopping_rule
    if rule.kind != "sequential" or rule.min_difference is None or rule.max_trials_per_arm is None:
        return ""
    note = ""
    if rule.comparisons:
        count = len(rule.comparisons)
    elif protocol.run.policies and len(protocol.run.policies) >= 2:
        try:
            count = len(default_comparisons(arm_codes(len(protocol.run.policies))))
        except ValueError as exc:
            raise HarnessInputError(path, "run.policies", str(exc)) from None
    else:
        count, note = 1, "; cap checked for 2 policies (1 comparison): more --policy flags need a larger one"
    try:
        sequential.locked_design(rule.alpha, rule.power, rule.min_difference, count, rule.max_trials_per_arm)
    except ValueError as exc:
        raise HarnessInputError(path, "stopping_rule.max_trials_per_arm", str(exc)) from None
    return note


def register(sub: Any) -> None:
    protocol = sub.add_parser("protocol", help="create or check protocol files")
    psub = protocol.add_subparsers(dest="protocol_command", required=True, metavar="ACTION")
    parser = psub.add_parser("new", help="write a new protocol YAML")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--randomized", action="store_true", help="cube offsets drawn over a disc")
    kind.add_argument("--fixed", action="store_true", help="every trial at the trained position")
    parser.add_argument("--n", type=int, default=50, help="number of trials (default 50)")
    parser.add_argument("--radius-cm", type=float, default=6.0, help="largest offset from the trained position")
    parser.add_argument("--min-spacing-cm", type=float, default=1.0, help="smallest distance between two offsets")
    parser.add_argument("--max-yaw-deg", type=float, default=0.0, help="cube yaw drawn from +-this (default 0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", help="protocol name (default: the file's stem)")
    parser.add_argument("--task", help="task instruction given to the policy")
    parser.add_argument("--fps", type=int, choices=[30, 60], default=30,
                        help="control rate; the simulator holds each action for 300/fps physics steps (default 30)")
    parser.add_argument("--time-limit-s", type=float, default=20.0, help="episode time limit (default 20)")
    parser.add_argument("-o", "--output", required=True, help="protocol file to write")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.set_defaults(func=new)
    checker = psub.add_parser("check", help="validate a protocol file")
    checker.add_argument("protocol")
    checker.set_defaults(func=check)
