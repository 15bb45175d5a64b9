"""`harness replay`: a simulated attempt's video from its state trajectory (see harness/run/replay.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError


def _size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    from harness.models.frame_size import parse_size

    try:
        width, height = parse_size(text)
    except ValueError as exc:
        raise HarnessInputError(None, "--size", str(exc)) from None
    if not (16 <= width <= 4096 and 16 <= height <= 4096) or width % 2 or height % 2:
        raise HarnessInputError(None, "--size", f"'{text}': width and height must be even, 16..4096")
    return width, height


def replay(args: argparse.Namespace) -> int:
    import harness.sim  # noqa: F401  (selects the headless GL backend before mujoco loads)
    from harness.run.replay import ReplaySettings, find_scoresheet, replay, replay_failures
    from harness.sim.trajectory import parse_view

    if args.failures:
        if args.trial is not None:
            raise HarnessInputError(args.trial, None, "give either a trial folder or --failures RUN_FOLDER")
        run_folder = Path(args.failures)
        if not run_folder.is_dir():
            raise HarnessInputError(run_folder, None, "no such run folder")
        sheet = Path(args.scoresheet) if args.scoresheet else find_scoresheet(run_folder)
        written = replay_failures(run_folder, sheet)
        for video in written:
            print(video)
        print(f"{len(written)} video{'s' if len(written) != 1 else ''} drawn for the failed and voided attempts "
              f"of {run_folder}")
        return 0
    if args.trial is None:
        raise HarnessInputError(None, "TRIAL", "name a trial folder (runs/<sheet>/trial-NNN-aN) or --failures")
    size = _size(args.size)
    view = parse_view(args.view) if args.view else None
    if args.fps is not None and not 0.5 <= args.fps <= 120:
        raise HarnessInputError(None, "--fps", f"{args.fps}: must be within 0.5..120")
    folder = Path(args.trial)
    name = args.camera or ("top" if view is None else "view-" + args.view.replace(",", "_"))
    out = Path(args.output) if args.output else folder.parent / f"{folder.name}-{name}.mp4"   # beside the trial
    if out.exists():
        raise HarnessInputError(out, "-o", "exists: nothing is overwritten")
    count = replay(folder, ReplaySettings(args.camera, view, size, args.fps), out)
    print(f"{out}: {count} frames")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("replay", help="draw a simulated attempt's video from its state trajectory, from "
                                           "its cameras or any viewpoint")
    parser.add_argument("trial", nargs="?", help="a trial's evidence folder: runs/<sheet>/trial-NNN-aN")
    parser.add_argument("--camera", help="a recorded camera (top, wrist; default top)")
    parser.add_argument("--view", metavar="AZIMUTH,ELEVATION,DISTANCE",
                        help="a free camera following the gripper and cube: degrees, degrees, metres "
                             "(e.g. 135,-20,0.3)")
    parser.add_argument("--size", metavar="WxH", help="frame size (default: the recorded video's)")
    parser.add_argument("--fps", type=float, help="frame rate (default: the recorded video's)")
    parser.add_argument("-o", "--output", metavar="PATH",
                        help="an .mp4, or a new folder for PNG frames (default <trial>-<camera>.mp4 beside the trial "
                             "folder, in its run folder)")
    parser.add_argument("--failures", metavar="RUN_FOLDER",
                        help="draw every video the run's failed and voided attempts lack, into their folders")
    parser.add_argument("--scoresheet", help="with --failures: the run's scoresheet (default: <run folder "
                                             "name>.yaml in a scoresheets folder here or beside the runs folder, "
                                             "the one naming this run's trials)")
    parser.set_defaults(func=replay)
