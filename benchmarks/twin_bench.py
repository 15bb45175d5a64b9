"""Twin fidelity (issue 43): rehearsals on the emulated arm, with no gap and with each declared gap knob, each
mirrored by `harness twin`; agreement, kappa and the failure modes that moved, and wall times of both runs.

Each step is the user's command in its own process (`harness rehearse --operator scripted --gap ...`, `harness
twin`, `harness report --json`), in a fresh folder. The protocol is the emulated table with a few cube starts
around the trained spot (given with --trials), long enough episodes for the expert to settle the cube.

    .venv/bin/python benchmarks/twin_bench.py --policy expert --trials 4
    .venv/bin/python benchmarks/twin_bench.py --policy CHECKPOINT --at-trained-spot --trials 8 --gaps none
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STARTS = [(0.0, 0.0, 0.0), (2.0, -1.5, 10.0), (-1.5, 2.0, -10.0), (1.0, 1.0, 0.0), (-2.0, -1.0, 5.0),
          (1.5, 2.0, -5.0), (0.0, -2.5, 0.0), (-2.5, 0.0, 15.0)]
PROTOCOL = """name: twin-bench
task: Pick up the cube and place it in the bowl.
scene: {{bowl_diameter_cm: 11.5, cube_edge_cm: 3.0, trained_cube_xy_cm: [22.0, -5.0], bowl_xy_cm: [18.0, 14.0]}}
start_pose: {{shoulder_pan: 0.0, shoulder_lift: -60.0, elbow_flex: 60.0, wrist_flex: 70.0, wrist_roll: 0.0,
  gripper: 10.0}}
fps: 30
episode_time_limit_s: {episode}
success_definition: Autonomous grasp, lift and release; the cube comes to rest inside the bowl.
failure_taxonomy: [success, no_grasp, grasped_then_dropped, wrong_placement]
trials:
{trials}
"""
GAPS = ["", "cube_friction=0.1", "cube_mass_g=300", "servo_gain=0.3", "servo_backlash_deg=3", "camera_tilt_deg=8",
        "exposure=1.8", "table_height_mm=-30"]


def starts(count: int, trained_spot: bool) -> list[tuple[float, float, float]]:
    """The listed starts, then seeded ones within 2.5 cm and 15 degrees of the trained spot (a checkpoint
    trained at one spot, the reference ACT's, is rehearsed there: `--at-trained-spot`)."""
    if trained_spot:
        return [(0.0, 0.0, 0.0)] * count
    rng = random.Random(43)
    extra = []
    while len(STARTS) + len(extra) < count:
        dx, dy = rng.uniform(-2.5, 2.5), rng.uniform(-2.5, 2.5)
        if dx * dx + dy * dy <= 2.5 * 2.5:
            extra.append((round(dx, 1), round(dy, 1), round(rng.uniform(-15, 15))))
    return (STARTS + extra)[:count]


PAUSED = 3   # `harness run`'s exit code for a paused run (a void that pauses: resumable)
MAX_RESUMES = 30   # a 50-attempt rehearsal paused 12 times at load 9-31 on the shared 2-core host


class Paused(Exception):
    def __init__(self, seconds: float, why: str) -> None:
        super().__init__(why)
        self.seconds = seconds


def harness(argv: list[str], cwd: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)
    took = time.monotonic() - started
    if done.returncode == PAUSED:
        raise Paused(took, (done.stdout + done.stderr)[-600:])
    if done.returncode != 0:
        raise SystemExit(f"harness {' '.join(argv)} exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took, done.stdout


def rehearse(argv: list[str], folder: Path, label: str) -> tuple[float, int]:
    """A rehearsal to its end, resumed (as a desk would) when the loaded host pauses it; (wall time of all its
    sessions, resumes). A rehearsal that fails outright is redone afresh, three times at most."""
    for tries in range(3):
        seconds, resumes = 0.0, 0
        try:
            while True:
                try:
                    took, _ = harness([*argv, *(["--resume"] if resumes else [])], folder)
                    return seconds + took, resumes
                except Paused as paused:
                    seconds += paused.seconds
                    resumes += 1
                    print(f"{label}: rehearsal paused ({resumes}), resumed: {str(paused)[-300:]}", file=sys.stderr,
                          flush=True)
                    if resumes > MAX_RESUMES:
                        raise SystemExit(f"{label}: paused more than {MAX_RESUMES} times") from None
        except SystemExit as stopped:
            print(f"{label}: rehearsal try {tries + 1} failed: {str(stopped)[-1200:]}", file=sys.stderr, flush=True)
            for made in ("scoresheets", "runs", "rehearsals"):
                shutil.rmtree(folder / made, ignore_errors=True)
    raise SystemExit(f"{label}: three rehearsals failed")


def arm_loop(sheet_path: Path) -> dict[str, float | None]:
    """What the arm's loop did over a sheet's scored attempts (medians): commands, new chunks, stalls (actions that
    landed more than a control period after their observation) and commands a second on the arm's clock (wall time
    on the emulated arm, simulated time in the twin), stalls included."""
    sys.path.insert(0, str(REPO))
    from harness.models.scoresheet import load_scoresheet

    loops = [a.loop for a in load_scoresheet(sheet_path).scored_attempts()]

    def median(values: list[float]) -> float | None:
        ordered = sorted(values)
        return ordered[len(ordered) // 2] if ordered else None

    return {"steps": median([float(loop.steps) for loop in loops]),
            "chunks": median([float(loop.chunk_switches) for loop in loops if loop.chunk_switches is not None]),
            "stalls": median([float(loop.queue_underruns) for loop in loops if loop.queue_underruns is not None]),
            "rate": median([loop.steps / loop.episode_s for loop in loops if loop.episode_s])}


def _cell(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="expert")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--episode-s", type=float, default=15.0)
    parser.add_argument("--gaps", default=",".join(g or "none" for g in GAPS))
    parser.add_argument("--at-trained-spot", action="store_true", help="every trial at the trained spot")
    parser.add_argument("--camera-size", default="640x480", help="the rehearsal's cameras (harness rehearse)")
    parser.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    parser.add_argument("--extra", type=int, default=0,
                        help="the twin's own trials (harness twin --extra): adds the twin-assisted success rate")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="twin-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    trials = "\n".join(f"- {{index: {i + 1}, dx_cm: {dx}, dy_cm: {dy}, yaw_deg: {yaw}}}"
                       for i, (dx, dy, yaw) in enumerate(starts(args.trials, args.at_trained_spot)))
    (work / "bench.yaml").write_text(PROTOCOL.format(episode=args.episode_s, trials=trials))
    policy = str(Path(args.policy).resolve()) if Path(args.policy).exists() else args.policy
    rows = []
    load_at_start = os.getloadavg()[0]
    for gap in [g for g in args.gaps.split(",")]:
        flags = [] if gap == "none" else ["--gap", gap]
        folder = work / (gap.replace("=", "") or "none")
        folder.mkdir(exist_ok=True)
        (folder / "bench.yaml").write_text((work / "bench.yaml").read_text())
        real_s, resumes = rehearse(["rehearse", "bench.yaml", "--policy", policy, "--operator", "scripted",
                                    "--camera-size", args.camera_size, *flags], folder, gap)
        sheet = next((folder / "scoresheets").glob("*rehearsal*.yaml"))
        twin_s, _ = harness(["twin", str(sheet.relative_to(folder)),
                             *(["--extra", str(args.extra)] if args.extra else [])], folder)
        twin_sheet = sheet.with_name(f"{sheet.stem}-twin.yaml")
        _, out = harness(["report", "--json", str(twin_sheet.relative_to(folder))], folder)
        fidelity = json.loads(out)["twin_fidelity"]["twins"][0]
        moved = [f"{m['label']} {m['real']}->{m['twin']}" for m in fidelity["modes"] if m["real"] != m["twin"]]
        loops = (arm_loop(sheet), arm_loop(twin_sheet))
        rows.append((gap, fidelity, moved, real_s, twin_s, loops))
        if resumes:
            print(f"{gap}: the rehearsal was resumed {resumes} time(s); its wall time includes every session",
                  flush=True)
        print(f"{gap}: {fidelity['label_agreement']['k']}/{fidelity['label_agreement']['n']} "
              f"real {real_s:.0f} s twin {twin_s:.0f} s, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    print(f"\npolicy {args.policy}, {args.trials} trials per condition, episodes {args.episode_s:g} s, work {work}, "
          f"load {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print("| gap | real success | twin success | same label | 95 % interval | kappa | modes that moved (real->twin) "
          "| rehearsal wall (s) | twin wall (s) |")
    print("|---|---:|---:|---:|---|---:|---|---:|---:|")
    for gap, f, moved, real_s, twin_s, _ in rows:
        agree = f["label_agreement"]
        kappa = "undefined" if f["kappa"] is None else f"{f['kappa']:.2f}"
        low, high = agree["wilson95"]
        print(f"| {gap} | {f['real_success']['k']}/{f['real_success']['n']} | {f['twin_success']['k']}/"
              f"{f['twin_success']['n']} | {agree['k']}/{agree['n']} | {100 * low:.0f}-{100 * high:.0f} % | {kappa} | "
              f"{', '.join(moved) or 'none'} | {real_s:.0f} | {twin_s:.0f} |")

    print("\nThe arm's loop, rehearsal / twin (medians over the attempts; commands a second on the arm's clock, "
          "stalls included):\n")
    print("| gap | commands | new chunks | stalls (> 1 period) | commands/s |")
    print("|---|---|---|---|---|")
    for gap, *_, (real, twin) in rows:
        print(f"| {gap} | " + " | ".join(f"{_cell(real[key], digits)} / {_cell(twin[key], digits)}" for key, digits in
                                         (("steps", 0), ("chunks", 0), ("stalls", 0), ("rate", 1))) + " |")
    assisted = [(gap, f["real_success"], f["twin_assisted"]) for gap, f, *_ in rows if f.get("twin_assisted")]
    if assisted:
        print("\nThe real success rate, from the rehearsal's trials alone and twin-assisted (harness twin --extra "
              f"{args.extra}; docs/twin.md):\n")
        print("| gap | real alone: rate (95 % Wilson) | twin's own trials | agreement | twin-assisted: estimate (95 %) "
              "| widths, points |")
        print("|---|---|---:|---:|---|---|")
        for gap, real, t in assisted:
            print(f"| {gap or 'none'} | {real['k']}/{real['n']} ({100 * t['real_only_low95']:.0f}-"
                  f"{100 * t['real_only_high95']:.0f} %) | {t['twin_successes']}/{t['twin_trials']} | "
                  f"{100 * t['outcome_agreement']:.0f} % | {100 * t['estimate']:.0f} % ({100 * t['low95']:.0f}-"
                  f"{100 * t['high95']:.0f} %) | {100 * (t['real_only_high95'] - t['real_only_low95']):.0f} / "
                  f"{100 * (t['high95'] - t['low95']):.0f} |")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
