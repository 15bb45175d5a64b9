"""SIGKILL each kind of harness process once its children are up: serial run (evidence-writer lanes and
their resource tracker), `--workers` run (Ray and its reaper), sweep (LeRobot's policy server for a
`policy_server: local` cell; the Ray workers it keeps from cell to cell), rehearsal (the simulated cameras'
render process, the run's lanes) and `emulate-bus --sim`. Five seconds later no process it started may be
alive, and the next start of any `harness` command removes every temporary folder it left. Each runs with a
temporary folder of its own (TMPDIR), so what is left there is what it left."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from harness.cli import main
from harness.scratch import OWNER, PREFIX, make, owner_alive, remove_orphans, scratch_folders
from tests.helpers import REPO, wait_until
from tests.realtime.test_rehearse import _protocol
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

GONE_WITHIN_S = 5.0
UP_WITHIN_S = 240.0


def _family(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _commands(pid: int) -> list[str]:
    found = []
    for member in _family(pid):
        try:
            found.append(" ".join(member.cmdline()))
        except psutil.Error:
            continue
    return found


def _protocol_file(folder: Path) -> Path:
    path = folder / "p.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "30", "-o", str(path)]) == 0
    return path


def _serial(folder: Path) -> tuple[list[str], list[str]]:
    return (["run", str(_protocol_file(folder)), "--headless", "--policy", "expert", "--scoresheet",
             str(folder / "s.yaml"), "--runs-dir", str(folder / "runs")], ["multiprocessing.spawn"])


def _workers(folder: Path) -> tuple[list[str], list[str]]:
    return (["run", str(_protocol_file(folder)), "--headless", "--policy", "expert", "--no-video", "--scoresheet",
             str(folder / "s.yaml"), "--runs-dir", str(folder / "runs"), "--workers", "2", "--no-driver-worker"],
            ["TrialWorker", "ray_reaper", "raylet"])


def _sweep(folder: Path) -> tuple[list[str], list[str]]:
    protocol = _protocol_file(folder)
    save_tiny_act(folder / "act")
    spec = folder / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"name": "k", "checkpoints": ["act"], "protocols": [protocol.name],
                                    "conditions": [{"policy_server": "local"}]}))
    return (["sweep", str(spec), "--scoresheets-dir", str(folder / "sheets"), "--runs-dir", str(folder / "runs")],
            ["local_policy_server", "multiprocessing.spawn"])


def _sweep_on_ray(folder: Path) -> tuple[list[str], list[str]]:
    """A sweep's Ray workers are kept from cell to cell: they must still die with it."""
    protocol = _protocol_file(folder)
    save_tiny_act(folder / "act")
    spec = folder / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"name": "r", "checkpoints": ["act"], "protocols": [protocol.name], "workers": 2,
                                    "conditions": [{"no_video": True}, {"no_video": True, "video_fps": 10}]}))
    return (["sweep", str(spec), "--scoresheets-dir", str(folder / "sheets"), "--runs-dir", str(folder / "runs")],
            ["TrialWorker", "ray_reaper", "raylet"])


def _rehearse(folder: Path) -> tuple[list[str], list[str]]:
    save_tiny_act(folder / "act", height=480, width=640)
    return (["rehearse", str(_protocol(folder)), "--policy", "act", "--operator", "scripted"],
            ["rig_process", "frame_render", "multiprocessing.spawn"])


def _emulator(folder: Path) -> tuple[list[str], list[str]]:
    return ["emulate-bus", "--sim"], ["frame_render"]


def _temporary_root() -> Path:
    """A TMPDIR of the test's own, so what is left there is what the harness left; short: socket paths."""
    return Path(tempfile.mkdtemp(prefix="k", dir="/tmp" if os.path.isdir("/tmp") else None))


KINDS = {"serial": _serial, "workers": _workers, "sweep": _sweep, "sweep-on-ray": _sweep_on_ray, "rehearse": _rehearse,
         "emulate-bus": _emulator}
DESKS = {"rehearse", "emulate-bus"}   # these start an emulated desk (tests/conftest.py: one at a time)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [pytest.param(kind, marks=pytest.mark.desk) if kind in DESKS else kind
                                  for kind in sorted(KINDS)])
def test_a_killed_harness_leaves_no_process_and_no_temporary_folder(kind: str, tmp_path: Path) -> None:
    tmp = _temporary_root()
    try:
        args, children = KINDS[kind](tmp_path)
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)}
        process = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: process.poll() is not None or all(
                any(name in command for command in _commands(process.pid)) for name in children),
                UP_WITHIN_S, f"{kind}: {children} started", poll_s=0.2)
            assert process.poll() is None, f"{kind} ended (exit {process.returncode}) before it was killed"
            family = _family(process.pid)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            wait_until(lambda: not [p for p in family if _alive(p)], GONE_WITHIN_S,
                       f"every process of the killed {kind} gone", poll_s=0.1)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        next_start = subprocess.run([sys.executable, "-m", "harness.cli", "protocol", "new", "--fixed", "--n", "1",
                                     "-o", str(tmp_path / "next.yaml")], env=env, capture_output=True, text=True)
        assert next_start.returncode == 0, next_start.stderr
        assert sorted(p.name for p in tmp.iterdir()) == [], f"{kind} left temporary folders"
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_a_process_using_multiprocessing_leaves_its_folder_and_prints_no_traceback() -> None:
    """multiprocessing makes its own temporary folder (listeners, managers) inside the process's: removing the
    process's first left multiprocessing's exit handler a FileNotFoundError traceback to print (CI's output
    had one from each test worker)."""
    tmp = _temporary_root()
    script = ("import multiprocessing.util\nfrom harness.scratch import own_temporary_folder\n"
              "print(own_temporary_folder())\nprint(multiprocessing.util.get_temp_dir())\n")
    try:
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO),
                              "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=120)
        folder, inner = done.stdout.split()
        assert done.returncode == 0 and Path(inner).parent == Path(folder)
        assert "Traceback" not in done.stderr, done.stderr
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_a_program_that_loads_a_policy_keeps_its_temporary_folder_as_it_was(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`harness.evaluate` runs in its caller's process, whose temporary folder the harness does not own: LeRobot's
    `PreTrainedConfig.from_pretrained` left a tmp*.json there on every load of a policy (CI's /tmp held three
    from every full run of this suite, from the tests that load one in their own process)."""
    from harness.policies.lerobot_policy import LeRobotPolicy

    mine = tmp_path / "tmp"
    mine.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(mine))
    before = set(scratch_folders("lib"))
    LeRobotPolicy(save_tiny_act(tmp_path / "act"), task="t", device="cpu")
    torch_cache = f"torchinductor_{getpass.getuser()}"   # torch's own cache, one a user, made empty on import
    assert sorted(p.name for p in mine.iterdir() if p.name != torch_cache) == []
    # only a folder that appeared counts: another test's process may end (and remove its own) meanwhile
    assert set(scratch_folders("lib")) - before == set(), "the loading left its scratch folder"


MAKES_A_FOLDER = "from harness.scratch import make; print(make('test', False))"


def _maker_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(root)}


@pytest.fixture()
def root() -> Iterator[Path]:
    """A temporary root of the test's own for the folders it makes: in the machine's, every `harness` start the
    other pytest worker makes meanwhile removes an ended owner's folder too, and the test's own `remove_orphans`
    then found nothing to remove (a CI run: `assert left in []`)."""
    folder = Path(tempfile.mkdtemp(prefix="orphans", dir="/tmp" if os.path.isdir("/tmp") else None))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _made_by_a_process_that_ended(root: Path) -> Path:
    made = subprocess.run([sys.executable, "-c", MAKES_A_FOLDER], env=_maker_env(root), capture_output=True,
                          text=True, check=True)
    return Path(made.stdout.strip())


def test_a_scratch_folder_is_removed_once_its_owner_is_gone_and_never_before(tmp_path: Path, root: Path) -> None:
    mine = make("test", remove_at_exit=False, root=root)
    try:
        left = _made_by_a_process_that_ended(root)
        assert left.is_dir() and left.name.startswith(f"{PREFIX}test-") and owner_alive(left) is False
        assert owner_alive(mine) is True
        stranger = tmp_path / f"{PREFIX}stranger"   # no owner file: not ours to judge
        stranger.mkdir()
        assert left in remove_orphans(root) and not left.exists() and mine.is_dir()
        assert remove_orphans(tmp_path) == [] and stranger.is_dir()
        assert mine in scratch_folders("test", root=root)
    finally:
        subprocess.run(["rm", "-rf", str(mine)], check=False)


def test_a_folder_whose_maker_died_before_writing_its_owner_file_is_removed(root: Path) -> None:
    """A Ray worker killed as it starts can die between making its folder and writing the owner file (a CI run
    left `harness-worker-*` so): the pid in the folder's name still tells whose it was."""
    mine = make("test", remove_at_exit=False, root=root)
    try:
        left = _made_by_a_process_that_ended(root)
        (left / OWNER).unlink()   # as if killed before it was written
        (mine / OWNER).unlink()   # a live maker still writing it
        assert owner_alive(left) is False and owner_alive(mine) is None
        assert left in remove_orphans(root) and not left.exists() and mine.is_dir()
    finally:
        subprocess.run(["rm", "-rf", str(mine)], check=False)


def test_a_folder_whose_maker_is_a_zombie_is_removed(root: Path) -> None:
    """A killed run's Ray workers stay zombies where nothing reaps orphans (a container whose first process is
    no init): ended, their folders are left over."""
    maker = subprocess.Popen([sys.executable, "-c", MAKES_A_FOLDER], env=_maker_env(root), stdout=subprocess.PIPE,
                             text=True)
    assert maker.stdout is not None
    left = Path(maker.stdout.readline().strip())
    try:
        wait_until(lambda: psutil.Process(maker.pid).status() == psutil.STATUS_ZOMBIE, 30, "the maker a zombie")
        assert owner_alive(left) is False
        assert left in remove_orphans(root) and not left.exists()
    finally:
        maker.wait()
        subprocess.run(["rm", "-rf", str(left)], check=False)
