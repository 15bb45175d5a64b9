"""`harness collect` from the terminal: bad input leaves nothing behind, and a collection killed
with SIGKILL at a random moment finishes, on rerun, as one intact dataset."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from tests.helpers import REPO, wait_until

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def test_bad_input_is_one_line_exit_2_and_writes_nothing(workdir, capsys) -> None:
    protocol = str(REPO / "protocols" / "randomized.yaml")
    assert main(["collect", protocol, "--policy", "no-such-policy", "--episodes", "2"]) == 2
    assert main(["collect", protocol, "--policy", "expert", "--episodes", "0"]) == 2
    assert main(["collect", protocol, "--policy", "expert", "--episodes", "2", "--image-size", "99x7"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("harness: error: --") for line in lines)
    with pytest.raises(SystemExit) as exit_info:
        main(["collect", protocol, "--policy", "expert", "--episodes", "2", "--fps", "45"])
    assert exit_info.value.code == 2
    assert not (workdir / "datasets").exists()


def _journal_attempts(path: Path) -> int:
    try:
        return path.read_text().count('"kind": "attempt"')
    except OSError:
        return 0


@pytest.mark.slow
def test_sigkill_mid_collection_then_rerun_gives_one_intact_dataset(tmp_path, harness_cli) -> None:
    root = tmp_path / "demos"
    journal = tmp_path / "demos.collect" / "journal.jsonl"
    command = ["collect", str(REPO / "protocols" / "randomized.yaml"), "--policy", "expert",
               "--episodes", "5", "--no-video", "--checkpoint-every", "2", "-o", str(root)]
    rng = random.Random(21)
    child = harness_cli.popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_after = rng.choice([3, 4])  # attempts journaled: past a checkpoint, mid-segment
    wait_until(lambda: _journal_attempts(journal) >= kill_after or child.poll() is not None, 600,
               f"{kill_after} attempts journaled", poll_s=0.05)
    time.sleep(rng.uniform(0.0, 1.0))  # behaviour: the kill lands somewhere inside the next attempt or LeRobot's save
    assert child.poll() is None, "finished before it could be killed"
    child.send_signal(signal.SIGKILL)
    child.wait()

    done = harness_cli.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    episodes = sorted(int(i) for f in sorted((root / "meta" / "episodes").glob("chunk-*/*.parquet"))
                      for i in pd.read_parquet(f)["episode_index"])
    assert episodes == [0, 1, 2, 3, 4]
    selection = json.loads((root / "meta" / "selection.json").read_text())
    assert [a["episode_index"] for a in selection["accepted"]] == episodes
    attempts = [a["attempt"] for a in selection["accepted"]] + selection["interrupted_attempts"]
    assert sorted(attempts) == list(range(1, selection["totals"]["attempts"] + 1))
    validated = harness_cli.run(["dataset", "validate", str(root)], cwd=tmp_path, capture_output=True, text=True,
                                timeout=300)
    assert validated.returncode == 0, validated.stdout[-2000:]


def test_a_protocol_records_its_control_rate(workdir) -> None:
    from harness.models.protocol import load_protocol

    path = workdir / "protocols" / "p60.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "2", "--fps", "60", "--time-limit-s", "12", "-o", str(path)]) == 0
    protocol = load_protocol(path)
    assert (protocol.fps, protocol.episode_time_limit_s) == (60, 12.0)
    assert main(["protocol", "new", "--fixed", "--n", "2", "--time-limit-s", "0", "-o", str(path), "--force"]) == 2
    assert load_protocol(path).fps == 60  # refused input left the file as it was


@pytest.mark.slow
def test_a_checkpoint_policy_that_fails_is_rejected_and_stops_at_the_attempt_limit(workdir, capsys) -> None:
    from tests.tiny_policy import save_tiny_act

    policy = save_tiny_act(workdir / "tiny_act")  # holds the arm near its start pose: never grasps
    protocol = workdir / "protocols" / "short.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "1", "--time-limit-s", "1", "-o", str(protocol)]) == 0
    code = main(["collect", str(protocol), "--policy", str(policy), "--episodes", "1", "--max-attempts", "1",
                 "--no-video", "-o", str(workdir / "demos")])
    captured = capsys.readouterr()
    assert code == 1
    assert "0 accepted of 1 attempts; rejected: no_grasp 1" in captured.out
    assert "attempt limit (1)" in captured.err
    (attempt,) = [json.loads(line) for line in (workdir / "demos.collect" / "journal.jsonl").read_text().splitlines()
                  if '"attempt"' in line and '"kind": "attempt"' in line]
    assert attempt["reason"] == "no_grasp" and attempt["frames"] == 30 and attempt["episode_index"] is None
