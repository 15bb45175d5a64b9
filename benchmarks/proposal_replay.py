"""The committed learned-policy attempts replayed in the simulator from their joints: is the judge's verdict a
consequence of the arm's motion? (issue 59 item 5, proposal rules F)

The outcome proposer reads a real arm's joints, gripper load and final frame; it is held to the simulator
judge's verdict. Where the verdict turns on something the arm's motion does not decide, no proposer reading
that motion can agree with it. This replays each attempt's recorded motion (`tests/anatomy_traces.py`: the
joint positions every control step, the gripper's command) on a fresh simulated table with the cube at its
planned start, lock-step, and judges the replay with the same `Judge`: per judge label, how many replays get
the recorded label, and for each that does not, both verdicts. The joints are those the arm reached, so the
replay commands each step the next step's reached positions (the gripper its recorded command).

Run: .venv/bin/python benchmarks/proposal_replay.py [--folder DIR ...] [--only incomplete]
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.anatomy_traces

import argparse
import time
from collections import Counter, defaultdict

import numpy as np

import harness.sim  # noqa: F401  (headless GL before mujoco)
from benchmarks.proposal_policies import TUNING
from harness.models.protocol import JOINT_NAMES, Scene
from harness.models.verdict import JudgeVerdict
from harness.sim.units import to_sim
from harness.sim.world import SimWorld
from tests.anatomy_traces import Attempt, attempts

TRAINED_SPOT_CM = Scene.model_fields["trained_cube_xy_cm"].default   # every exported protocol's


def replay(world: SimWorld, attempt: Attempt) -> JudgeVerdict:
    """The attempt's motion on a fresh table, judged: each step commands the next step's reached joints."""
    dx, dy = attempt.cube_start_cm
    commands = attempt.gripper_commands
    assert commands is not None, "every committed export has the gripper's command"
    world.reset(((TRAINED_SPOT_CM[0] + dx) / 100, (TRAINED_SPOT_CM[1] + dy) / 100), 0.0, attempt.joints[0])
    for i in range(len(attempt.joints)):
        reached = attempt.joints[min(i + 1, len(attempt.joints) - 1)]
        targets = np.array([to_sim(name, reached[name]) for name in JOINT_NAMES])
        targets[-1] = to_sim("gripper", commands[i])
        world.step_control(targets)
    return world.judge.verdict(world.data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=_Path, nargs="+", default=TUNING)
    parser.add_argument("--only", choices=("all", "incomplete"), default="all",
                        help="incomplete: only the judge's 'inside the bowl but the sequence was incomplete'")
    args = parser.parse_args()
    world = SimWorld()
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    moved: Counter[str] = Counter()
    lines = []
    start = time.process_time()
    for attempt in (a for folder in args.folder for a in attempts(folder=folder)):
        kind = "incomplete" if "incomplete" in attempt.judge["detail"] else attempt.label
        if args.only == "incomplete" and kind != "incomplete":
            continue
        got = replay(world, attempt)
        rows[kind][0] += 1
        if got.label.value == attempt.label and got.detail == attempt.judge["detail"]:
            rows[kind][1] += 1
        else:
            moved[f"{kind} -> {got.label.value}"] += 1
            lines.append(f"{attempt.policy} trial {attempt.trial}: recorded {attempt.label} "
                         f"({attempt.judge['detail']}), replayed {got.label.value} ({got.detail})")
    print(f"replayed in {time.process_time() - start:.0f} CPU s\n")
    print("| judge's recorded verdict | attempts | replay gives the same verdict |")
    print("|---|---:|---:|")
    for kind, (n, same) in sorted(rows.items()):
        print(f"| {kind} | {n} | {same} |")
    print()
    for change, n in moved.most_common():
        print(f"- {change}: {n}")
    print()
    for line in lines:
        print(f"- {line}")


if __name__ == "__main__":
    main()
