"""`harness plan`: trials needed to detect a difference, and interval widths to expect."""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import HarnessInputError

TWIN_TRIALS = 1000   # --twin-trials' default; None on the namespace says the flag was not given


def plan(args: argparse.Namespace) -> int:
    import math

    from harness.stats.estimates import expected_wilson_width, trials_needed

    for flag, value in (("--p0", args.p0), ("--alpha", args.alpha), ("--power", args.power)):
        if not (math.isfinite(value) and 0 < value < 1):
            raise HarnessInputError(None, flag, f"{value}: must be strictly between 0 and 1")
    if args.width is not None:
        if args.delta is not None:
            raise HarnessInputError(None, "--width/--delta", "give one: --delta plans a difference to detect, "
                                                             "--width an interval's width")
        return plan_width(args)
    for flag, value in (("--twin-agreement", args.twin_agreement), ("--twin-trials", args.twin_trials)):
        if value is not None:
            raise HarnessInputError(None, flag, "goes with --width (real trials for an interval with the twin); "
                                                "--delta plans a difference alone")
    if args.delta is None:
        raise HarnessInputError(None, "--delta", "give the difference to detect (--delta) or a target interval "
                                                 "width (--width)")
    if not math.isfinite(args.delta) or args.delta == 0:
        raise HarnessInputError(None, "--delta", f"{args.delta}: the difference to detect must be a number other "
                                                 "than 0")
    if not 0 < args.p0 + args.delta < 1:
        raise HarnessInputError(None, "--delta", f"{args.delta}: p0 + delta must be strictly between 0 and 1")
    try:
        n = trials_needed(args.p0, args.delta, args.alpha, args.power)
    except ValueError as exc:
        raise HarnessInputError(None, "--p0/--delta", str(exc)) from None
    p1 = args.p0 + args.delta
    print(f"To detect {100 * args.p0:.0f}% -> {100 * p1:.0f}% (alpha {args.alpha}, power {args.power}, two-sided):")
    print(f"  {n} trials per policy (independent runs; pairing on one protocol usually needs fewer)")
    print("\nExpected 95% Wilson interval width for one policy:")
    for size in sorted({20, 50, 100, n}):
        print(f"  {size:>5} trials at {100 * args.p0:.0f}%: +-{50 * expected_wilson_width(args.p0, size):.1f} points")
    return 0


def _agreement(text: str) -> float:
    """`0.95`, `95%` or `57/60`: the twin's measured agreement on success."""
    try:
        if "/" in text:
            agreed, of = (int(part) for part in text.split("/", 1))
            if not 0 <= agreed <= of or of == 0:
                raise ValueError
            return agreed / of
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise HarnessInputError(None, "--twin-agreement", f"{text!r}: a share (0.95), a percentage (95%) or a "
                                                          "count (57/60)") from None
    if not 0 <= value <= 1:
        raise HarnessInputError(None, "--twin-agreement", f"{text!r}: must be between 0 and 1")
    return value


def plan_width(args: argparse.Namespace) -> int:
    """Real trials for a 95% interval of the target width, alone and with the twin (`harness.stats.ppi`)."""
    import math

    from harness.stats.ppi import real_trials_for_width

    if not (math.isfinite(args.width) and 0 < args.width < 1):
        raise HarnessInputError(None, "--width", f"{args.width}: must be strictly between 0 and 1")
    twin_trials = TWIN_TRIALS if args.twin_trials is None else args.twin_trials
    if twin_trials < 1:
        raise HarnessInputError(None, "--twin-trials", f"{twin_trials}: must be at least 1")
    # every input checked before the first line: a refusal never follows half a report
    agreement = None if args.twin_agreement is None else _agreement(args.twin_agreement)
    alone = real_trials_for_width(args.p0, None, args.width)
    points = f"{100 * args.width:.0f} points wide"
    print(f"A 95% interval {points} around a success rate of {100 * args.p0:.0f}%:")
    print(f"  real trials alone (Wilson): {alone if alone is not None else 'more than 5000'}")
    if agreement is None:
        print("  with the twin: give --twin-agreement (what `harness report TWIN_SHEET` measured, e.g. 57/60)")
        return 0
    helped = real_trials_for_width(args.p0, agreement, args.width, twin_trials)
    saving = ""
    if helped is not None and alone:
        change = round(100 * (1 - helped / alone))
        saving = f" ({change}% fewer)" if change >= 0 else f" ({-change}% more: the twin agrees too seldom to help)"
    print(f"  with the twin (agreeing on {100 * agreement:.0f}% of attempts, {twin_trials} twin trials from "
          f"`harness twin --extra`): {helped if helped is not None else 'more than 5000'} real trials{saving}")
    print("  (the twin-assisted interval stays valid however good the twin is; a worse twin only needs more real "
          "trials: docs/twin.md)")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("plan", help="trials needed to detect a difference, and interval widths to expect")
    parser.add_argument("--p0", type=float, required=True, help="baseline success rate, e.g. 0.9")
    parser.add_argument("--delta", type=float, help="difference to detect, e.g. -0.2")
    parser.add_argument("--width", type=float, help="instead: real trials for a 95%% interval this wide (0.2: "
                                                    "+-10 points), alone and with the twin")
    parser.add_argument("--twin-agreement", help="with --width: the twin's measured agreement on success (0.95, "
                                                 "95%%, or 57/60)")
    parser.add_argument("--twin-trials", type=int,
                        help="with --width: the twin's own trials (harness twin --extra; default 1000)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.8)
    parser.set_defaults(func=plan)
