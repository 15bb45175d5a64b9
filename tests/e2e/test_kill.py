"""SIGKILL a process writing trial records at random moments: nothing scored may be lost or doubled."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
from harness.models.protocol import Protocol, Trial, protocol_to_yaml
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet

WRITER = Path(__file__).resolve().parents[1] / "kill_writer.py"
REPO = Path(__file__).resolve().parents[2]
KILLS = 20


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_scored(tmp_path) -> None:
    """Each kill lands while the writer is writing: after a random number (1-10) of its commits and
    a random 0-20 ms more, so it never depends on how fast the machine is. 20 kills score at most
    200 of the 300 trials, so the writer can never finish before the test is done with it."""
    protocol = Protocol(name="long", task="t", start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS,
                        trials=[Trial(index=i, dx_cm=0.0, dy_cm=0.0) for i in range(1, 301)])
    protocol_path = tmp_path / "long.yaml"
    protocol_path.write_text(protocol_to_yaml(protocol))
    sheet_path = tmp_path / "sheet.yaml"
    lock_scoresheet(sheet_path, build_locked(protocol, protocol_path, "expert", "sim"), {})
    rng = random.Random(1234)
    committed: set[int] = set()
    for _ in range(KILLS):
        child = subprocess.Popen([sys.executable, str(WRITER), str(sheet_path)], stdout=subprocess.PIPE,
                                 text=True, cwd=REPO)
        assert child.stdout is not None
        lines: list[str] = []
        for _ in range(rng.randint(1, 10)):
            line = child.stdout.readline()
            assert line, f"the writer ended before it was killed (exit {child.wait()})"
            lines.append(line)
        time.sleep(rng.uniform(0.0, 0.02))   # behaviour: the kill lands at a random moment of a write
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        committed |= {int(line.split()[1]) for line in [*lines, *out.splitlines()] if line.startswith("scored")}
        sheet = load_scoresheet(sheet_path)  # must load and verify after every kill
        finals = Counter(a.trial_index for a in sheet.attempts if a.outcome != "void")
        assert all(count == 1 for count in finals.values()), "a trial was scored twice"
        assert committed <= set(finals), f"announced trials lost: {sorted(committed - set(finals))}"
    sheet = load_scoresheet(sheet_path)
    assert sheet.pending_trials(), "the writer finished: the kills did not all land mid-run"
    for attempt in sheet.attempts:
        if attempt.outcome == "void":
            assert attempt.void_reason == "camera dropout"
