"""Does a cube that lands in the simulated bowl come to rest, as a real one does? (issue 59 item 5)

The judge's success needs the cube at rest in the bowl (its `rest_max_speed`, `rest_max_ang_speed`) for
`stable_s`; a real cube dropped into a bowl rests in well under a second. Two measurements of the simulator:

1. Seeded drops: a cube let go 1-9 cm over the bowl floor anywhere within 3.5 cm of its centre, turned up to
   0.6 rad about each horizontal axis and any yaw, tossed sideways (sd 10 cm/s), the arm parked far away; per drop
   the time after which it stays at rest to the end (3 s). Pure physics, no arm, no policy.
2. The committed attempts the judge called "inside the bowl but the sequence was incomplete" (the cube released
   over the bowl, the arm withdrawn, never 0.5 s at rest), replayed from their recorded joints as
   `benchmarks/proposal_replay.py` does: each replay's verdict, and when after the release its cube began its
   first 0.5 s at rest.

Run: .venv/bin/python benchmarks/bowl_rest_bench.py [--drops 200] [--no-replay] [--plot POLICY#TRIAL OUT.png]
Prints Markdown tables (docs/benchmarks.md, "A cube at rest in the simulated bowl").
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.anatomy_traces

import argparse
import math
import time

import numpy as np

import harness.sim  # noqa: F401  (headless GL before mujoco)

# isort: split
import mujoco

from benchmarks.proposal_policies import TUNING
from benchmarks.proposal_replay import TRAINED_SPOT_CM
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.models.verdict import JudgeVerdict
from harness.sim.judge import JudgeThresholds
from harness.sim.units import to_sim
from harness.sim.world import SimWorld
from tests.anatomy_traces import Attempt, attempts

REST = JudgeThresholds()
SECONDS = 3.0


class CubeWatch:
    """Per physics step: the cube's speed and spin as the judge reads them, its contacts with the bowl's floor and
    walls, and the grasp point's distance from it."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        model = world.model
        self.cube = model.geom("cube").id
        self.grasp = model.site("grasp_point").id
        self.names = [model.geom(i).name for i in range(model.ngeom)]
        self.rows: list[tuple[float, float, float, int, int, float, float]] = []
        self._velocity = np.zeros(6)

    def step(self) -> None:
        model, data = self.world.model, self.world.data
        self.world.hold(1)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, self.world.cube_body, self._velocity, 0)
        floor = walls = 0
        depth = 0.0
        for i in range(data.ncon):
            pair = data.contact.geom[i]
            if self.cube not in pair:
                continue
            other = self.names[pair[0] if pair[1] == self.cube else pair[1]]
            floor += other.startswith("bowl_floor")
            walls += other.startswith("bowl_wall")
            depth = max(depth, -float(data.contact.dist[i]))
        gap = float(np.linalg.norm(data.site_xpos[self.grasp] - data.xpos[self.world.cube_body]))
        self.rows.append((float(data.time), float(np.linalg.norm(self._velocity[3:])),
                          float(np.linalg.norm(self._velocity[:3])), floor, walls, depth, gap))

    def settled_after(self, since: float) -> float | None:
        """Seconds after `since` at which the cube began its first `stable_s` at rest (the judge's window, wherever
        the cube is); None: never."""
        start = None
        for t, speed, spin, *_ in self.rows:
            if t <= since:
                continue
            if speed >= REST.rest_max_speed or spin >= REST.rest_max_ang_speed:
                start = None
            elif start is None:
                start = t
            elif t - start >= REST.stable_s:
                return start - since
        return None

    def rest_from(self, since: float) -> float | None:
        """Seconds after `since` from which the cube stayed at rest to the end; None: moving at the end."""
        rows = [r for r in self.rows if r[0] > since]
        moving = [i for i, r in enumerate(rows) if r[1] >= REST.rest_max_speed or r[2] >= REST.rest_max_ang_speed]
        if not moving:
            return 0.0
        if moving[-1] == len(rows) - 1:
            return None
        return rows[moving[-1] + 1][0] - since


def drop(world: SimWorld, rng: np.random.Generator) -> float | None:
    world.reset((0.22, -0.05), 0.0, DEFAULT_START_POSE)
    model, data = world.model, world.data
    bx, by = world.geometry.bowl_xy
    radius, angle = rng.uniform(0, 0.035), rng.uniform(0, 2 * math.pi)
    adr = world.cube_qpos
    data.qpos[adr:adr + 3] = [bx + radius * math.cos(angle), by + radius * math.sin(angle),
                              world.geometry.table_z + 0.004 + 0.027 + rng.uniform(0.01, 0.09)]
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.array([rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), rng.uniform(0, math.pi)]),
                          "xyz")
    data.qpos[adr + 3:adr + 7] = quat
    dof = model.joint("cube_joint").dofadr[0]
    data.qvel[dof:dof + 6] = [*rng.normal(0, 0.1, 2), 0, 0, 0, 0]
    mujoco.mj_forward(model, data)
    watch = CubeWatch(world)
    for _ in range(world.physics_steps_for(SECONDS)):
        watch.step()
    return watch.rest_from(0.0) if world.judge.cube_inside_bowl(data) else math.nan


def replay(world: SimWorld, attempt: Attempt) -> tuple[JudgeVerdict, float | None, CubeWatch]:
    """`proposal_replay.replay`, watched each physics step: the verdict, and when after the release the cube began
    its first `stable_s` at rest (None: never, or not in the bowl at the end)."""
    dx, dy = attempt.cube_start_cm
    assert attempt.gripper_commands is not None
    world.reset(((TRAINED_SPOT_CM[0] + dx) / 100, (TRAINED_SPOT_CM[1] + dy) / 100), 0.0, attempt.joints[0])
    watch = CubeWatch(world)
    for i in range(len(attempt.joints)):
        reached = attempt.joints[min(i + 1, len(attempt.joints) - 1)]
        targets = np.array([to_sim(name, reached[name]) for name in JOINT_NAMES])
        targets[-1] = to_sim("gripper", attempt.gripper_commands[i])
        world.data.ctrl[:] = targets
        for _ in range(world.substeps):
            watch.step()
    verdict = world.judge.verdict(world.data)
    release = next((e.t for e in verdict.events if e.event.value == "release"), None)
    rest = watch.settled_after(release) if release is not None and verdict.cube_inside_bowl else None
    return verdict, rest, watch


def plot(watch: CubeWatch, title: str, out: _Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = np.array(watch.rows)
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    axes[0].semilogy(rows[:, 0], np.maximum(rows[:, 1], 1e-5), lw=0.6, label="speed m/s")
    axes[0].semilogy(rows[:, 0], np.maximum(rows[:, 2], 1e-5), lw=0.6, label="spin rad/s")
    axes[0].axhline(REST.rest_max_speed, color="C0", ls="--", lw=0.8)
    axes[0].axhline(REST.rest_max_ang_speed, color="C1", ls="--", lw=0.8)
    axes[0].set_title(title, fontsize=9)
    axes[1].plot(rows[:, 0], rows[:, 3], lw=0.6, label="floor contacts")
    axes[1].plot(rows[:, 0], rows[:, 4], lw=0.6, label="wall contacts")
    axes[1].plot(rows[:, 0], rows[:, 5] * 1000, lw=0.6, label="deepest penetration mm")
    axes[2].plot(rows[:, 0], rows[:, 6] * 100, lw=0.8, label="grasp point to cube cm")
    axes[2].set_xlabel("simulated s")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drops", type=int, default=200)
    parser.add_argument("--no-replay", action="store_true", help="only the drops")
    parser.add_argument("--plot", nargs=2, metavar=("POLICY#TRIAL", "OUT"), help="one attempt's replay, drawn")
    args = parser.parse_args()
    world = SimWorld()

    if args.plot:
        policy, trial = args.plot[0].split("#")
        attempt = next(a for folder in TUNING for a in attempts(policy, folder=folder) if a.trial == int(trial))
        verdict, _, watch = replay(world, attempt)
        plot(watch, f"{args.plot[0]} replayed: {verdict.detail}", _Path(args.plot[1]))
        return

    rng = np.random.default_rng(59)
    start = time.process_time()
    results = [drop(world, rng) for _ in range(args.drops)]
    cpu = time.process_time() - start
    landed = [r for r in results if r is None or not math.isnan(r)]
    settled = np.array([r for r in landed if r is not None], dtype=float)
    print(f"{args.drops} drops ({cpu:.1f} CPU s), {len(landed)} landed in the bowl:\n")
    print("| at rest to the end from | drops |")
    print("|---|---:|")
    for limit in (0.5, 1.0, 2.0):
        print(f"| {limit:g} s | {int(np.sum(settled <= limit))} of {len(landed)} |")
    print(f"| still moving at {SECONDS:g} s | {len(landed) - len(settled)} of {len(landed)} |")
    if len(settled):
        print(f"\nrested after: median {np.median(settled):.2f} s, p90 {np.quantile(settled, 0.9):.2f} s, "
              f"max {settled.max():.2f} s")
    if args.no_replay:
        return

    print("\n| attempt (judge: inside the bowl, sequence incomplete) | replayed | in the bowl, first 0.5 s at rest "
          "began after the release |")
    print("|---|---|---:|")
    for attempt in (a for folder in TUNING for a in attempts(folder=folder)):
        if "incomplete" not in attempt.judge["detail"]:
            continue
        verdict, rest, _ = replay(world, attempt)
        shown = "-" if not verdict.cube_inside_bowl else "never" if rest is None else f"{rest:.2f} s"
        print(f"| {attempt.policy} trial {attempt.trial} | {verdict.detail} | {shown} |")


if __name__ == "__main__":
    main()
