"""A shell script's commands forked from the e2e tests' CLI server (tests/cli_client.py) against the real commands:
`scripts/coverage_experiment --quick` under `/usr/bin/time`, both ways, CPU seconds and wall seconds.

Through the client, the commands' CPU is spent in the server's children, which `time` does not see: the server
writes each one down (tests/cli_process.py, `clients_cpu`), and its own start (the imports, paid once per pytest
worker) is shown on a line of its own.

    .venv/bin/python benchmarks/script_cli_bench.py [--script coverage_experiment] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cli_process import SCRIPT_THREADS, CliServer, HarnessCli  # noqa: E402


def timed(script: str, out: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds `time` reports for the script and what it waited for, wall seconds, exit status)."""
    report = out.with_suffix(".time")
    started = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", str(report), "bash", str(REPO / "scripts" / script),
                           "--quick", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    user, system = map(float, re.findall(r"[\d.]+", report.read_text().splitlines()[-1]))
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return user + system, wall, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="coverage_experiment")
    parser.add_argument("--keep", type=Path, help="the scripts' output folders go here (kept)")
    options = parser.parse_args()
    folder = options.keep or Path(tempfile.mkdtemp(prefix="script-cli-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **SCRIPT_THREADS}
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    real_cpu, real_wall, real_code = timed(options.script, folder / "real", env)
    cli = HarnessCli(CliServer(env=env))
    try:
        script_env = cli.script_env(env)
        server = cli.script_server
        client_cpu, client_wall, client_code = timed(options.script, folder / "client", script_env)
        forked, forked_cpu, start_cpu = len(server.clients_cpu()), server.clients_cpu_s(), server.started["cpu_s"]
    finally:
        cli.close()
    print(f"| `scripts/{options.script} --quick` | CPU s | wall s | exit |")
    print("|---|---:|---:|---:|")
    print(f"| real commands (`time`) | {real_cpu:.1f} | {real_wall:.0f} | {real_code} |")
    print(f"| through the client: `time` (the script, its clients, its other processes) | {client_cpu:.1f} | "
          f"{client_wall:.0f} | {client_code} |")
    print(f"| through the client: the {forked} forked commands | {forked_cpu:.1f} | | |")
    print(f"| through the client: total, without the server's start | {client_cpu + forked_cpu:.1f} | | |")
    print(f"| the server's start (once per pytest worker) | {start_cpu:.1f} | | |")


if __name__ == "__main__":
    main()
