"""The end-to-end tier: the CLI as a user runs it, and any test that starts a process of its own (a `harness`
command, LeRobot's tools, a script, a Ray cluster).

Its tests go first in the run: they take longest (minutes a module on two cores: `--durations` of a full run), and
pytest-xdist hands tests out in collection order, so one of them started last kept one core busy minutes after the
other had run out of work. Moving the tier whole keeps each module's tests together, so its fixtures are made once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.path.is_relative_to(HERE))   # stable: the rest keep their order
