"""The `harness dataset ...` and `harness offline-eval` commands: arguments in, reports out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessInputError

if TYPE_CHECKING:
    from harness.data.coverage import Coverage, TableView
    from harness.models.protocol import Scene


def validate_from_args(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from harness.data.validate import validate_dataset

    root = Path(args.path)
    if not args.json:
        check_dataset_meta(root)
    # disable=None: no bar when stderr is not a terminal, so a refusal stays the only line there
    with tqdm(desc="decoding videos", unit="file", disable=True if args.json else None, leave=False) as bar:
        report = validate_dataset(root, processes=args.processes, progress=bar)
    if args.json:
        print(report.to_json())
        if report.unreadable:   # the JSON says why on stdout; stderr still gets the one line a refusal has
            print(f"harness: error: {root}: not a readable LeRobot v3.0 dataset ({report.problems[-1].message})",
                  file=sys.stderr)
        return report.exit_code
    if report.unreadable:   # not a dataset at all: one line on stderr, like every other refusal
        problem = report.problems[-1]
        raise HarnessInputError(root, None, f"not a readable LeRobot v3.0 dataset ({problem.message})")
    for problem in report.problems:
        where = f" episode {problem.episode}" if problem.episode is not None else ""
        print(f"{problem.severity.upper():7} {problem.code:<28}{where}: {problem.message}")
    rate = report.camera_frames_decoded / report.seconds if report.seconds else 0
    verdict = {0: "clean", 1: f"{len(report.errors)} defects", 2: "unreadable"}[report.exit_code]
    print(f"{root}: {verdict}. {report.episodes} episodes, {report.frames} frames, "
          f"{report.camera_frames_decoded} camera frames decoded in {report.seconds:.1f} s ({rate:.0f}/s)")
    return report.exit_code


def check_dataset_meta(root: Path, field: str | None = None) -> dict[str, object]:
    """meta/info.json read and checked for what every dataset command relies on (a v3.x object with fps
    and features), so a garbage or empty file is one line naming it, not a traceback deep in LeRobot."""
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise HarnessInputError(root, field, "not a LeRobot v3.0 dataset folder (no meta/info.json)")
    try:
        info = json.loads(info_path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise HarnessInputError(info_path, None, f"not JSON ({exc})") from None
    if not isinstance(info, dict):
        raise HarnessInputError(info_path, None, f"expected a JSON object, found {type(info).__name__}")
    if not str(info.get("codebase_version", "")).startswith("v3."):
        raise HarnessInputError(info_path, "codebase_version",
                                f"{info.get('codebase_version')!r}: not a LeRobot v3.x dataset")
    for key, kind in (("fps", (int, float)), ("features", dict)):
        if not isinstance(info.get(key), kind) or isinstance(info.get(key), bool):
            raise HarnessInputError(info_path, key, "missing or of the wrong type")
    return info


def _check_calibration_exists(path: Path) -> None:
    if not path.is_file():
        raise HarnessInputError(path, "--calibration", "no such bowl calibration: make one on a top frame from "
                                "the same camera with `harness measure RUN_FOLDER --bowl-cm 11.5 --auto`, or "
                                "pass --px-per-cm for a plain scale")


def _table_view(args: argparse.Namespace, root: Path, frame_size: tuple[int, int], scene: Scene) -> TableView:
    """The calibration, scaled to the dataset's frames, with this command's own error messages."""
    from harness.data.coverage import TableView
    from harness.vision.calibration import load_calibration

    path = Path(args.calibration)
    _check_calibration_exists(path)
    try:
        calibration, frame = load_calibration(path)
    except HarnessInputError as exc:
        raise HarnessInputError(path, "--calibration", f"not a bowl calibration written by `harness measure` "
                                f"({exc.problem})") from None
    return TableView.from_calibration(calibration.rim, calibration.bowl_cm, (frame.shape[1], frame.shape[0]),
                                      frame_size, scene, getattr(args, "bowl_height_cm", 4.0),
                                      getattr(args, "fovy_deg", None))


def _truth(args: argparse.Namespace, root: Path) -> tuple[dict[int, tuple[float, float]], str] | None:
    """Known starts: a `--truth` scoresheet (`harness run --record-dataset`), or the dataset's own
    meta/selection.json (`harness collect`)."""
    from harness.data.coverage import truth_from_scoresheet, truth_from_selection

    if getattr(args, "truth", None):
        path = Path(args.truth)
        if not path.exists():   # a folder, a device or a pipe: load_scoresheet says which, in one line
            raise HarnessInputError(path, "--truth", "no such scoresheet (the run that recorded this dataset)")
        truth = truth_from_scoresheet(path)
        if not truth:
            raise HarnessInputError(path, "--truth", "no attempt in this scoresheet names a dataset episode: "
                                    "was it run with --record-dataset?")
        return truth, str(path)
    selection = root / "meta" / "selection.json"
    if selection.is_file():
        return truth_from_selection(selection), str(selection)
    return None


def coverage_from_args(args: argparse.Namespace) -> int:
    import numpy as np

    from harness.data.coverage import (
        MIN_SCORE,
        ONE_SPOT_CM,
        check_against_truth,
        first_frames,
        locate_starts,
        nearest_start_cm,
    )
    from harness.models.protocol import Scene, load_protocol
    from harness.storage.atomic import write_text_atomic

    root = Path(args.path)
    check_dataset_meta(root)
    if args.calibration:
        _check_calibration_exists(Path(args.calibration))
    protocol = load_protocol(args.protocol) if args.protocol else None
    scene = protocol.scene if protocol else Scene()
    frames = first_frames(root)
    if not frames:
        raise HarnessInputError(root, None, "the dataset has no episodes")
    height, width = next(iter(frames.values())).shape[:2]
    view = _table_view(args, root, (width, height), scene) if args.calibration else None
    min_score = getattr(args, "min_score", None) or MIN_SCORE
    coverage = locate_starts(frames, view, args.px_per_cm, min_score)
    found, missing = coverage.found, coverage.not_found
    print(f"{len(frames)} episodes: cube found in {len(found)}, not found in {len(missing)} "
          f"(a start needs a score of at least {min_score:.2f})")
    if missing:
        scores = [s.score for s in missing]
        print(f"WARNING: {len(missing)} of {len(frames)} first frames do not show the cube clearly enough to place it "
              f"(scores {min(scores):.2f}-{max(scores):.2f}); they are left out of the spread, the CSV and the map, "
              "not placed somewhere else. Look at those first frames: the arm over the cube, a dark or washed-out "
              "image.")
        for start in missing:
            print(f"  episode {start.episode}: score {start.score:.2f} ({start.why})")
    offsets = coverage.offsets_cm()
    if offsets:
        dx, dy = zip(*offsets, strict=True)
        origin = "the trained position" if coverage.anchored else "the median start"
        print(f"start positions, cm from {origin}: dx {min(dx):+.1f} to {max(dx):+.1f}, dy {min(dy):+.1f} to "
              f"{max(dy):+.1f}")
        spread = coverage.spread_cm()
        print(f"spread: every found start within {spread:.2f} cm of the median start")
        if spread < ONE_SPOT_CM and len(offsets) > 1:
            print(f"WARNING: all {len(offsets)} found starts put the cube within {spread:.2f} cm of one spot. The "
                  "data cover a single position: a policy trained on it has never seen the cube anywhere else, and "
                  "a fixed-position success rate cannot tell seeing from remembering one motion. Record "
                  "demonstrations with the cube scattered over the workspace, and evaluate on a randomized protocol.")
        truth = _truth(args, root)
        if truth is not None and coverage.anchored:
            check = check_against_truth(coverage, truth[0])
            errors = list(check.errors_cm.values())
            if errors:
                print(f"against the known starts ({truth[1]}): {len(errors)} found, error median "
                      f"{np.median(errors):.2f} cm, max {max(errors):.2f} cm; {len(check.not_found)} not found")
        elif truth is not None:
            print(f"known starts in {truth[1]}: pass --calibration to compare the found positions with them")
        out_csv = Path(args.output).with_suffix(".csv")
        rows = "".join(f"{s.offset_cm[0]:.3f},{s.offset_cm[1]:.3f},{s.episode},{s.score:.3f}\n"
                       for s in coverage.starts if s.offset_cm is not None)
        write_text_atomic(out_csv, "dx_cm,dy_cm,episode,score\n" + rows)
        from harness.command import harness_command

        print(f"wrote {out_csv} (use with: {harness_command()} report ... --training-starts {out_csv})")
        if protocol is not None:
            distances = nearest_start_cm([(t.dx_cm, t.dy_cm) for t in protocol.trials], offsets)
            far = sum(1 for d in distances if d > 2.0)
            assumed = ("" if coverage.anchored else " (assuming the median start is the trained position: pass "
                       "--calibration to measure from the table instead)")
            print(f"{args.protocol}: distance from each trial offset to the nearest training start: median "
                  f"{np.median(distances):.1f} cm, max {max(distances):.1f} cm; {far} of {len(distances)} "
                  f"trials are more than 2 cm from every training start{assumed}")
    else:
        xs = [x for x, _ in coverage.centres_px()]
        ys = [y for _, y in coverage.centres_px()]
        if found:
            print(f"start positions: x {min(xs):.1f}-{max(xs):.1f} px, y {min(ys):.1f}-{max(ys):.1f} px "
                  "(pass --calibration, or --px-per-cm, for centimetres)")
    plot_coverage(coverage, Path(args.output))
    print(f"wrote {args.output}")
    return 0


def plot_coverage(coverage: Coverage, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.8, 4.8))
    offsets = coverage.offsets_cm()
    found = coverage.found
    if offsets:
        dx, dy = zip(*offsets, strict=True)
        ax.scatter([-v for v in dy], dx, s=30, label=f"found ({len(offsets)})")
        origin = "trained position" if coverage.anchored else "median start"
        ax.set_xlabel(f"<- robot's left   offset from the {origin} (cm)   robot's right ->")
        ax.set_ylabel("offset away from the robot (cm)")
        lim = max(2.0, max(abs(v) for v in (*dx, *dy)) * 1.2)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        if coverage.anchored:
            ax.scatter([0], [0], marker="+", s=160, color="black", label="trained position")
    elif found:
        x, y = zip(*coverage.centres_px(), strict=True)
        ax.scatter(x, y, s=30, label=f"found ({len(found)})")
        ax.invert_yaxis()
        ax.set_xlabel("x (px)")
        ax.set_ylabel("y (px)")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    missing = len(coverage.not_found)
    ax.set_title(f"Cube start positions: {len(found)} of {len(coverage.starts)} episodes"
                 + (f" ({missing} not found)" if missing else ""))
    if found:
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def offline_eval_from_args(args: argparse.Namespace) -> int:
    from harness.data.offline_eval import MismatchKind, evaluate_checkpoint, format_table, input_mismatches
    from harness.data.split import episode_indices, every_nth_split
    from harness.models.checkpoint import checkpoint_name
    from harness.policies.lerobot_policy import check_device

    check_device(args.device)
    root = Path(args.dataset)
    check_dataset_meta(root, "--dataset")
    if args.episodes:
        try:
            episodes = [int(v) for v in args.episodes.split(",")]
        except ValueError:
            raise HarnessInputError(None, "--episodes", f"'{args.episodes}' is not a comma-separated list") from None
    else:
        episodes = every_nth_split(episode_indices(root))["val"]
    checkpoints = [Path(p) for p in (args.checkpoints or ([args.policy] if args.policy else []))]
    if not checkpoints:
        raise HarnessInputError(None, "--checkpoints", "name at least one LeRobot pretrained policy folder")
    resize = bool(getattr(args, "resize_images", False))
    for path in checkpoints:
        if not (path / "config.json").is_file():
            raise HarnessInputError(path, "config.json", "not a LeRobot pretrained policy folder")
        mismatches = input_mismatches(path, root)
        blocking = [m for m in mismatches if m.kind is not MismatchKind.IMAGE_SIZE or not resize]
        if blocking:
            hint = (" (pass --resize-images to resize the frames to the policy's size, as a policy server "
                    "would have to)" if all(m.kind is MismatchKind.IMAGE_SIZE for m in blocking) else "")
            raise HarnessInputError(path, "input_features", "; ".join(m.describe() for m in blocking) + hint)
        for m in mismatches:
            print(f"WARNING: {checkpoint_name(path).label}: {m.describe()}; resizing the frames to the policy's "
                  "size. The scores say how it does on resized frames, not on the data as recorded.")
    print(f"held-out episodes: {episodes} (first {args.frames} frames of each)")
    results = []
    from tqdm import tqdm

    for path in checkpoints:  # a bar per checkpoint, with the time left (a CPU takes minutes each)
        with tqdm(desc=checkpoint_name(path).label, unit="frame", leave=False, file=sys.stderr) as bar:
            def advance(done: int, total: int, bar: tqdm = bar) -> None:
                bar.total = total
                bar.update(done - bar.n)

            results.append(evaluate_checkpoint(path, root, episodes, args.frames, args.device, resize, advance))
    print(format_table(results))
    return 0


def split_from_args(args: argparse.Namespace) -> int:
    from harness.data.split import write_split

    output = Path(args.output or Path(args.path) / "meta" / "splits_every10.json")
    split = write_split(Path(args.path), output, args.every)
    print(f"wrote {output}: {len(split['train'])} train, {len(split['val'])} held out (every {args.every}th index)")
    print(f"train with: --dataset.episodes='{json.dumps(split['train'])}'")
    return 0
