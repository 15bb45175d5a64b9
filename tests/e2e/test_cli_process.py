"""The e2e tests' CLI starter (tests/cli_process.py): a CLI forked from the preloaded server is isolated as a
subprocess is (pid, argv, folder, environment, streams, exit status, signals), a crash ends only the child, a
request the server cannot honour gets a real subprocess, and the server dies with the process that started it."""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.cli_process import (
    LIGHT_PRELOAD,
    CliProcess,
    CliServer,
    HarnessCli,
    _receive,
    _send,
    fresh_reason,
    reported_cpu_s,
    temporary_root,
)
from tests.helpers import REPO, wait_until

PROBE = "tests.cli_process_probe"


def _report(harness_cli, tmp_path: Path, **popen) -> dict:
    done = harness_cli.run(["report", "3"], module=PROBE, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           **popen)
    assert done.returncode == 3, done.stderr
    return json.loads(done.stdout)


def test_a_forked_cli_has_its_own_pid_argv_folder_environment_and_stdin(harness_cli, tmp_path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "USER"}
    env["HARNESS_STATE_DIR"] = str(tmp_path / "state")   # read when used: honoured by the fork
    env["PROBE_ONLY"] = "yes"
    process = harness_cli.popen(["report", "3"], module=PROBE, cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert isinstance(process, CliProcess), harness_cli.last_fresh_reason
    out, err = process.communicate("typed on stdin\n", timeout=60)
    assert process.returncode == 3, err
    seen = json.loads(out)
    assert seen["pid"] == process.pid and seen["ppid"] == harness_cli.server.pid != os.getpid()
    assert seen["argv"] == [str(REPO / "tests" / "cli_process_probe.py"), "report", "3"]   # as `python -m` sets it
    assert seen["main"] == "__main__" and seen["path0"] == str(tmp_path) and seen["cwd"] == str(tmp_path)
    assert seen["env"] == env   # the environment replaced whole: USER removed, the others set
    assert seen["stdin"] == "typed on stdin\n"
    assert seen["pgid"] == os.getpgid(0)   # the test's process group, as a subprocess's
    again = _report(harness_cli, tmp_path)
    assert again["pid"] != seen["pid"] and again["ppid"] == seen["ppid"] and again["env"] == dict(os.environ)


def _streams_on_a_terminal(harness_cli, tmp_path: Path, env: dict[str, str], fresh: bool) -> dict:
    leader, follower = pty.openpty()
    try:
        process = harness_cli.popen(["report", "0"], module=PROBE, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                    stdout=follower, stderr=subprocess.PIPE, start_new_session=True, fresh=fresh)
        assert isinstance(process, CliProcess) != fresh, harness_cli.last_fresh_reason
        assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
        return json.loads(os.read(leader, 65536).decode().splitlines()[0])
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_streams_are_buffered_as_a_fresh_interpreters_and_a_new_session_is_honoured(harness_cli, tmp_path,
                                                                                   unbuffered) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    forked = _streams_on_a_terminal(harness_cli, tmp_path, env, fresh=False)
    fresh = _streams_on_a_terminal(harness_cli, tmp_path, env, fresh=True)
    assert forked["streams"] == fresh["streams"]
    assert forked["streams"][1][:2] == ([False, True] if unbuffered else [True, False])   # stdout on a terminal
    assert forked["pgid"] == forked["pid"]
    pipes = _report(harness_cli, tmp_path, env=env)
    assert pipes["streams"][1][:2] == ([False, True] if unbuffered else [False, False])


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM),
                                           (signal.SIGKILL, -signal.SIGKILL)])
def test_a_signal_reaches_the_child_alone_and_its_status_comes_back(harness_cli, tmp_path, sig, code) -> None:
    process = harness_cli.popen(["wait"], module=PROBE, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert isinstance(process, CliProcess)
    assert process.stdout is not None and process.stdout.readline() == b"waiting\n"
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    assert process.poll() is None
    process.send_signal(sig)
    assert process.wait(timeout=30) == code
    if sig == signal.SIGINT:   # Python's own end: the KeyboardInterrupt's traceback, then death by SIGINT
        assert process.stderr is not None and b"KeyboardInterrupt" in process.stderr.read()
    process.send_signal(signal.SIGKILL)   # after the end: nothing, as Popen does
    assert psutil.pid_exists(harness_cli.server.pid)
    assert _report(harness_cli, tmp_path)["ppid"] == harness_cli.server.pid   # the server serves on


def test_a_crash_ends_only_the_child_and_an_uncaught_error_exits_1_with_its_traceback(harness_cli, tmp_path) -> None:
    crashed = harness_cli.run(["crash"], module=PROBE, cwd=tmp_path, capture_output=True, timeout=60)
    assert crashed.returncode == -signal.SIGSEGV
    raised = harness_cli.run(["raise"], module=PROBE, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert raised.returncode == 1 and raised.stderr.strip().endswith("ValueError: the probe's own error")
    assert _report(harness_cli, tmp_path)["ppid"] == harness_cli.server.pid


def test_the_interpreters_shutdown_joins_threads_runs_atexit_and_flushes(harness_cli, tmp_path) -> None:
    done = harness_cli.run(["shutdown"], module=PROBE, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["unflushed", "thread joined", "atexit ran"]


def test_the_harness_cli_forked_writes_where_it_is_started_and_refuses_bad_flags_in_one_line(harness_cli,
                                                                                              tmp_path) -> None:
    made = harness_cli.run(["protocol", "new", "--fixed", "--n", "2", "-o", "p.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert harness_cli.last_fresh_reason is None
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "p.yaml").exists()
    assert "RuntimeWarning" not in made.stderr   # harness.cli runs as __main__ as under `python -m`, no warning
    bad = harness_cli.run(["run", "p.yaml", "--no-such-flag"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_an_environment_read_at_import_gets_a_real_subprocess(harness_cli, tmp_path) -> None:
    server = harness_cli.server.environment()
    assert fresh_reason(dict(server), server) is None
    assert "HF_HOME" in (fresh_reason({**server, "HF_HOME": str(tmp_path)}, server) or "")
    assert "MUJOCO_GL" in (fresh_reason({**server, "MUJOCO_GL": "osmesa"}, server) or "")
    assert "HF_HUB_OFFLINE" in (fresh_reason({k: v for k, v in server.items() if k != "HF_HUB_OFFLINE"}, server)
                                or "")
    assert fresh_reason({**server, "PYTHONPATH": str(REPO)}, server) is None   # this checkout: the same
    assert fresh_reason({**server, "PYTHONPATH": str(tmp_path)}, server) is not None
    scratch = Path(temporary_root(server)) / "harness-tmp-123-abcd"   # what an in-process `harness` call sets
    assert fresh_reason({**server, "TMPDIR": str(scratch)}, server) is None
    assert "TMPDIR" in (fresh_reason({**server, "TMPDIR": str(tmp_path)}, server) or "")
    process = harness_cli.popen(["report", "0"], module=PROBE, cwd=tmp_path, stdout=subprocess.PIPE,
                                env={**os.environ, "HF_HOME": str(tmp_path / "hf")})
    out, _ = process.communicate(timeout=120)
    assert not isinstance(process, CliProcess) and "HF_HOME" in (harness_cli.last_fresh_reason or "")
    assert json.loads(out)["ppid"] == os.getpid() and json.loads(out)["env"]["HF_HOME"] == str(tmp_path / "hf")
    fresh = harness_cli.popen(["report", "0"], module=PROBE, cwd=tmp_path, stdout=subprocess.DEVNULL, fresh=True)
    assert fresh.wait(timeout=120) == 0 and not isinstance(fresh, CliProcess)


def test_the_server_dies_with_the_process_that_started_it(tmp_path) -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", "from tests.cli_process import LIGHT_PRELOAD, CliServer; "
                               "s = CliServer(preload=LIGHT_PRELOAD); s.environment(); "
                               "print(s.pid, flush=True); import signal; signal.pause()"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        server = int(starter.stdout.readline())
        assert psutil.Process(server).ppid() == starter.pid
    finally:
        starter.kill()
        starter.wait()
    wait_until(lambda: not psutil.pid_exists(server) or psutil.Process(server).status() == psutil.STATUS_ZOMBIE,
               30, "the server to end with its pytest process")


def test_two_messages_queued_on_the_socket_are_read_one_at_a_time_with_their_descriptors() -> None:
    """A CLI that ends at once: the server's pid and exit status can both be waiting when the test reads the pid."""
    ours, theirs = socket.socketpair()
    read_end, write_end = os.pipe()
    try:
        _send(theirs, {"pid": 7}, [write_end])
        _send(theirs, {"returncode": 0, "cpu_s": 0.1})
        theirs.close()
        first, fds = _receive(ours, max_fds=3)
        assert first == {"pid": 7} and len(fds) == 1
        os.write(fds[0], b"x")   # the descriptor that came with it is the pipe's write end
        os.close(fds[0])
        assert os.read(read_end, 1) == b"x"
        assert _receive(ours) == ({"returncode": 0, "cpu_s": 0.1}, [])
        assert _receive(ours) == (None, [])
    finally:
        ours.close()
        os.close(read_end)
        os.close(write_end)


def test_a_patched_environment_is_compared_when_the_cli_starts(harness_cli, tmp_path, monkeypatch) -> None:
    """`env` left out: the test's environment as it is now, so a variable read at import that the test has patched
    gets a real subprocess, and one read when used is handed to the fork."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    seen = _report(harness_cli, tmp_path)
    assert harness_cli.last_fresh_reason is None and seen["env"]["HARNESS_STATE_DIR"] == str(tmp_path / "state")
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    seen = _report(harness_cli, tmp_path)
    assert "MUJOCO_GL" in (harness_cli.last_fresh_reason or "") and seen["ppid"] == os.getpid()
    assert harness_cli.server.environment()["MUJOCO_GL"] != "osmesa"   # the server kept the session's


# --- a shell script's commands, through tests/cli_client.py ------------------------------------------------------
def test_a_scripts_command_is_forked_with_its_argv_folder_environment_streams_and_exit_status(harness_cli,
                                                                                               tmp_path) -> None:
    """What a script's `"$HARNESS" ...` sees through the client is what the real command would: the arguments, the
    folder the script is in, its environment, and the descriptors it was given (here a redirection from a file and
    to files); the script gets the command's exit status."""
    server = harness_cli.script_server
    env = {**harness_cli.script_env(), "PROBE_ONLY": "yes"}
    (tmp_path / "sub").mkdir()
    (tmp_path / "in.txt").write_text("from a file\n")
    script = 'cd sub && "$@" report 3 "two words" < ../in.txt > ../out.json 2> ../err.txt; echo "status $?"'
    done = subprocess.run(["bash", "-c", script, "bash", *server.client_command(PROBE)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout == "status 3\n", (done.stderr, (tmp_path / "err.txt").read_text())
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["ppid"] == server.pid and seen["cwd"] == str(tmp_path / "sub")
    assert seen["argv"] == [str(REPO / "tests" / "cli_process_probe.py"), "report", "3", "two words"]
    assert seen["stdin"] == "from a file\n"
    assert seen["env"]["PROBE_ONLY"] == "yes" and seen["env"]["PWD"] == str(tmp_path / "sub")   # bash's, as it is
    assert seen["env"]["OMP_NUM_THREADS"] == "1" == server.environment()["OMP_NUM_THREADS"]
    assert server.clients_cpu_s() > 0   # counted, though the test never hears from the CLI itself


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_client_reaches_the_forked_command_and_the_client_ends_by_it(harness_cli, tmp_path,
                                                                                      sig) -> None:
    server = harness_cli.script_server
    env = harness_cli.script_env()
    client = subprocess.Popen([*server.client_command(PROBE), "wait"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert client.stdout is not None and client.stdout.readline() == b"waiting\n"
    forked = [child for child in psutil.Process(server.pid).children() if child.pid != client.pid]
    assert forked and client.poll() is None
    client.send_signal(sig)
    assert client.wait(timeout=30) == -sig   # ended by the signal that ended the command, as a shell expects
    wait_until(lambda: not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in forked),
               30, "the forked command to end")


def test_a_script_reads_a_killed_commands_status_as_a_shell_does(harness_cli, tmp_path) -> None:
    """128 + n for a command a signal ended (a script's `trap` and `set -e` depend on it). SIGTERM: a shell's
    background command ignores SIGINT, and the client leaves it ignored, as Python does."""
    server = harness_cli.script_server
    script = ('"$@" wait > out.txt & until [[ -s out.txt ]]; do sleep 0.05; done; '
              'kill -TERM $!; wait $!; echo "status $?"')
    done = subprocess.run(["bash", "-c", script, "bash", *server.client_command(PROBE)], cwd=tmp_path,
                          env=harness_cli.script_env(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.stdout == "status 143\n", done.stderr


def test_a_command_the_server_cannot_fork_becomes_the_real_command(harness_cli, tmp_path) -> None:
    """An environment variable read at import that differs from the server's (`fresh_reason`): the server refuses,
    and the client execs `python -m MODULE` itself, so the script still runs the command as given."""
    server = harness_cli.script_server
    env = {**harness_cli.script_env(), "HF_HOME": str(tmp_path / "hf")}
    client = subprocess.Popen([*server.client_command(PROBE), "report", "4"], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    out, _ = client.communicate(timeout=120)
    seen = json.loads(out)
    assert client.returncode == 4 and seen["pid"] == client.pid and seen["ppid"] == os.getpid()   # the client itself
    assert seen["env"]["HF_HOME"] == str(tmp_path / "hf")


def test_a_scripts_python_bin_forks_its_commands_and_python_dash_m_and_runs_other_python_itself(harness_cli,
                                                                                                  tmp_path) -> None:
    env = harness_cli.script_env()
    server = harness_cli.script_server
    forked_before = len(server.clients_cpu())
    script = ('"$PYTHON_BIN/harness" protocol new --fixed --n 1 -o p.yaml && '
              '"$PYTHON_BIN/python" -m tests.cli_process_probe report 0 < /dev/null > probe.json && '
              '"$PYTHON_BIN/python" -c "import os; print(os.getppid())" && echo "$$"')
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.yaml").is_file()
    assert json.loads((tmp_path / "probe.json").read_text())["ppid"] == server.pid
    python_parent, shell = done.stdout.split()[-2:]
    assert python_parent == shell   # `python -c` is the interpreter itself, the script's child
    assert len(server.clients_cpu()) == forked_before + 2


@pytest.mark.slow
def test_lerobot_train_forked_from_the_server_trains_exactly_as_a_fresh_one(harness_cli, tmp_path) -> None:
    """The server has imported torch and LeRobot but run nothing: a seeded `lerobot-train` forked from it (no torch
    thread pool yet, no CUDA, its data loader's workers its own) logs the same losses and saves the same weights, to
    the byte, as the same command in a fresh interpreter."""
    env = harness_cli.script_env()
    tools = Path(env["PYTHON_BIN"])
    server = harness_cli.script_server

    def tool(*args: str) -> str:
        done = subprocess.run([*args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout + done.stderr

    tool(str(tools / "harness"), "protocol", "new", "--fixed", "--n", "2", "-o", "p.yaml")
    tool(str(tools / "harness"), "collect", "p.yaml", "--policy", "expert", "--episodes", "2", "--accept",
         "clean-release", "--image-size", "96x72", "-o", "data")
    recipe = ["--policy.type=act", "--dataset.repo_id=local/data", f"--dataset.root={tmp_path / 'data'}",
              "--dataset.video_backend=pyav", "--policy.push_to_hub=false", "--wandb.enable=false",
              "--policy.device=cpu", "--policy.pretrained_backbone_weights=null", "--policy.dim_model=32",
              "--policy.n_heads=2", "--policy.dim_feedforward=64", "--policy.n_encoder_layers=1",
              "--policy.n_decoder_layers=1", "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8",
              "--policy.chunk_size=10", "--policy.n_action_steps=10", "--steps=3", "--batch_size=2", "--save_freq=3",
              "--log_freq=1", "--num_workers=1", "--seed=1000"]
    forked_before = len(server.clients_cpu())
    forked = tool(str(tools / "lerobot-train"), *recipe, "--output_dir=forked")
    assert len(server.clients_cpu()) == forked_before + 1   # the server forked it
    fresh = tool(sys.executable, "-m", "lerobot.scripts.lerobot_train", *recipe, "--output_dir=fresh")
    assert len(server.clients_cpu()) == forked_before + 1

    def losses(log: str) -> list[str]:
        return [" ".join(word for word in line.split() if word.startswith(("step:", "loss:", "grdn:")))
                for line in log.splitlines() if " loss:" in line]

    assert len(losses(forked)) == 3 and losses(forked) == losses(fresh), (losses(forked), losses(fresh))
    weights = "checkpoints/000003/pretrained_model/model.safetensors"
    assert (tmp_path / "forked" / weights).read_bytes() == (tmp_path / "fresh" / weights).read_bytes()


def test_a_closed_servers_cpu_is_counted_once(tmp_path) -> None:
    """benchmarks/suite_cpu_plugin.py adds this process's CPU, its waited-for children's and `reported_cpu_s()`:
    reaping a server at the session's end brings the CLIs it forked into RUSAGE_CHILDREN, where they must not be
    counted a second time (they were, as the last test's CPU, before)."""
    import resource

    def counted() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime + reported_cpu_s()

    before = counted()
    cli = HarnessCli(CliServer(preload=LIGHT_PRELOAD))
    cli.run(["report", "0"], module=PROBE, cwd=tmp_path, capture_output=True, timeout=120)
    subprocess.run(["bash", "-c", '"$PYTHON_BIN/harness" protocol new --fixed --n 1 -o p.yaml'], cwd=tmp_path,
                   env=cli.script_env(), check=True, timeout=120)
    servers = sum(server.cpu_s for server in {cli.server, cli.script_server}) + cli.script_server.clients_cpu_s()
    open_ = counted() - before
    cli.close()
    closed = counted() - before
    assert servers > 0.2 and open_ >= servers   # the servers' imports and what they forked, counted while open
    assert closed - open_ < servers / 2, (servers, open_, closed)   # and not again when they were reaped


def test_a_forked_cli_collected_unwaited_does_not_break_the_workers_later_subprocesses(harness_cli, tmp_path) -> None:
    """A test that fails mid-wait leaves its CliProcess in a traceback's reference cycle; the cyclic collector runs
    Popen.__del__ (which puts an unwaited process on subprocess._active, polled by every later Popen) and finalises
    its status socket in the same pass. That closed socket made every later subprocess in the worker raise
    "file descriptor cannot be a negative integer (-1)" (44 tests of one CI run)."""
    process = harness_cli.popen(["wait"], module=PROBE, cwd=tmp_path, stdout=subprocess.PIPE)
    assert isinstance(process, CliProcess)
    assert process.stdout is not None and process.stdout.readline() == b"waiting\n"
    process.kill()
    process._status.close()   # what the collector's finaliser does to it  # type: ignore[union-attr]
    subprocess._active.append(process)   # type: ignore[attr-defined]   # what Popen.__del__ does with it
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0
    assert process not in subprocess._active   # type: ignore[attr-defined]
    process.stdout.close()
