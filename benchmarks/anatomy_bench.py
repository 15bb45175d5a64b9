"""Failure anatomy: what it costs per trial when an attempt is recorded, and what it adds to a report.

1. Per trial: `anatomy_from_rows` over the joint trace of simulated expert and replay trials (forward
   kinematics of every step through the SO-101 model, then the events), CPU ms per trial; the
   forward-kinematics model is built once per run (its cost is shown apart).
2. Per report: `report --json` and the analysis behind the HTML (`analyze_report`) over a scoresheet of
   N attempts that all carry an anatomy, against the same sheet without one.

Run: .venv/bin/python benchmarks/anatomy_bench.py [--attempts 5000]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from scoresheet_bench import bulk_fill  # noqa: E402

import harness.sim  # noqa: E402,F401
from harness.models.protocol import load_protocol  # noqa: E402
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet  # noqa: E402
from harness.models.sheet_records import attempt_from_label  # noqa: E402
from harness.policies.scripted import ExpertPolicy, ReplayPolicy  # noqa: E402
from harness.reports.analysis import analyze_report  # noqa: E402
from harness.run.anatomy import GraspPoints, anatomy_from_rows  # noqa: E402
from harness.run.clock import MonotonicClock  # noqa: E402
from harness.run.engine import RunEngine, RunOptions  # noqa: E402
from harness.run.safety import GuardedRobot  # noqa: E402
from harness.run.stages import SimStage  # noqa: E402
from harness.run.terminal import TerminalObserver  # noqa: E402
from harness.sim.config_sim_so101 import SimSO101Config  # noqa: E402
from harness.sim.sim_so101 import SimSO101  # noqa: E402

PROTOCOL = REPO / "tests" / "data" / "small.yaml"


def traces(folder: Path) -> list[tuple[list[dict], tuple[float, float]]]:
    """The recorded joint traces of three expert and three replay trials."""
    import pandas as pd

    protocol = load_protocol(PROTOCOL)
    out = []
    for policy in (ExpertPolicy(), ReplayPolicy()):
        sheet = lock_scoresheet(folder / f"{policy.name}.yaml", build_locked(protocol, PROTOCOL, policy.name, "sim"),
                                {"cameras": {}})
        robot = SimSO101(SimSO101Config(render_cameras=[]))
        robot.connect()
        RunEngine(protocol, sheet, GuardedRobot(robot, release=robot.disable_torque, simulated=robot), policy,
                  SimStage(robot.world, protocol), TerminalObserver(operator_scores=False, out=io.StringIO()),
                  MonotonicClock(), RunOptions(runs_dir=folder / "runs", video=False, evidence_cameras=[])).run()
        robot.disconnect()
        for a in sheet.attempts:
            trial = protocol.trial(a.trial_index)
            rows = pd.read_parquet(a.artifacts["trajectory.parquet"]).to_dict("records")
            out.append((rows, (trial.dx_cm, trial.dy_cm)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=5000)
    args = parser.parse_args()
    protocol = load_protocol(PROTOCOL)
    scene = protocol.scene
    with tempfile.TemporaryDirectory() as scratch:
        recorded = traces(Path(scratch))
        t0 = time.process_time()
        fk = GraspPoints()
        build_ms = 1000 * (time.process_time() - t0)
        costs, anatomies = [], []
        for rows, cube in recorded:
            t0 = time.process_time()
            anatomies.append(anatomy_from_rows(rows, fk, scene.trained_cube_xy_cm, cube, scene.bowl_xy_cm, 5.0))
            costs.append(1000 * (time.process_time() - t0))
        steps = sum(len(rows) for rows, _ in recorded) / len(recorded)
        print(f"| per trial ({len(recorded)} trials, {steps:.0f} steps each) | CPU ms |")
        print("|---|---|")
        print(f"| forward-kinematics model, once per run | {build_ms:.0f} |")
        print(f"| anatomy of one trial, median | {sorted(costs)[len(costs) // 2]:.1f} |")
        print(f"| anatomy of one trial, max | {max(costs):.1f} |")

        n = args.attempts
        trials = [{"index": i, "dx_cm": (i % 13) - 6.0, "dy_cm": (i % 7) - 3.0} for i in range(1, n + 1)]
        text = PROTOCOL.read_text().split("trials:")[0] + "trials:\n" + "".join(
            f"- {{index: {t['index']}, dx_cm: {t['dx_cm']}, dy_cm: {t['dy_cm']}}}\n" for t in trials)
        big = Path(scratch) / "big.yaml"
        big.write_text(text)
        big_protocol = load_protocol(big)
        print(f"\n| report over {n:,} attempts | without anatomy (s CPU) | with anatomy (s CPU) |")
        print("|---|---|---|")
        timings = {}
        for with_anatomy in (False, True):
            sheet = lock_scoresheet(Path(scratch) / f"big-{with_anatomy}.yaml",
                                    build_locked(big_protocol, big, "expert", "sim"), {"cameras": {}})
            attempts = []
            for i, t in enumerate(trials):
                anatomy = anatomies[i % len(anatomies)] if with_anatomy else None
                attempts.append(attempt_from_label(
                    "success" if i % 3 else "no_grasp", trial_index=t["index"], attempt=1,
                    started_at="2026-12-01T10:00:00.000+00:00", ended_at="2026-12-01T10:00:08.000+00:00",
                    duration_s=8.0, anatomy=anatomy))
            bulk_fill(sheet, attempts)
            sheet = load_scoresheet(sheet.path)
            t0 = time.process_time()
            analyze_report([sheet]).to_json()
            timings[with_anatomy] = time.process_time() - t0
        print(f"| `analyze_report` + JSON | {timings[False]:.2f} | {timings[True]:.2f} |")


if __name__ == "__main__":
    main()
