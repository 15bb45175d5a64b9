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
    chain = build_chain(scenario)
    if args.sim:
        import harness.sim  # noqa: F401  (headless GL before mujoco)
        from harness.bus.sim_coupling import JointCalibration, SimCoupledChain
        from harness.sim.world import SimWorld

        try:
            raw = json.loads(Path(args.calibration).read_text())
            calibration = {name: JointCalibration(c["range_min"], c["range_max"]) for name, c in raw.items()}
        except (OSError, ValueError, KeyError) as exc:
            raise HarnessInputError(args.calibration, None, f"not a LeRobot calibration file ({exc})") from None
        chain = SimCoupledChain(chain.servos, SimWorld(), calibration, chain.faults)
    with PtyBus(chain, wire_timing=scenario.wire_timing) as bus:
        console(bus.chain, bus.lock, bus.port)
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    from harness.vision.cli_measure import run_measure

    return run_measure(args)


def _cmd_dataset(args: argparse.Namespace) -> int:
    from harness.data import commands

    return getattr(commands, f"run_{args.dataset_command}")(args)


def _cmd_offline_eval(args: argparse.Namespace) -> int:
    from harness.data.commands import run_offline_eval

    return run_offline_eval(args)


def _cmd_scene_check(args: argparse.Namespace) -> int:
    from harness.vision.cli_measure import run_scene_check

    return run_scene_check(args)


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
    validate.set_defaults(func=_cmd_dataset)
    cover = dsub.add_parser("coverage", help="where the cube starts in each episode, and how spread out")
    cover.add_argument("path")
    cover.add_argument("--calibration", help="bowl calibration (harness measure) to convert pixels to cm")
    cover.add_argument("--px-per-cm", type=float, help="or a plain scale for a camera straight above the table")
    cover.add_argument("--template-box", help="x,y,w,h of the cube in the template frame (default: the red blob)")
    cover.add_argument("--template-episode", type=int, default=0)
    cover.add_argument("--protocol", help="report each trial offset's distance to the nearest training start")
    cover.add_argument("-o", "--output", default="coverage.png", help="plot (PNG); starts go to the same name .csv")
    cover.set_defaults(func=_cmd_dataset)
    split = dsub.add_parser("split", help="hold out every tenth episode index (a splits file for LeRobot)")
    split.add_argument("path")
    split.add_argument("-o", "--output", help="default <dataset>/meta/splits_every10.json")
    split.add_argument("--every", type=int, default=10)
    split.set_defaults(func=_cmd_dataset)

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
    emu.add_argument("--sim", action="store_true",
                     help="couple the servos to the simulated arm: a LeRobot so101_follower on this port moves it")
    emu.add_argument("--calibration", default="calibration/emulated_follower.json",
                     help="with --sim: the follower calibration LeRobot will use (maps ticks to joint angles)")
    emu.set_defaults(func=_cmd_emulate_bus)

    run = sub.add_parser("run", help="run a protocol, trial by trial (resumable)")
    run.add_argument("protocol")
    run.add_argument("--resume", action="store_true", help="continue the run's scoresheet where it stopped")
    run.add_argument("--robot", choices=["sim", "so101"], help="robot target (default: protocol's run section)")
    run.add_argument("--port", help="serial port of a real arm (e.g. /dev/ttyACM0, COM4)")
    run.add_argument("--robot-id", default="harness_follower",
                     help="calibration id: calibration/<id>.json (emulated_follower for `emulate-bus --sim`)")
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
