"""`harness run --workers N` (the driver at once, Ray workers as they start): the same scoresheet and evidence
as a serial run, faults included."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness.app.run_command import run_from_args
from harness.cli import build_parser, main
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from harness.run.terminal import TerminalObserver
from harness.scratch import SYSTEM_ROOT
from tests.helpers import small_filesystem, wait_until

pytestmark = pytest.mark.ray_cluster   # starts Ray clusters of its own (tests/conftest.py)

PROTOCOL_ARGS = ["protocol", "new", "--randomized", "--n", "4", "--radius-cm", "4", "--min-spacing-cm", "1.2",
                 "--max-yaw-deg", "20", "--seed", "3"]


def _protocol(tmp_path: Path) -> Path:
    path = tmp_path / "p4.yaml"
    assert main([*PROTOCOL_ARGS, "-o", str(path)]) == 0
    return path


def _run(protocol: Path, tmp_path: Path, name: str, *extra: str) -> int:
    return main(["run", str(protocol), "--headless", "--policy", "expert",
                 "--scoresheet", str(tmp_path / f"{name}.yaml"), "--runs-dir", str(tmp_path / "runs"), *extra])


def _outcomes(path: Path) -> list[tuple[int, int, str, float | None, int]]:
    sheet = load_scoresheet(path)
    return [(a.trial_index, a.attempt, a.label, a.placement_error_cm, a.loop.steps) for a in sheet.attempts]


@pytest.mark.parametrize("flags", [["--workers", "0"], ["--workers", "2", "--record-dataset"],
                                   ["--workers", "2", "--robot", "so101", "--port", "/dev/null"]])
def test_workers_refused_before_anything_is_written(tmp_path: Path, flags: list[str], capsys) -> None:
    protocol = _protocol(tmp_path)
    assert _run(protocol, tmp_path, "refused", *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: error:")
    assert not (tmp_path / "refused.yaml").exists()


class _HoldAfterFirstTrial(TerminalObserver):
    """Plain mode's observer that, once trial 1 is recorded, holds the driver's recording until a Ray worker
    has joined (its log line), so the next trials go to both the driver's own worker and the Ray worker."""

    def __init__(self, joined: threading.Event) -> None:
        super().__init__(operator_scores=False)
        self.joined = joined

    def trial_scored(self, attempt) -> None:
        super().trial_scored(attempt)
        if attempt.trial_index == 1:
            wait_until(self.joined.is_set, 600, "a Ray worker to join the run")


class _JoinedLog(logging.Handler):
    def __init__(self, joined: threading.Event) -> None:
        super().__init__(logging.INFO)
        self.joined = joined

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "harness.app.parallel.runs" and record.msg.startswith("Ray worker %d ready"):
            self.joined.set()


def _run_mixed(protocol: Path, tmp_path: Path, name: str) -> None:
    """`--workers 2` with the driver's own worker and one Ray worker both given trials."""
    joined = threading.Event()
    handler = _JoinedLog(joined)
    parallel_log = logging.getLogger("harness.app.parallel.runs")
    level = parallel_log.level
    parallel_log.addHandler(handler)
    parallel_log.setLevel(logging.INFO)
    try:
        args = build_parser().parse_args(["run", str(protocol), "--headless", "--policy", "expert", "--scoresheet",
                                          str(tmp_path / f"{name}.yaml"), "--runs-dir", str(tmp_path / "runs"),
                                          "--workers", "2"])
        assert run_from_args(args, observer=_HoldAfterFirstTrial(joined)) == 0
    finally:
        parallel_log.removeHandler(handler)
        parallel_log.setLevel(level)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["driver-and-ray", "ray-only"])
def test_parallel_run_records_what_a_serial_run_records(tmp_path: Path, where: str, capfd) -> None:
    protocol = _protocol(tmp_path)
    assert _run(protocol, tmp_path, "serial") == 0
    if where == "ray-only":
        assert _run(protocol, tmp_path, "parallel", "--workers", "2", "--no-driver-worker") == 0
    else:
        _run_mixed(protocol, tmp_path, "parallel")
    said = capfd.readouterr().err
    assert ("by driver" in said) == (where == "driver-and-ray") and "by ray-1" in said, said
    serial, parallel = _outcomes(tmp_path / "serial.yaml"), _outcomes(tmp_path / "parallel.yaml")
    assert [o[:2] for o in parallel] == [(1, 1), (2, 1), (3, 1), (4, 1)]   # trial order, one attempt each
    assert parallel == serial
    for trial in range(1, 5):
        a = tmp_path / "runs" / "serial" / f"trial-{trial:03d}-a1"
        b = tmp_path / "runs" / "parallel" / f"trial-{trial:03d}-a1"
        assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        assert (a / "final_top.png").read_bytes() == (b / "final_top.png").read_bytes()
    sheet = load_scoresheet(tmp_path / "parallel.yaml")
    for attempt in sheet.attempts:   # the evidence the scoresheet points at is where it says
        assert all(Path(p).is_file() for p in attempt.artifacts.values())


@pytest.mark.slow
def test_a_run_shorter_than_rays_start_up_is_a_serial_run(tmp_path: Path, capfd) -> None:
    protocol = tmp_path / "p1.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "1", "-o", str(protocol)]) == 0
    # one Ray worker shows it as well as three, which the run starts and then ends unused (each importing LeRobot
    # and MuJoCo on a core the driver's one trial needs)
    assert _run(protocol, tmp_path, "short", "--workers", "2") == 0
    said = capfd.readouterr().err
    assert "1 by driver" in said and "by ray" not in said, said
    assert [o[:3] for o in _outcomes(tmp_path / "short.yaml")] == [(1, 1, Label.SUCCESS)]


def _kill_first_busy_worker(killed: list[int], stop: threading.Event) -> None:
    import psutil

    me = psutil.Process()

    def busy_worker() -> int | None:
        """This test's own Ray worker inside a trial: only this process's descendants are looked at. Another
        run on the machine (a second checkout's tests) has Ray workers of the same name, which the look over
        every process could kill; and reading only the family's command lines costs half the CPU (1.7 ms a
        look against 3.3 ms with 125 processes, 20 looks a second)."""
        for proc in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "TrialWorker.run_trial" in " ".join(proc.cmdline()):
                    return proc.pid
        return None

    while not stop.is_set():   # a trial lasts about a second on a quiet machine: catch a worker inside one
        found = wait_until(lambda: stop.is_set() or busy_worker(), 600, "a worker running a trial", poll_s=0.05)
        if found is True:            # the run ended first: the test says no worker was seen
            return
        time.sleep(0.2)   # behaviour: the kill lands inside the trial, not at its first step
        if busy_worker() == found:   # still on a trial (not between two): kill it there
            os.kill(found, signal.SIGKILL)
            killed.append(found)
            return


@pytest.mark.slow
def test_a_worker_killed_mid_trial_voids_nothing_and_its_trial_is_retried(tmp_path: Path) -> None:
    protocol = _protocol(tmp_path)
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_first_busy_worker, args=(killed, stop), daemon=True)
    killer.start()
    try:   # every trial on Ray: the driver's own worker would run some of them where no one kills it
        assert _run(protocol, tmp_path, "killed", "--workers", "2", "--no-driver-worker") == 0
    finally:
        stop.set()
        killer.join(timeout=5)
    assert killed, "no worker was seen running a trial"
    outcomes = _outcomes(tmp_path / "killed.yaml")
    assert [o[:3] for o in outcomes] == [(i, 1, Label.SUCCESS) for i in range(1, 5)]


@pytest.mark.slow
def test_driver_killed_then_resumed_records_every_trial_once(tmp_path: Path, harness_cli) -> None:
    protocol = _protocol(tmp_path)
    sheet = tmp_path / "driver.yaml"
    command = ["run", str(protocol), "--headless", "--policy", "expert", "--scoresheet", str(sheet), "--runs-dir",
               str(tmp_path / "runs"), "--workers", "2"]
    driver = harness_cli.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    assert driver.stdout is not None
    for line in driver.stdout:   # the first recorded trial, then the driver dies without warning
        if "trial   1" in line:
            break
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    recorded = _outcomes(sheet)
    assert 1 <= len(recorded) < 4
    assert main(["run", str(protocol), "--headless", "--resume", "--scoresheet", str(sheet),
                 "--runs-dir", str(tmp_path / "runs"), "--workers", "2"]) == 0
    outcomes = _outcomes(sheet)
    assert outcomes[:len(recorded)] == recorded
    assert sorted(o[0] for o in outcomes) == [1, 2, 3, 4]
    assert all(o[2] == Label.SUCCESS for o in outcomes)


@pytest.mark.slow
def test_a_clean_exit_leaves_no_ray_folder_and_no_raylet_line(tmp_path: Path) -> None:
    """Issue 62: after a `--workers 2` run its `harness-ray-<pid>-*` folder stayed in the temporary folder until
    the next command (Ray's own exit handler wrote into it again after the harness had removed it), and runs
    ended with a spurious "(raylet) Task TrialWorker.open failed" line. The run has its own temporary folder, so
    what it leaves there is its own. That folder's path is long (a cluster job's TMPDIR): Ray's sockets cannot
    fit below it (Unix socket paths stop at 107 bytes; Ray failed to start, and its folder was left behind), so
    the run puts Ray's folder in /tmp, and removes it there too. The shell has a RAY_ADDRESS (one set up for a
    cluster): a run without --address still starts a Ray runtime of its own (it failed: Ray tried to join that
    address with the run's CPU count)."""
    protocol = _protocol(tmp_path)
    temporary = Path(tempfile.mkdtemp(prefix="h62-" + "x" * 80 + "-", dir=SYSTEM_ROOT))
    try:
        repo = Path(__file__).resolve().parents[2]
        run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(protocol), "--headless", "--policy",
                                "expert", "--scoresheet", str(tmp_path / "s.yaml"), "--runs-dir",
                                str(tmp_path / "runs"), "--workers", "2"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env={**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(repo),
                                    "RAY_ADDRESS": "127.0.0.1:9"})   # a loopback port: nothing answers there
        _, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stderr[-2000:]
        assert "4 attempts" in stderr, stderr   # the closing line: Ray was started by then
        assert "(raylet)" not in stderr and "Traceback" not in stderr, stderr
        assert sorted(p.name for p in temporary.iterdir() if p.name.startswith("harness-")) == []
        assert list(Path("/tmp").glob(f"harness-ray-{run.pid}-*")) == []
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def test_a_socket_folder_goes_where_its_sockets_fit(tmp_path: Path) -> None:
    """Ray's scratch folder is made in the temporary folder when its sockets fit below it, else in /tmp, else
    nowhere (the run then says so in one line rather than Ray failing on a path it cannot bind)."""
    from harness.app.parallel.runs import RAY_LONGEST_SOCKET
    from harness.scratch import SHORT_ROOT, socket_root

    room = len(RAY_LONGEST_SOCKET)
    long_root = tmp_path / ("x" * 90)
    long_root.mkdir()
    assert socket_root("ray", room, system_root=Path("/tmp")) == Path("/tmp")
    assert socket_root("ray", room, system_root=long_root) == SHORT_ROOT
    assert socket_root("ray", 200, system_root=long_root) is None


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="a tmpfs is Linux's")
def test_a_full_disk_pauses_a_parallel_run_with_its_trials_kept(tmp_path: Path, capsys) -> None:
    """Issue 62: room for two trials' evidence, not four. The driver's write of the next trial's folder is
    refused: the run pauses (exit 3) naming the folder and the room a trial needs; what was recorded stays, and
    no half-written folder is left."""
    protocol = _protocol(tmp_path)
    with small_filesystem(tmp_path / "disk", 1800):
        code = main(["run", str(protocol), "--headless", "--policy", "expert", "--scoresheet",
                     str(tmp_path / "disk" / "s.yaml"), "--runs-dir", str(tmp_path / "disk" / "runs"),
                     "--workers", "2"])
        lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness")]
        assert code == 3 and len(lines) == 1, lines
        assert lines[0].startswith(f"harness: run paused: no room to record: {tmp_path / 'disk' / 'runs' / 's'}")
        assert "a trial of this run needs about" in lines[0] and "--resume" in lines[0], lines[0]
        recorded = _outcomes(tmp_path / "disk" / "s.yaml")
        folders = sorted(p.name for p in (tmp_path / "disk" / "runs" / "s").iterdir() if p.is_dir())
        assert 1 <= len(recorded) < 4 and folders == [f"trial-{o[0]:03d}-a1" for o in recorded], folders
