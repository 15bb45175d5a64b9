from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

# The suite asserts what Ctrl+C does to the commands it starts (a run's emergency stop, a CLI ended by SIGINT), as
# at a terminal. A suite started in the background (bash's `&`, a CI runner's shell) begins with SIGINT ignored, and
# every process it starts would inherit that (Python leaves an ignored SIGINT ignored): the tests' own processes
# take the terminal's disposition back, so what they start behaves as a user's command does.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
# The harness leaves HF_HUB_OFFLINE to its user; its tests never reach the Hub (a Hub id is tested on a
# Hub cache laid out locally), and every command a test starts inherits this.
os.environ["HF_HUB_OFFLINE"] = "1"
# Every scoresheet's progress witness goes to a state folder of the test run's own (harness.storage.state_dir),
# never the user's; commands a test starts inherit it.
_STATE = tempfile.TemporaryDirectory(prefix="test-state-")
os.environ["HARNESS_STATE_DIR"] = _STATE.name

# One OpenMP thread a process (torch's CPU pool), unless the shell says otherwise: the suite runs two streams of
# tests on two cores, and a pool of one thread a core spin-waits between operations on the core the other stream
# needs (the lerobot-eval test: 52 CPU s with the default pool, 17 with one thread). The harness's own inference sets
# its threads itself (ThreadPolicy, tested), so what the harness decides is still what is tested; LeRobot's tools,
# the tests' training and their in-process policies run on one thread, as scripts/coverage_experiment's do.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
_SESSION_ENV = dict(os.environ)   # as every test starts: the e2e fixture's CLI server runs with it


@pytest.fixture
def small_protocol_text() -> str:
    return (REPO / "tests" / "data" / "small.yaml").read_text()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch project folder: commands write scoresheets/ and runs/ relative to it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "protocols").mkdir()
    return tmp_path


@pytest.fixture(scope="session")
def harness_cli():
    """Starts `python -m harness.cli ARGS` as a user runs it: `harness_cli.run(args, ...)` as `subprocess.run`,
    `harness_cli.popen(args, ...)` as `subprocess.Popen` (same keyword arguments, same handle).

    The CLI is forked from a server process of this pytest worker that has imported torch, LeRobot, transformers,
    MuJoCo and harness once (started on first use, ended with the session), so a command costs its own work, not
    2.5-6 CPU seconds of imports; it still has its own pid, argv, folder, environment, stdin/stdout/stderr and exit
    status, and the test's signals reach it alone. It falls back to a real subprocess when the request's
    environment differs from the server's in a variable read at import time (HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE,
    HF_LEROBOT_HOME, MUJOCO_GL, TMPDIR, HOME, PYTHON*...), or when the test passes `fresh=True` because a fresh
    interpreter is what it tests (installs, README commands, the no-egress and orphan audits, import behaviour);
    `harness_cli.last_fresh_reason` says why. HARNESS_TEST_CLI_SERVER=0 makes every start a real subprocess.
    tests/cli_process.py says what is and is not shared. A shell script under test gets the same through
    `env=harness_cli.script_env(...)`: its `harness` and `lerobot-train` are forked too (tests/cli_client.py)."""
    from tests.cli_process import CliServer, HarnessCli

    cli = HarnessCli(CliServer(env=_SESSION_ENV))
    yield cli
    cli.close()


@pytest.fixture(scope="module")
def world():
    """One simulated scene per test module (tests reset it as they need)."""
    import harness.sim  # noqa: F401  (headless GL before mujoco)
    from harness.sim.world import SimWorld

    w = SimWorld()
    yield w
    w.close()


# Where a test runs in CI is declared where the test lives: the folder's conftest (tests/realtime/ marks its tests
# `serial`; tests/e2e/ goes first) or the module's own `pytestmark`. This hook turns the marks a module declares into
# pytest-xdist groups (`--dist loadgroup`, pyproject's addopts), one group a test at most (two would make a third):
# - `desk`: a parallel-pass test that starts an emulated desk (a rehearsal, `emulate-bus --sim`, the simulated arm's
#   cameras): one desk at a time, on one worker; another desk's real-time threads stretch a desk's servo replies,
#   ordinary load barely does (benchmarks/desk_ping_bench.py).
# - `ray_cluster`: a test (or a module whose tests) start a Ray cluster of their own and compare it, kill its workers
#   or audit its sockets; a module's quick tests that never reach Ray are left unmarked, off this group's worker. Ray
#   sizes itself to the machine's cores, so two at once would each expect the whole machine: one test at a time on
#   one worker, beside the rest (green in five runs beside the whole suite's load, session 38; they had run alone
#   since session 28).
# - `lerobot_policies`: a module whose quick tests import LeRobot's policies, processors or dataset classes
#   (lerobot.policies pulls in transformers and torchvision: about 10 s). Its quick tests go to one worker, so the
#   inner loop pays that import once rather than once a worker; its slow tests (several of the longest modules) stay
#   spread over both, as CI needs. Test modules import these LeRobot parts inside the tests that use them, never at
#   the top, so collection stays light (tests/system/test_suite_rules.py).
# - `shared_fixture`: a module whose slow tests share a module-scoped fixture that takes a core 20 s or more to build
#   (a trained SmolVLA; a rendered set of a few dozen scenes). Spread test by test, each xdist worker built it again:
#   about 150 of the parallel pass's 2,424 CPU-seconds (session 36, benchmarks/suite_cpu.py). Its slow tests go to
#   one worker, module by module; its quick tests (if any) stay where the marks above put them.
@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's own hook reads the xdist_group marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        slow = item.get_closest_marker("slow") is not None
        if item.get_closest_marker("desk") is not None:
            item.add_marker(pytest.mark.xdist_group("desk"))
        elif item.get_closest_marker("ray_cluster") is not None:
            item.add_marker(pytest.mark.xdist_group("ray_cluster"))
        elif item.get_closest_marker("lerobot_policies") is not None and not slow:
            item.add_marker(pytest.mark.xdist_group("lerobot_policies"))   # not the slow ones: CI spreads those
        elif item.get_closest_marker("shared_fixture") is not None and slow:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process the way `harness.cli.entry` ends a command, and for the same reason.

    Tests read parquet in this process; pyarrow's C++ thread pools can abort the interpreter's
    native teardown after every test has passed and the summary is printed (apache/arrow#34314),
    which would turn a green run red. Reports, caches and atexit handlers are all done by now.
    """
    if not _exit_status:
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(_exit_status[-1])
