"""Snapshots of the check screen, the running screen and the scoring prompt at 80x24 and 120x36."""

from __future__ import annotations

import pytest

from tests.tui_snapshot_apps import CheckHost, PlacingHost, RunHost, ScoreHost


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
def test_check_screen(snap_compare, size) -> None:
    assert snap_compare(CheckHost(), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
def test_running_screen(snap_compare, size) -> None:
    assert snap_compare(RunHost(), terminal_size=size)


def test_scoring_prompt(snap_compare) -> None:
    assert snap_compare(ScoreHost(), terminal_size=(100, 30))


def test_placing_screen(snap_compare) -> None:
    """A real arm's guided placement: the live top camera around the target with the footprint, and the reading."""
    assert snap_compare(PlacingHost(), terminal_size=(110, 32))
