from __future__ import annotations

import atexit
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
# The harness leaves HF_HUB_OFFLINE to its user; its tests never reach the Hub (a Hub id is tested on a
# Hub cache laid out locally), and every command a test starts inherits this.
os.environ["HF_HUB_OFFLINE"] = "1"
# Every scoresheet's progress witness goes to a state folder of the test run's own (harness.storage.state_dir),
# never the user's; commands a test starts inherit it.
_STATE = tempfile.TemporaryDirectory(prefix="test-state-")
os.environ["HARNESS_STATE_DIR"] = _STATE.name

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
    tests/cli_process.py says what is and is not shared."""
    from tests.cli_process import CliServer, HarnessCli

    server = CliServer(env=_SESSION_ENV)
    yield HarnessCli(server)
    server.close()


@pytest.fixture(scope="module")
def world():
    """One simulated scene per test module (tests reset it as they need)."""
    import harness.sim  # noqa: F401  (headless GL before mujoco)
    from harness.sim.world import SimWorld

    w = SimWorld()
    yield w
    w.close()


# Modules whose tests need the machine to themselves: they run the emulated real arm's wall-time servo and camera
# threads against LeRobot's deadlines, or time pings on the wire. scripts/test runs every other test on both
# cores, then these alone (`-m serial`). Beside the rest of the suite on three workers a servo's reply still
# missed LeRobot's window now and then: with the serial modules in parallel runs of their own (session 38: a
# leader arm's handshake, a fix-ids diagnosis), and with one desk at a time and the rest of the suite niced
# beside it (session 39: a fix-ids case, `lerobot-record` against two arms served from the test's own process;
# docs/benchmarks.md). An arm whose process also runs the TUI, the engine and a policy runs in a process of its
# own (`open_rig_process`), as a rehearsal's does. A test that only kills processes (test_kill: the kill lands
# after the writer's own commits), measures CPU rather than wall time (test_integrity's alias bomb) or asks the
# scheduler for a policy (test_realtime) runs on both cores: load cannot change what it asserts.
SERIAL_MODULES = frozenset({
    "test_rehearse", "test_rehearse_camera_sizes",   # the desk flow at camera sizes other than 640x480 (issue 59)
    "test_real_arm_path", "test_operator_real_arm", "test_operator_tui_placement",
    "test_async_real_arm", "test_rtc_real_arm", "test_emulator_walkthrough", "test_emergency_stop",
    "test_run_bus_faults", "test_tui_undo_real_arm", "test_rig_process",
    # wire-timed pings whose agreement decides a diagnosis: a loaded core can make a noisy line look sure, and a
    # clean one noisy (test_fix_ids_repair, in test_bus.py until it failed beside the parallel pass in session 42's CI)
    "test_fix_ids_safety", "test_fix_ids_signature", "test_fix_ids_repair",
})

# Modules whose tests start a Ray cluster of their own and compare it, kill its workers or audit its sockets: Ray
# sizes itself to the machine's cores, so two at once would each expect the whole machine. They run in the
# parallel pass, one test at a time on one pytest-xdist worker (`xdist_group`), beside the rest (green in five
# runs beside the whole suite's load, session 38; they had run alone since session 28).
RAY_CLUSTER_MODULES = frozenset({"test_parallel_run", "test_ray_loopback", "test_sweep"})


# The modules that take longest (minutes each on two cores; `--durations` of a full run), run first: pytest-xdist
# hands tests out in collection order, and one of these started last kept one core busy minutes after the other
# had run out of work. Whole modules move, in their own order, so a module's fixtures are still made once.
LONGEST_FIRST = ("test_tui_start_stress", "test_coverage_experiment", "test_smolvla", "test_install_beside_lerobot",
                 "test_no_egress", "test_no_orphans", "test_blind_comparison", "test_tui", "test_train_reference",
                 "test_latency_experiment")


# Modules whose quick tests import LeRobot's policies, processors or dataset classes (lerobot.policies pulls in
# transformers and torchvision: about 10 s). With `--dist loadgroup` (pyproject's addopts) pytest-xdist gives
# their quick tests to one worker, so the inner loop pays that import once rather than once a worker; their
# slow tests (several of the longest modules) stay spread over both, as CI needs. Test modules import
# these LeRobot parts inside the tests that use them, never at the top, so collection stays light.
LEROBOT_POLICY_MODULES = frozenset({
    "test_smolvla", "test_async_inference", "test_dataset", "test_latency_lock", "test_latency_threads", "test_twin",
    "test_hub_policy", "test_offline_eval", "test_run_e2e", "test_reality_gap", "test_no_orphans", "test_collect_cli",
    "test_no_egress", "test_blind_comparison", "test_run_request", "test_async_real_arm", "test_rehearse",
    "test_rtc_real_arm", "test_sweep", "test_lerobot_env",
})


# Modules whose slow tests share a module-scoped fixture that takes a core 20 s or more to build (a trained SmolVLA;
# a rendered set of a few dozen scenes). Spread test by test, each xdist worker built it again: about 150 of the
# parallel pass's 2,424 CPU-seconds (session 36, benchmarks/suite_cpu.py). Their slow tests go to one worker,
# module by module; their quick tests (if any) stay where the groups above put them.
SHARED_FIXTURE_MODULES = frozenset({"test_smolvla", "test_vision_stress", "test_vision_far", "test_vision_near_rim"})


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's own hook reads the xdist_group marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        slow = item.get_closest_marker("slow") is not None
        if item.get_closest_marker("desk") is not None:
            # a parallel-pass test that starts an emulated desk: one desk at a time, on one worker; another desk's
            # real-time threads stretch a desk's servo replies, ordinary load barely does (desk_ping_bench.py)
            item.add_marker(pytest.mark.xdist_group("desk"))
        elif item.path.stem in RAY_CLUSTER_MODULES:
            item.add_marker(pytest.mark.xdist_group("ray_cluster"))
        elif item.path.stem in LEROBOT_POLICY_MODULES and not slow:
            item.add_marker(pytest.mark.xdist_group("lerobot_policies"))   # not the slow ones: CI spreads those
        elif item.path.stem in SHARED_FIXTURE_MODULES and slow:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    rank = {stem: place for place, stem in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))   # stable: the rest keep their order


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
