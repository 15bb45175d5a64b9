"""Asynchronous inference against LeRobot's policy server: what the simulated arm saw, per setting.

    nice -n 19 .venv/bin/python benchmarks/async_bench.py [--trials 2] [--seconds 6]

Saves the tiny ACT (`tests/tiny_policy.py`, 10 actions a chunk), then for each row runs `harness run
tests/data/small.yaml --no-video` (episodes cut to `--seconds`) in this process: `--policy-server` against
LeRobot's own server (`python -m lerobot.async_inference.policy_server`, started per row on 127.0.0.1 with the
row's `--inference_latency`), then, last, LeRobot's synchronous engine with `--latency measured` (each action
lands its own measured policy time late). Async round trips are every chunk's wall-clock time from sending the
observation to receiving the chunk (all trials pooled, so p99 is over every chunk); underruns are steps with an
empty queue (sync: steps whose action landed more than a period late). CPU seconds are this
process's and the server's, which load does not skew the way it skews wall time.

The last row is the real-arm path: `harness run --robot so101 --policy-server` on the emulated arm (the bus
emulator with the simulated arm and cameras) in a child process, paced at 30 Hz with the queue in wall time
(two trials of `--seconds`); its harness CPU is the child's. `--real-arm-only` runs that row alone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.app.parts import Parts, make_policy  # noqa: E402
from harness.app.run_command import run_from_args  # noqa: E402
from harness.cli import build_parser  # noqa: E402
from harness.models.scoresheet import load_scoresheet  # noqa: E402
from harness.stats.estimates import percentile  # noqa: E402
from tests.policy_server import PolicyServerProcess, free_port  # noqa: E402
from tests.tiny_policy import save_tiny_act  # noqa: E402


class KeepingRoundTrips:
    """The async policy, keeping every trial's round trips (it forgets them when the next trial starts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.all_ms: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reset(self, context: Any) -> None:
        self.all_ms += self.inner.round_trips_ms
        self.inner.reset(context)

    def close(self) -> None:
        self.all_ms += self.inner.round_trips_ms
        self.inner.close()


def _server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _row(folder: Path, name: str, protocol: Path, extra: list[str], server: PolicyServerProcess | None) -> list[str]:
    kept: list[KeepingRoundTrips] = []

    def policy(ref: str, proto: Any, settings: Any, device: str | None, robot: Any, inference: Any = None) -> Any:
        built = make_policy(ref, proto, settings, device, robot, inference)
        if server is None:
            return built
        kept.append(KeepingRoundTrips(built))
        return kept[-1]

    sheet = folder / f"{name}.yaml"
    args = build_parser().parse_args(["run", str(protocol), "--headless", "--no-video", "--scoresheet", str(sheet),
                                      "--runs-dir", str(folder / "runs"), "--device", "cpu", *extra])
    server_cpu = _server_cpu_s(server.pid) if server is not None else 0.0
    cpu, wall = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = run_from_args(args, Parts(policy=policy))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if code != 0:
        raise SystemExit(f"{name}: harness run exited {code}")
    if server is not None:
        server_cpu = _server_cpu_s(server.pid) - server_cpu
    loops = [a.loop for a in load_scoresheet(sheet).scored_attempts()]
    underruns = "/".join(f"{loop.queue_underruns}" for loop in loops)
    steps = "/".join(f"{loop.steps}" for loop in loops)
    chunks = "/".join("-" if loop.chunk_switches is None else str(loop.chunk_switches) for loop in loops)
    if kept:
        ms = kept[0].all_ms
        figures = [f"{percentile(ms, 50):.0f}", f"{percentile(ms, 95):.0f}", f"{percentile(ms, 99):.0f}",
                   f"{max(ms):.0f}", str(len(ms))]
    else:   # sync: the sheet's per-trial figures (simulated ms), the worst trial's shown
        figures = [f"{max(loop.obs_to_action_ms_p50 or 0 for loop in loops):.0f}",
                   f"{max(loop.obs_to_action_ms_p95 or 0 for loop in loops):.0f}", "-",
                   f"{max(loop.obs_to_action_ms_max or 0 for loop in loops):.0f}", "-"]
    return [name, *figures, f"{underruns} of {steps}", chunks, f"{cpu:.1f}", f"{server_cpu:.1f}", f"{wall:.0f}"]


def _real_arm_row(folder: Path, seconds: float, server: PolicyServerProcess) -> list[str]:
    """`harness run --robot so101 --policy-server` on the emulated arm (`open_rig`, simulated cameras) in a child
    process, paced at 30 Hz with the queue in wall time; the operator's cube placement and keys scripted as in
    tests/realtime/test_real_arm_path.py. Figures are the sheet's per-trial ones (the worst trial's shown)."""
    import resource

    from harness.emulator.scenario import default_scenario, open_rig
    from tests.lerobot_tool import LeRobotTool
    from tests.realtime.test_real_arm_path import PLACE, TWO_TRIALS

    checkpoint = save_tiny_act(folder / "act")
    protocol = folder / "desk.yaml"
    protocol.write_text(TWO_TRIALS.replace("episode_time_limit_s: 3.0", f"episode_time_limit_s: {seconds}"))
    socket = folder / "cams.sock"
    server_cpu = _server_cpu_s(server.pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        tool = LeRobotTool("harness.cli", ["run", str(protocol), "--robot", "so101", "--port", rig.port,
                                           "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                           "--camera", f"top=sim:{socket}@128x96", "--headless", "--no-video",
                                           "--policy-server", server.address], folder)
        for _ in range(2):
            tool.expect("Place the cube at dx", timeout_s=180)
            tool.expect("then press Enter.")
            dx, dy, yaw = (float(v) for v in PLACE.findall(tool.output)[-1])
            rig.place_cube(dx, dy, yaw)
            tool.send()
            tool.expect("Score:", timeout_s=120)
            tool.send("n")
            tool.expect("Note (optional)")
            tool.send("")
        if tool.finish() != 0:
            raise SystemExit(f"real arm: harness run failed\n{tool.output[-2000:]}")
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    server_cpu = _server_cpu_s(server.pid) - server_cpu
    loops = [a.loop for a in load_scoresheet(folder / "scoresheets" / "desk-act.yaml").scored_attempts()]
    figures = [f"{max(loop.obs_to_action_ms_p50 or 0 for loop in loops):.0f}",
               f"{max(loop.obs_to_action_ms_p95 or 0 for loop in loops):.0f}", "-",
               f"{max(loop.obs_to_action_ms_max or 0 for loop in loops):.0f}", "-"]
    return ["async, real arm (emulated, paced 30 Hz, wall-time queue), server latency 0, threshold 0.5", *figures,
            "/".join(str(loop.queue_underruns) for loop in loops) + " of "
            + "/".join(str(loop.steps) for loop in loops),
            "/".join(str(loop.chunk_switches) for loop in loops), f"{cpu:.1f}", f"{server_cpu:.1f}", f"{wall:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=6.0, help="episode time limit (the tiny ACT never grasps)")
    parser.add_argument("--real-arm-only", action="store_true",
                        help="only the real-arm row (two trials on the emulated arm)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = (REPO / "tests" / "data" / "small.yaml").read_text()
        protocol = folder / "small.yaml"
        protocol.write_text(text.replace("episode_time_limit_s: 12.0", f"episode_time_limit_s: {args.seconds}"))
        policy = str(save_tiny_act(folder / "tiny_act"))
        common = ["--policy", policy, "--max-trials", str(args.trials)]
        rows = []
        for name, server_latency, queue in [] if args.real_arm_only else [
            ("async, server latency 0, threshold 0.5", 0.0, []),
            ("async, server latency 33 ms (LeRobot default), threshold 0.5", 1 / 30, []),
            ("async, server latency 0, threshold 1.0", 0.0, ["--chunk-size-threshold", "1.0"]),
        ]:
            server = PolicyServerProcess(free_port(), folder / "server", inference_latency_s=server_latency).start()
            try:
                rows.append(_row(folder, name, protocol, [*common, "--policy-server", server.address, *queue],
                                 server))
            finally:
                server.stop()
        if not args.real_arm_only:
            rows.append(_row(folder, "sync, --latency measured", protocol, [*common, "--latency", "measured"],
                             None))
        server = PolicyServerProcess(free_port(), folder / "server").start()
        try:
            rows.append(_real_arm_row(folder, args.seconds, server))
        except AssertionError as exc:   # the emulated bus timed out under load: say so, keep the other rows
            rows.append(["async, real arm (emulated): run failed", (str(exc).splitlines() or [""])[-1][:100],
                         *["-"] * 9])
        finally:
            server.stop()
    header = ["engine", "obs-to-action p50 ms", "p95", "p99", "max", "chunks timed", "underruns of steps",
              "chunk switches", "harness CPU s", "server CPU s", "wall s"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
