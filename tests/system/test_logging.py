"""`-v`/`-vv` turn on the engine's and the bus's logs; the engine logs phases, timings and frame ages."""

from __future__ import annotations

import logging

import pytest

from harness.cli import main
from harness.run.clock import ManualClock
from tests.unit.run.test_loop_timing import CostlyPolicy, SlowRobot, _engine, _live


@pytest.fixture
def harness_logger():
    logger = logging.getLogger("harness")
    level = logger.level
    yield logger
    logger.setLevel(level)


@pytest.mark.parametrize(("flags", "level"), [([], logging.WARNING), (["-v"], logging.INFO),
                                               (["-vv"], logging.DEBUG)])
def test_verbosity_flags_set_the_harness_log_level(harness_logger, flags, level, capsys) -> None:
    assert main([*flags, "plan", "--p0", "0.9", "--delta", "-0.2"]) == 0
    assert harness_logger.level == level


def test_the_engine_logs_phases_outcomes_loop_timings_and_frame_ages(tmp_path, caplog) -> None:
    clock = ManualClock()
    engine, _ = _engine(tmp_path, clock, SlowRobot(clock, 0.004, _live), CostlyPolicy(clock, [0.005]), 1.0)
    with caplog.at_level(logging.DEBUG, logger="harness"):
        engine.run()
    text = caplog.text
    assert "phase: moving to start pose" in text and "phase: running" in text
    assert "trial 1 attempt 1: no_grasp" in text
    assert "robot I/O 4.0 ms" in text and "frame ages: top 0.00 s" in text
