"""pytest plugin for benchmarks/suite_cpu.py: each test's CPU seconds (this process, the children it waited for, and
the CLIs tests/cli_process.py forked for it) and wall seconds, one tab-separated line a test, to
`$SUITE_CPU_OUT.<pid>.tsv` (one file per xdist worker).

CPU time, unlike wall time, barely moves with the machine's load, so where CI's time goes can be measured on a
busy machine. Not counted: processes a test did not wait for (Ray's workers, daemons it killed), the CPU hog of
test_tui_start_stress among them.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Generator

import pytest


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + _forked_cpu_s()


def _forked_cpu_s() -> float:
    """The CLIs the e2e fixture forked from its server (tests/cli_process.py), which this process does not wait
    for, and the server's start (in the test that started it)."""
    module = sys.modules.get("tests.cli_process")
    return module.reported_cpu_s() if module else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    cpu, wall = _cpu_s(), time.monotonic()
    yield
    with open(f"{os.environ['SUITE_CPU_OUT']}.{os.getpid()}.tsv", "a") as out:
        out.write(f"{item.nodeid}\t{_cpu_s() - cpu:.2f}\t{time.monotonic() - wall:.2f}\n")
