"""The realtime tier: the emulated real arm's wall-time servo and camera threads against LeRobot's deadlines, pings
timed on the wire, emulated desks, and the wall-timed tests beside them.

Every test here is `serial` unless it says it can share the cores: a `desk` test (one desk at a time: tests/conftest.py)
or a module marked `shares_cores` (wall-timed, but its assertions hold beside other tests' load; shown in the parallel
pass since before the tiers). A new realtime module starts serial. scripts/test (so CI) runs the `serial` tests one
at a time at normal priority, then the `desk` and `shares_cores` ones, beside the rest of the suite on both cores at
nice 19, which takes only the CPU these leave idle (docs/developing.md, "How the suite shares two cores"); a module
marked `quiet` (fix-ids' wire-timed diagnoses) runs after both, two tests at a time and nothing else.

Why serial: beside the rest of the suite on three workers a servo's reply still missed LeRobot's window now and then:
with the serial modules in parallel runs of their own (session 38: a leader arm's handshake, a fix-ids diagnosis),
and with one desk at a time and the rest of the suite niced beside it (session 39: a fix-ids case, `lerobot-record`
against two arms served from the test's own process; docs/benchmarks.md). Wire-timed pings whose agreement decides a
diagnosis (the fix-ids modules) are here too: a loaded core can make a noisy line look sure, and a clean one noisy
(test_fix_ids_repair failed beside the parallel pass in session 42's CI). An arm whose process also runs the TUI, the
engine and a policy runs in a process of its own (`open_rig_process`), as a rehearsal's does.

A test elsewhere that only kills processes (e2e/test_kill: the kill lands after the writer's own commits), measures
CPU rather than wall time (e2e/test_integrity's alias bomb) or asks the scheduler for a policy (unit/run/test_realtime)
runs on both cores: load cannot change what it asserts, so it is not in this tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)   # hooks see the whole session's items: only this folder's are marked
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (item.path.is_relative_to(HERE) and item.get_closest_marker("desk") is None
                and item.get_closest_marker("shares_cores") is None):
            item.add_marker(pytest.mark.serial)
