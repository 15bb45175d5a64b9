"""The `harness dataset ...` and `harness offline-eval` commands: arguments in, reports out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.errors import HarnessInputError


def run_validate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from harness.data.validate import validate_dataset

    root = Path(args.path)
    with tqdm(desc="decoding videos", unit="file", disable=args.json, leave=False) as bar:
        report = validate_dataset(root, processes=args.processes, progress=bar)
    if args.json:
        print(report.to_json())
        return report.exit_code
    for problem in report.problems:
        where = f" episode {problem.episode}" if problem.episode is not None else ""
        print(f"{problem.severity.upper():7} {problem.code:<28}{where}: {problem.message}")
    rate = report.camera_frames_decoded / report.seconds if report.seconds else 0
    verdict = {0: "clean", 1: f"{len(report.errors)} defects", 2: "unreadable"}[report.exit_code]
    print(f"{root}: {verdict}. {report.episodes} episodes, {report.frames} frames, "
          f"{report.camera_frames_decoded} camera frames decoded in {report.seconds:.1f} s ({rate:.0f}/s)")
    return report.exit_code


def run_coverage(args: argparse.Namespace) -> int:
    import numpy as np

    from harness.data.coverage import (
        ONE_SPOT_CM,
        Coverage,
        cube_template,
        first_top_frames,
        locate,
        nearest_start_cm,
        to_robot_frame,
    )
    from harness.models.atomic import write_text_atomic

    root = Path(args.path)
    frames = first_top_frames(root)
    if args.template_box:
        x, y, w, h = (int(v) for v in args.template_box.split(","))
        template = frames[args.template_episode][y:y + h, x:x + w]
    else:
        try:
            template = cube_template(frames[args.template_episode])
        except ValueError as exc:
            raise HarnessInputError(root, "--template-box", str(exc)) from None
    starts_px, scores = locate(frames, template)
    starts_cm = None
    if args.calibration or args.px_per_cm:
        if args.calibration:
            from harness.vision.calibration import load_calibration

            calibration, _ = load_calibration(Path(args.calibration))
            img_cm = calibration.rim.to_image_axes_cm(np.array(starts_px), calibration.bowl_cm)
        else:
            img_cm = np.array(starts_px) / args.px_per_cm
        starts_cm = to_robot_frame(img_cm)
    coverage = Coverage(starts_px, starts_cm, scores)
    print(f"{len(frames)} episodes; cube found with template match scores {min(scores):.2f}-{max(scores):.2f}")
    xs, ys = zip(*starts_px, strict=True)
    print(f"start positions: x {min(xs):.1f}-{max(xs):.1f} px, y {min(ys):.1f}-{max(ys):.1f} px")
    if starts_cm is not None:
        spread = coverage.spread_cm()
        print(f"spread: every start within {spread:.2f} cm of the median start")
        if spread < ONE_SPOT_CM:
            print(f"WARNING: all {len(frames)} episodes start the cube within {spread:.2f} cm of one spot. The data "
                  "cover a single position: a policy trained on it has never seen the cube anywhere else, and a "
                  "fixed-position success rate cannot tell seeing from remembering one motion. Record "
                  "demonstrations with the cube scattered over the workspace, and evaluate on a randomized protocol.")
        out_csv = Path(args.output).with_suffix(".csv")
        write_text_atomic(out_csv, "dx_cm,dy_cm\n" + "".join(f"{dx:.3f},{dy:.3f}\n" for dx, dy in starts_cm))
        print(f"wrote {out_csv} (use with: harness report ... --training-starts {out_csv})")
        if args.protocol:
            from harness.models.protocol import load_protocol

            protocol = load_protocol(args.protocol)
            distances = nearest_start_cm([(t.dx_cm, t.dy_cm) for t in protocol.trials], starts_cm)
            far = sum(1 for d in distances if d > 2.0)
            print(f"{args.protocol}: distance from each trial offset to the nearest training start: median "
                  f"{np.median(distances):.1f} cm, max {max(distances):.1f} cm; {far} of {len(distances)} trials "
                  "are more than 2 cm from every training start")
    plot_coverage(coverage, Path(args.output))
    print(f"wrote {args.output}")
    return 0


def plot_coverage(coverage: object, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.8, 4.8))
    if coverage.starts_cm is not None:
        dx, dy = zip(*coverage.starts_cm, strict=True)
        ax.scatter([-v for v in dy], dx, s=30)
        ax.set_xlabel("<- robot's left   offset from median start (cm)   robot's right ->")
        ax.set_ylabel("offset away from the robot (cm)")
        lim = max(2.0, max(abs(v) for v in (*dx, *dy)) * 1.2)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
    else:
        x, y = zip(*coverage.starts_px, strict=True)
        ax.scatter(x, y, s=30)
        ax.invert_yaxis()
        ax.set_xlabel("x (px)")
        ax.set_ylabel("y (px)")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_title(f"Cube start positions, {len(coverage.starts_px)} episodes")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def run_offline_eval(args: argparse.Namespace) -> int:
    from harness.data.offline_eval import evaluate_checkpoint, format_table
    from harness.data.split import episode_indices, every_nth_split

    root = Path(args.dataset)
    if args.episodes:
        try:
            episodes = [int(v) for v in args.episodes.split(",")]
        except ValueError:
            raise HarnessInputError(None, "--episodes", f"'{args.episodes}' is not a comma-separated list") from None
    else:
        episodes = every_nth_split(episode_indices(root))["val"]
    checkpoints = [Path(p) for p in (args.checkpoints or [args.policy])]
    for path in checkpoints:
        if not (path / "config.json").is_file():
            raise HarnessInputError(path, "config.json", "not a LeRobot pretrained policy folder")
    print(f"held-out episodes: {episodes} (first {args.frames} frames of each)")
    results = [evaluate_checkpoint(p, root, episodes, args.frames, args.device) for p in checkpoints]
    print(format_table(results))
    return 0


def run_split(args: argparse.Namespace) -> int:
    from harness.data.split import write_split

    output = Path(args.output or Path(args.path) / "meta" / "splits_every10.json")
    split = write_split(Path(args.path), output, args.every)
    print(f"wrote {output}: {len(split['train'])} train, {len(split['val'])} held out (every {args.every}th index)")
    print(f"train with: --dataset.episodes='{json.dumps(split['train'])}'")
    return 0
