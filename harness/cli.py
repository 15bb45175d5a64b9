"""The `harness` command: argument parsing only; every subcommand calls into the package."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.errors import HarnessInputError

EXIT_BAD_INPUT = 2


def _cmd_protocol_new(args: argparse.Namespace) -> int:
    from harness.models.atomic import write_text_atomic
    from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS, DEFAULT_TASK
    from harness.models.protocol import Generator, Protocol, Scene, Trial, generate_randomized_trials, protocol_to_yaml

    scene = Scene()
    if args.randomized:
        trials = generate_randomized_trials(scene, args.n, args.radius_cm, args.min_spacing_cm, args.seed,
                                            args.max_yaw_deg)
        generator = Generator(kind="randomized", n=args.n, radius_cm=args.radius_cm,
                              min_spacing_cm=args.min_spacing_cm, seed=args.seed, max_yaw_deg=args.max_yaw_deg)
    else:
        trials = [Trial(index=i + 1, dx_cm=0.0, dy_cm=0.0) for i in range(args.n)]
        generator = Generator(kind="fixed", n=args.n)
    protocol = Protocol(
        name=args.name or Path(args.output).stem,
        task=args.task or DEFAULT_TASK,
        scene=scene,
        start_pose=dict(DEFAULT_START_POSE),
        success_definition=DEFAULT_SUCCESS,
        generator=generator,
        run={"robot": "sim", "policy": "expert"},
        trials=trials,
    )
    out = Path(args.output)
    if out.exists() and not args.force:
        raise HarnessInputError(out, None, "exists; pass --force to overwrite")
    write_text_atomic(out, protocol_to_yaml(protocol))
    print(f"wrote {out}: {len(trials)} trials")
    return 0


def _cmd_protocol_check(args: argparse.Namespace) -> int:
    from harness.models.protocol import load_protocol

    protocol = load_protocol(args.protocol)
    print(f"{args.protocol}: ok, '{protocol.name}', {len(protocol.trials)} trials at {protocol.fps} Hz")
    return 0


def _training_starts(path: str) -> list[tuple[float, float]]:
    """`dx_cm,dy_cm` per line (offsets of each training episode's cube from the trained position)."""
    starts = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith(("#", "dx")):
            continue
        try:
            dx, dy = (float(v) for v in line.split(",")[:2])
        except ValueError:
            raise HarnessInputError(path, f"line {number}", f"'{line}' is not dx_cm,dy_cm") from None
        starts.append((dx, dy))
    return starts


def _cmd_report(args: argparse.Namespace) -> int:
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.summary import format_summary, summarize

    sheets = [load_scoresheet(path) for path in args.scoresheets]
    summaries = [summarize(sheet) for sheet in sheets]
    if args.output or args.md:
        from harness.models.atomic import write_text_atomic
        from harness.reports.blocks import to_html, write_markdown
        from harness.reports.document import report_blocks, report_title

        starts = _training_starts(args.training_starts) if args.training_starts else None
        blocks, title = report_blocks(sheets, starts), report_title(sheets)
        if args.output:
            write_text_atomic(args.output, to_html(title, blocks))
            print(f"wrote {args.output}")
        if args.md:
            write_markdown(Path(args.md), title, blocks)
            print(f"wrote {args.md}")
        return 0
    if args.json:
        print(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=2))
    else:
        print("\n\n".join(format_summary(s) for s in summaries))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from harness.models.stats import expected_wilson_width, trials_needed

    try:
        n = trials_needed(args.p0, args.delta, args.alpha, args.power)
    except ValueError as exc:
        raise HarnessInputError(None, "--p0/--delta", str(exc)) from None
    p1 = args.p0 + args.delta
    print(f"To detect {100 * args.p0:.0f}% -> {100 * p1:.0f}% (alpha {args.alpha}, power {args.power}, two-sided):")
    print(f"  {n} trials per policy (independent runs; pairing on one protocol usually needs fewer)")
    print("\nExpected 95% Wilson interval width for one policy:")
    for size in sorted({20, 50, 100, n}):
        print(f"  {size:>5} trials at {100 * args.p0:.0f}%: +-{50 * expected_wilson_width(args.p0, size):.1f} points")
    return 0


def _cmd_fix_ids(args: argparse.Namespace) -> int:
    import serial

    from harness.bus.fix_ids import TerminalOperator, fix_ids

    def open_serial(port: str) -> serial.Serial:
        try:
            return serial.Serial(port, 1_000_000, timeout=0)
        except (serial.SerialException, ValueError) as exc:
            raise HarnessInputError(None, "--port", f"cannot open {port}: {exc}") from None

    return fix_ids(args.port, TerminalOperator(assume_yes=args.yes), open_serial)


def _cmd_emulate_bus(args: argparse.Namespace) -> int:
    from harness.bus.pty_port import PtyBus
    from harness.bus.scenario import build_chain, console, default_scenario, load_scenario

    scenario = load_scenario(args.scenario) if args.scenario else default_scenario()
    with PtyBus(build_chain(scenario), wire_timing=scenario.wire_timing) as bus:
        console(bus.chain, bus.lock, bus.port)
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    from harness.vision.cli_measure import run_measure

    return run_measure(args)


def _cmd_scene_check(args: argparse.Namespace) -> int:
    import numpy as np
    from PIL import Image, ImageDraw

    from harness.vision.scene_check import unexpected_objects

    def load(path: str) -> np.ndarray:
        try:
            return np.asarray(Image.open(path).convert("RGB"))
        except OSError as exc:
            raise HarnessInputError(path, None, f"cannot read image: {exc}") from None

    frame = load(args.frame)
    found = unexpected_objects(frame, [load(r) for r in args.reference], min_area_px=args.min_area_px)
    if not found:
        print(f"{args.frame}: nothing unexpected compared with {len(args.reference)} reference frame(s)")
        return 0
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    for u in found:
        print(f"unexpected object at x={u.centre[0]} y={u.centre[1]} px ({u.width}x{u.height} px, {u.area_px} px^2)")
        draw.rectangle([u.x, u.y, u.x + u.width, u.y + u.height], outline=(255, 0, 255), width=2)
    out = Path(args.frame).with_name(Path(args.frame).stem + "_scene_check.png")
    image.save(out)
    print(f"{len(found)} unexpected object(s); marked in {out}. Clear the view before running trials.")
    return 1


def _cmd_dataset_validate(args: argparse.Namespace) -> int:
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


def _cmd_dataset_coverage(args: argparse.Namespace) -> int:
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
    _plot_coverage(coverage, Path(args.output))
    print(f"wrote {args.output}")
    return 0


def _plot_coverage(coverage: object, path: Path) -> None:
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


def _cmd_offline_eval(args: argparse.Namespace) -> int:
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


def _cmd_dataset_split(args: argparse.Namespace) -> int:
    from harness.data.split import write_split

    output = Path(args.output or Path(args.path) / "meta" / "splits_every10.json")
    split = write_split(Path(args.path), output, args.every)
    print(f"wrote {output}: {len(split['train'])} train, {len(split['val'])} held out (every {args.every}th index)")
    print(f"train with: --dataset.episodes='{json.dumps(split['train'])}'")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from harness.run.cli_run import run_from_args

    return run_from_args(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="Evaluate learned SO-101 policies.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    protocol = sub.add_parser("protocol", help="create or check protocol files")
    psub = protocol.add_subparsers(dest="protocol_command", required=True, metavar="ACTION")
    new = psub.add_parser("new", help="write a new protocol YAML")
    kind = new.add_mutually_exclusive_group(required=True)
    kind.add_argument("--randomized", action="store_true", help="cube offsets drawn over a disc")
    kind.add_argument("--fixed", action="store_true", help="every trial at the trained position")
    new.add_argument("--n", type=int, default=50, help="number of trials (default 50)")
    new.add_argument("--radius-cm", type=float, default=6.0, help="largest offset from the trained position")
    new.add_argument("--min-spacing-cm", type=float, default=1.0, help="smallest distance between two offsets")
    new.add_argument("--max-yaw-deg", type=float, default=0.0, help="cube yaw drawn from +-this (default 0)")
    new.add_argument("--seed", type=int, default=0)
    new.add_argument("--name", help="protocol name (default: the file's stem)")
    new.add_argument("--task", help="task instruction given to the policy")
    new.add_argument("-o", "--output", required=True, help="protocol file to write")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    new.set_defaults(func=_cmd_protocol_new)
    check = psub.add_parser("check", help="validate a protocol file")
    check.add_argument("protocol")
    check.set_defaults(func=_cmd_protocol_check)

    report = sub.add_parser("report", help="summarize one or more scoresheets")
    report.add_argument("scoresheets", nargs="+")
    report.add_argument("--json", action="store_true", help="machine-readable output")
    report.add_argument("-o", "--output", metavar="REPORT.html", help="write a self-contained HTML report")
    report.add_argument("--md", metavar="REPORT.md", help="write a Markdown report (figures in REPORT_files/)")
    report.add_argument("--training-starts", metavar="CSV",
                        help="training episodes' cube offsets (dx_cm,dy_cm per line) to draw on the top-view map")
    report.set_defaults(func=_cmd_report)

    plan = sub.add_parser("plan", help="trials needed to detect a difference, and interval widths to expect")
    plan.add_argument("--p0", type=float, required=True, help="baseline success rate, e.g. 0.9")
    plan.add_argument("--delta", type=float, required=True, help="difference to detect, e.g. -0.2")
    plan.add_argument("--alpha", type=float, default=0.05)
    plan.add_argument("--power", type=float, default=0.8)
    plan.set_defaults(func=_cmd_plan)

    measure = sub.add_parser("measure", help="placement error in cm from each trial's final top frame")
    measure.add_argument("inputs", nargs="+", metavar="RUN_OR_IMAGES", help="runs/<name> folders or image files")
    measure.add_argument("--bowl-cm", type=float, required=True, help="outer rim diameter of the bowl, e.g. 11.5")
    how = measure.add_mutually_exclusive_group()
    how.add_argument("--auto", action="store_true", help="find the rim automatically (ellipse fit)")
    how.add_argument("--clicks", help='two opposite rim points, "x1,y1 x2,y2" (for scripts and headless machines)')
    how.add_argument("--click", action="store_true", help="click two opposite rim points in a window")
    measure.add_argument("--calibrate-on", help="image to calibrate on (default: the first frame)")
    measure.add_argument("--calibration", default="calibration/bowl_top.yaml", help="where the calibration lives")
    measure.add_argument("--cube-cm", type=float, default=3.0)
    measure.add_argument("--bowl-height-cm", type=float, default=4.5, help="rim height above the table")
    measure.add_argument("--fovy-deg", type=float, help="top camera's vertical field of view: enables the "
                                                       "correction for the cube's top face sitting below the rim")
    measure.set_defaults(func=_cmd_measure)

    scene = sub.add_parser("scene-check", help="find objects in the top view that the reference frames lack")
    scene.add_argument("frame", help="the live top frame (PNG/JPEG)")
    scene.add_argument("--reference", action="append", required=True,
                       help="empty-scene capture or a training episode's first frame (repeatable)")
    scene.add_argument("--min-area-px", type=int, default=150)
    scene.set_defaults(func=_cmd_scene_check)

    dataset = sub.add_parser("dataset", help="check LeRobot v3.0 datasets before training")
    dsub = dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    validate = dsub.add_parser("validate", help="metadata, tabular data and every video frame; exit 0/1/2")
    validate.add_argument("path")
    validate.add_argument("--json", action="store_true", help="machine-readable report with stable check codes")
    validate.add_argument("--processes", type=int, default=2, help="parallel decoding processes (default 2)")
    validate.set_defaults(func=_cmd_dataset_validate)
    cover = dsub.add_parser("coverage", help="where the cube starts in each episode, and how spread out")
    cover.add_argument("path")
    cover.add_argument("--calibration", help="bowl calibration (harness measure) to convert pixels to cm")
    cover.add_argument("--px-per-cm", type=float, help="or a plain scale for a camera straight above the table")
    cover.add_argument("--template-box", help="x,y,w,h of the cube in the template frame (default: the red blob)")
    cover.add_argument("--template-episode", type=int, default=0)
    cover.add_argument("--protocol", help="report each trial offset's distance to the nearest training start")
    cover.add_argument("-o", "--output", default="coverage.png", help="plot (PNG); starts go to the same name .csv")
    cover.set_defaults(func=_cmd_dataset_coverage)
    split = dsub.add_parser("split", help="hold out every tenth episode index (a splits file for LeRobot)")
    split.add_argument("path")
    split.add_argument("-o", "--output", help="default <dataset>/meta/splits_every10.json")
    split.add_argument("--every", type=int, default=10)
    split.set_defaults(func=_cmd_dataset_split)

    offline = sub.add_parser("offline-eval", help="teacher-forced action accuracy on held-out episodes")
    offline.add_argument("--policy", help="a LeRobot pretrained policy folder")
    offline.add_argument("--checkpoints", nargs="+", help="several checkpoint folders, compared in one table")
    offline.add_argument("--dataset", required=True, help="LeRobot v3.0 dataset folder")
    offline.add_argument("--episodes", help="held-out episode indices, e.g. 0,10,20 (default: every tenth)")
    offline.add_argument("--frames", type=int, default=200, help="first N frames of each episode (default 200)")
    offline.add_argument("--device", default="cpu")
    offline.set_defaults(func=_cmd_offline_eval)

    fix = sub.add_parser("fix-ids", help="diagnose and repair SO-101 servo IDs (e.g. two servos at ID 5)")
    fix.add_argument("--port", required=True, help="serial port: /dev/ttyACM0, /dev/tty.usbmodem..., COM4")
    fix.add_argument("--yes", action="store_true", help="do not ask before programming (physical steps still wait)")
    fix.set_defaults(func=_cmd_fix_ids)

    emu = sub.add_parser("emulate-bus", help="serve emulated STS3215 servos on a pseudo-terminal (prints its path)")
    emu.add_argument("--scenario", help="YAML: servos (name, id, baud, firmware), fault rates, wire timing")
    emu.set_defaults(func=_cmd_emulate_bus)

    run = sub.add_parser("run", help="run a protocol, trial by trial (resumable)")
    run.add_argument("protocol")
    run.add_argument("--resume", action="store_true", help="continue the run's scoresheet where it stopped")
    run.add_argument("--robot", choices=["sim", "so101"], help="robot target (default: protocol's run section)")
    run.add_argument("--port", help="serial port of a real arm (e.g. /dev/ttyACM0, COM4)")
    run.add_argument("--camera", action="append", default=[], metavar="NAME=SOURCE",
                     help="real camera: top=0 or wrist=/dev/video2 (repeatable)")
    run.add_argument("--policy", help="LeRobot pretrained folder, or a built-in: expert, replay")
    run.add_argument("--rename-map", help='JSON map of camera keys, e.g. \'{"top": "camera1"}\'')
    run.add_argument("--scoresheet", help="scoresheet path (default scoresheets/<protocol>-<policy>.yaml)")
    run.add_argument("--runs-dir", default="runs", help="where per-trial evidence goes (default runs/)")
    run.add_argument("--headless", action="store_true", help="plain terminal mode, no TUI")
    run.add_argument("--realtime", action="store_true", help="pace the simulator at wall-clock speed (demos)")
    run.add_argument("--video-fps", type=float, default=10.0, help="evidence video frame rate (default 10)")
    run.add_argument("--video-size", default="320x240", help="evidence video size WxH (default 320x240)")
    run.add_argument("--no-video", action="store_true", help="keep final frames and trajectories only")
    run.add_argument("--record-dataset", nargs="?", const="", default=None, metavar="DIR",
                     help="also write the rollouts as a LeRobot v3.0 dataset (default runs/<scoresheet>/dataset)")
    run.add_argument("--device", help="torch device for LeRobot policies (default: cuda if available)")
    run.add_argument("--max-trials", type=int, help="stop after this many attempts (the run stays resumable)")
    run.add_argument("--inject-dropout", metavar="TRIAL:STEP",
                     help="testing aid: freeze the sim's top camera in TRIAL from STEP on")
    run.set_defaults(func=_cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except HarnessInputError as err:
        print(f"harness: error: {err.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
