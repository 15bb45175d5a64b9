"""How long the comparison's design search takes to answer (issue 62: within a second for any cap up to 100,000).

    .venv/bin/python benchmarks/design_search_bench.py

Prints, per (min_difference, cap), what the lock would say (the design, the smallest cap that reaches the power,
or a refusal naming the limit) and the wall and CPU seconds it took. The tests check what is said; the time lives
here, not in a timed test.
"""

from __future__ import annotations

import os
import time

from harness.stats import sequential as sq

ALPHA, POWER = 0.05, 0.8
CASES = [(0.01, 2_000), (0.02, 5_000), (0.05, 100_000), (0.1, 2_000), (0.2, 547), (0.3, 250), (0.6, 47)]


def answer(difference: float, cap: int) -> str:
    """What locking a one-comparison rule with this cap says, in a few words."""
    if cap > sq.MAX_PAIRS_SEARCHED:
        return f"refused: over the {sq.MAX_PAIRS_SEARCHED:,} pairs the search checks"
    design, smallest = sq.design_for_cap(ALPHA, POWER, difference, 1, cap)
    if design is not None:
        return f"locks ({design.futility})"
    return f"refused: {'cap ' + str(smallest) + ' would' if smallest else 'no cap up to the limit would'}"


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; alpha {ALPHA}, power {POWER}\n")
    print("| min_difference | cap | answer | wall s | CPU s |")
    print("|---|---|---|---|---|")
    for difference, cap in CASES:
        wall, cpu = time.perf_counter(), time.process_time()
        said = answer(difference, cap)
        print(f"| {difference} | {cap:,} | {said} | {time.perf_counter() - wall:.2f} | "
              f"{time.process_time() - cpu:.2f} |")


if __name__ == "__main__":
    main()
