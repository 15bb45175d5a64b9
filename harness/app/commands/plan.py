"""`harness plan`: trials needed to detect a difference, and interval widths to expect."""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import HarnessInputError


def plan(args: argparse.Namespace) -> int:
    import math

    from harness.models.stats import expected_wilson_width, trials_needed

    for flag, value in (("--p0", args.p0), ("--alpha", args.alpha), ("--power", args.power)):
        if not (math.isfinite(value) and 0 < value < 1):
            raise HarnessInputError(None, flag, f"{value}: must be strictly between 0 and 1")
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


def register(sub: Any) -> None:
    parser = sub.add_parser("plan", help="trials needed to detect a difference, and interval widths to expect")
    parser.add_argument("--p0", type=float, required=True, help="baseline success rate, e.g. 0.9")
    parser.add_argument("--delta", type=float, required=True, help="difference to detect, e.g. -0.2")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.8)
    parser.set_defaults(func=plan)
