"""The CPU a command's whole process tree spends, sampled while it runs: what `/usr/bin/time` misses when the
command leaves work to processes it never waits for (Ray's daemons and workers, a policy server). Shared by the
benchmarks that time runs (parallel_bench.py) and tests (ray_tests_bench.py)."""

from __future__ import annotations

import os

import psutil

Seen = dict[tuple[int, float], tuple[float, str]]


def busy_ticks() -> int:
    """The machine's busy clock ticks so far (all but idle and iowait), to tell its other load from a command's."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return sum(values) - values[3] - values[4]


def others_cores(busy_before: int, own_cpu_s: float, wall_s: float) -> float:
    """How many cores the rest of the machine kept busy meanwhile."""
    return ((busy_ticks() - busy_before) / os.sysconf("SC_CLK_TCK") - own_cpu_s) / wall_s


def sample(root: psutil.Process, seen: Seen) -> None:
    """Record each living member's CPU seconds so far, with its name and first arguments, keyed by (pid, start)
    so a reused pid is another process; call it every ~0.1 s: a member's last tenth of a second is missed."""
    try:
        family = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for member in family:
        try:
            times = member.cpu_times()
            seen[(member.pid, member.create_time())] = (times.user + times.system,
                                                        member.name() + " " + " ".join(member.cmdline()[:3]))
        except psutil.Error:
            continue
