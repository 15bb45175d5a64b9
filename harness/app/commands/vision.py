"""`harness measure` and `harness scene-check`: the handlers live in `harness.vision.cli_measure`."""

from __future__ import annotations

import argparse
from typing import Any


def measure(args: argparse.Namespace) -> int:
    from harness.vision.cli_measure import run_measure

    return run_measure(args)


def scene_check(args: argparse.Namespace) -> int:
    from harness.vision.cli_measure import run_scene_check

    return run_scene_check(args)


def register(sub: Any) -> None:
    parser = sub.add_parser("measure", help="placement error in cm from each trial's final top frame")
    parser.add_argument("inputs", nargs="+", metavar="RUN_OR_IMAGES", help="runs/<name> folders or image files")
    parser.add_argument("--bowl-cm", type=float, required=True, help="outer rim diameter of the bowl, e.g. 11.5")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--auto", action="store_true", help="find the rim automatically (ellipse fit)")
    how.add_argument("--clicks", help='two opposite rim points, "x1,y1 x2,y2" (for scripts and headless machines)')
    how.add_argument("--click", action="store_true", help="click two opposite rim points in a window")
    parser.add_argument("--calibrate-on", help="image to calibrate on (default: the first frame)")
    parser.add_argument("--calibration", default="calibration/bowl_top.yaml", help="where the calibration lives")
    parser.add_argument("--cube-cm", type=float, default=3.0)
    parser.add_argument("--bowl-height-cm", type=float, default=4.5, help="rim height above the table")
    parser.add_argument("--fovy-deg", type=float, help="top camera's vertical field of view: enables the "
                                                      "correction for the cube's top face sitting below the rim")
    parser.set_defaults(func=measure)

    scene = sub.add_parser("scene-check", help="find objects in the top view that the reference frames lack")
    scene.add_argument("frame", help="the live top frame (PNG/JPEG)")
    scene.add_argument("--reference", action="append", required=True,
                       help="empty-scene capture or a training episode's first frame (repeatable)")
    scene.add_argument("--min-area-px", type=int, default=150)
    scene.set_defaults(func=scene_check)
