"""The shared protocol builders fail loudly when the file they edit changes shape (tests/helpers.py)."""

from __future__ import annotations

import pytest

from harness.models.protocol import load_protocol
from tests.helpers import replace_once, short_protocol_copy


def test_a_replacement_that_matches_nothing_or_twice_fails() -> None:
    assert replace_once("a: 1\nb: 2\n", "b: 2", "b: 3") == "a: 1\nb: 3\n"
    with pytest.raises(AssertionError, match="found it 0 times"):
        replace_once("a: 1\n", "episode_time_limit_s: 12.0", "episode_time_limit_s: 1.0")
    with pytest.raises(AssertionError, match="found it 2 times"):
        replace_once("x\nx\n", "x", "y")


def test_a_short_protocol_is_the_small_one_with_short_episodes_and_fewer_trials(tmp_path) -> None:
    protocol = load_protocol(short_protocol_copy(tmp_path, seconds=1.5, trials=1, fps=15))
    assert protocol.episode_time_limit_s == 1.5 and len(protocol.trials) == 1 and protocol.fps == 15
    with pytest.raises(AssertionError, match="has no \\['episode_limit'\\]"):
        short_protocol_copy(tmp_path, episode_limit=3)
    with pytest.raises(AssertionError, match="not 99"):
        short_protocol_copy(tmp_path, trials=99)
