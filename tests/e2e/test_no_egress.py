"""No packet leaves the machine unless the user names a host: every `connect()` (and every addressed
`sendto`/`sendmsg`) of a `--workers 2` run, of a sweep on local Ray and of an asynchronous-inference run
against LeRobot's policy server is read from `strace -f`, which sees Ray's own processes (GCS server,
raylet, agents, API server, workers) as well as Python's sockets, and any address that is not loopback
fails the test. Unix sockets and netlink are local by construction.

strace comes from scripts/setup (Debian's `strace`); the test installs nothing."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from tests.helpers import REPO
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

IPV4 = re.compile(r'sa_family=AF_INET,.*?sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)')
IPV6 = re.compile(r'sa_family=AF_INET6,.*?sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]+)"')


def off_machine(trace: str) -> list[str]:
    """The trace lines that address something other than loopback (IPv4, IPv6, or IPv4 mapped in IPv6)."""
    found = []
    for line in trace.splitlines():
        for match in (*IPV4.finditer(line), *IPV6.finditer(line)):
            address = ipaddress.ip_address(match.group(2))
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            if not (address.is_loopback or address.is_unspecified):
                found.append(line.strip())
    return found


# runs the command and writes its own exit status to a file: strace exits 1 on an error of its own (a tracee killed in
# a group-stop: "ptrace(PTRACE_LISTEN, ...): Input/output error", seen when a run ends before its Ray workers started
# and stops them), whatever the command returned
_STATUS_OF = "import subprocess, sys; rc = subprocess.call(sys.argv[2:]); open(sys.argv[1], 'w').write(str(rc))"


def traced(args: list[str], cwd: Path, trace: Path, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """`harness ARGS` under strace, every process it starts traced; the return code is the command's own."""
    strace = shutil.which("strace")
    assert strace, "strace is not on PATH: scripts/setup installs it (apt-get install strace)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    status = trace.with_suffix(".status")
    done = subprocess.run([strace, "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace),
                           sys.executable, "-c", _STATUS_OF, str(status), sys.executable, "-m", "harness.cli", *args],
                          cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout_s)
    own = int(status.read_text()) if status.exists() else done.returncode
    return subprocess.CompletedProcess(done.args, own, done.stdout, done.stderr)


def test_the_audit_sees_a_probe_of_the_metadata_address() -> None:
    """The check itself: the lines seen in the issue's trace are caught, loopback and Unix sockets are not."""
    trace = "\n".join([
        '7663  connect(23, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("169.254.169.254")}, 16) = -1',
        '7663  connect(23, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0',
        '7663  connect(17, {sa_family=AF_INET, sin_port=htons(38413), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        '7663  connect(17, {sa_family=AF_INET6, sin6_port=htons(38413), sin6_flowinfo=htonl(0), inet_pton(AF_INET6,'
        ' "::ffff:127.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = -1 EINPROGRESS',
        '7663  connect(17, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6,'
        ' "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH',
        '7663  connect(4, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT',
    ])
    assert [line.split("htons(")[1][:3] for line in off_machine(trace)] == ["80)", "53)", "443"]


@pytest.mark.slow
def test_a_workers_run_a_sweep_and_asynchronous_inference_connect_to_loopback_only(tmp_path: Path) -> None:
    protocol = tmp_path / "p.yaml"
    assert main(["protocol", "new", "--fixed", "--n", "4", "--time-limit-s", "2", "-o", str(protocol)]) == 0
    runs: dict[str, list[str]] = {
        "workers": ["run", str(protocol), "--headless", "--policy", "expert", "--no-video", "--scoresheet",
                    str(tmp_path / "w.yaml"), "--runs-dir", str(tmp_path / "runs"), "--workers", "2"]}
    save_tiny_act(tmp_path / "act" / "pretrained_model")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "audit", "checkpoints": ["act/pretrained_model"],
                                     "protocols": [protocol.name], "workers": 2,
                                     "conditions": [{"no_video": True},
                                                    {"no_video": True, "policy_server": "local"}]}))
    runs["sweep with asynchronous inference"] = ["sweep", str(sweep), "--scoresheets-dir", str(tmp_path / "sheets"),
                                                 "--runs-dir", str(tmp_path / "runs")]
    for name, args in runs.items():
        trace = tmp_path / f"{name.split()[0]}.strace"
        done = traced(args, tmp_path, trace)
        assert done.returncode == 0, f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}"
        text = trace.read_text()
        assert "127.0.0.1" in text, f"{name}: the trace saw no connection at all"   # Ray's own, at least
        assert off_machine(text) == [], f"{name} connected beyond loopback"
    cells = sorted((tmp_path / "sheets" / "audit").glob("*.yaml"))
    assert len(cells) == 2   # the lock-step cell and the policy-server cell both ran
