"""SIGKILL a process writing trial records at random moments: nothing scored may be lost or doubled."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
from harness.models.protocol import Protocol, Trial, protocol_to_yaml
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet

WRITER = Path(__file__).with_name("kill_writer.py")
REPO = Path(__file__).resolve().parents[1]


def test_sigkill_at_random_moments_loses_nothing_scored(tmp_path) -> None:
    protocol = Protocol(name="long", task="t", start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS,
                        trials=[Trial(index=i, dx_cm=0.0, dy_cm=0.0) for i in range(1, 301)])
    protocol_path = tmp_path / "long.yaml"
    protocol_path.write_text(protocol_to_yaml(protocol))
    sheet_path = tmp_path / "sheet.yaml"
    lock_scoresheet(sheet_path, build_locked(protocol, protocol_path, "expert", "sim"), {})
    rng = random.Random(1234)
    committed: set[int] = set()
    kills = 0
    while kills < 20:
        child = subprocess.Popen([sys.executable, str(WRITER), str(sheet_path)], stdout=subprocess.PIPE,
                                 text=True, cwd=REPO)
        time.sleep(rng.uniform(0.4, 1.2))
        if child.poll() is not None:
            break  # finished every trial before we could kill it
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        kills += 1
        committed |= {int(line.split()[1]) for line in out.splitlines() if line.startswith("scored")}
        sheet = load_scoresheet(sheet_path)  # must load and verify after every kill
        finals = Counter(a.trial_index for a in sheet.attempts if a.outcome != "void")
        assert all(count == 1 for count in finals.values()), "a trial was scored twice"
        assert committed <= set(finals), f"announced trials lost: {sorted(committed - set(finals))}"
    assert kills >= 20
    sheet = load_scoresheet(sheet_path)
    for attempt in sheet.attempts:
        if attempt.outcome == "void":
            assert attempt.void_reason == "camera dropout"
