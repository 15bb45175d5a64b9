"""Ray as `harness run --workers 2` starts it: nothing reachable from the network, nothing left behind.

An exposed Ray runtime runs whatever code reaches its ports, so every socket the driver and its Ray
processes listen on must be a loopback one; and a driver killed without warning must not leave Ray
processes (one of them listening) behind for a minute.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.cli import main
from harness.errors import HarnessInputError
from tests.helpers import wait_until

pytestmark = pytest.mark.ray_cluster   # starts Ray clusters of its own (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 10.0


def _wait_for(condition, deadline_s: float, what: str):
    return wait_until(condition, deadline_s, what, poll_s=0.2)


def _family(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _is_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Iterator[tuple[subprocess.Popen[str], list[psutil.Process]]]:
    """A `--workers 2` run in its own process, once both Ray workers are up; killed at the end if alive."""
    folder = tmp_path_factory.mktemp("ray")
    protocol = folder / "p.yaml"
    assert main(["protocol", "new", "--randomized", "--n", "20", "--radius-cm", "4", "--min-spacing-cm", "1",
                 "--seed", "3", "-o", str(protocol)]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(protocol), "--headless", "--policy",
                                "expert", "--no-video", "--scoresheet", str(folder / "s.yaml"), "--runs-dir",
                                str(folder / "runs"), "--workers", "2", "--no-driver-worker"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=folder)
    try:
        family = _wait_for(lambda: (f := _family(process.pid)) and sum(
            "ray::TrialWorker" in " ".join(p.cmdline()) or p.name().startswith("ray::TrialWorker") for p in f
            if p.is_running()) >= 2 and f, 180, "two Ray workers up")
        yield process, family
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.slow
def test_a_workers_run_listens_on_loopback_only(driver) -> None:
    process, _ = driver
    listening: list[tuple[str, str, int]] = []
    for member in _family(process.pid):
        try:
            for conn in member.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    listening.append((member.name(), conn.laddr.ip, conn.laddr.port))
        except psutil.NoSuchProcess:
            continue
    assert any(name == "gcs_server" for name, _, _ in listening), listening   # Ray's servers were seen
    exposed = [entry for entry in listening if not _is_loopback(entry[1])]
    assert exposed == [], f"listening beyond loopback: {exposed}"


@pytest.mark.slow
def test_a_killed_driver_leaves_no_ray_process_behind(driver) -> None:
    process, family = driver
    ray_processes = [p for p in {*family, *_family(process.pid)} if p.pid != process.pid]
    assert len(ray_processes) >= 4   # GCS server, raylet, agents, workers
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    _wait_for(lambda: not [p for p in ray_processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
              GONE_WITHIN_S, "every Ray process of the killed driver gone")


def test_an_address_where_nothing_answers_is_refused_in_one_line(tmp_path, capsys) -> None:
    import socket

    with socket.socket() as probe:   # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    protocol = tmp_path / "p.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "2", "-o", str(protocol)]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    started = time.monotonic()
    code = main(["run", str(protocol), "--headless", "--policy", "expert", "--scoresheet", str(tmp_path / "s.yaml"),
                 "--runs-dir", str(tmp_path / "runs"), "--workers", "2", "--address", f"127.0.0.1:{port}"])
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--address" in err[0] and f"127.0.0.1:{port}" in err[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_malformed_address_is_refused() -> None:
    from harness.app.parallel.runs import check_address

    with pytest.raises(HarnessInputError) as err:
        check_address("no-port-here")
    assert err.value.field == "--address"
