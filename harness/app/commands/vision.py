"""`harness measure`, `harness calibrate-camera` and `harness scene-check`: handlers live in `harness.vision`."""

from __future__ import annotations

import argparse
from typing import Any


def measure(args: argparse.Namespace) -> int:
    from harness.app.measure_command import run_measure
    from harness.models.measure_request import MeasureRequest

    return run_measure(MeasureRequest.from_flags(vars(args)))


def calibrate_camera(args: argparse.Namespace) -> int:
    from harness.app.calibrate_camera_command import calibrate_camera_from_args

    return calibrate_camera_from_args(args)


def scene_check(args: argparse.Namespace) -> int:
    from harness.app.measure_command import scene_check_from_args

    return scene_check_from_args(args)


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
    parser.add_argument("--bowl-height-cm", type=float, default=4.2,
                        help="height of the rim's outer edge above the table (mid-lip on a rounded lip)")
    parser.add_argument("--rim-width-cm", type=float, default=0.6,
                        help="the rim's lip seen from above, outer edge to the wall's inside (--auto fits both edges)")
    parser.add_argument("--floor-cm", type=float, default=7.3,
                        help="diameter of the inside floor where the wall meets it (tells --auto the rim's outer "
                             "edge from its inner one; 0: no visible floor edge)")
    parser.add_argument("--fovy-deg", type=float, help="top camera's vertical field of view: enables the "
                                                      "correction for the cube's top face sitting below the rim")
    parser.add_argument("--camera", help="lens calibration from calibrate-camera (default: camera_top.yaml beside "
                                         "--calibration, used when it exists)")
    parser.add_argument("--max-uncertainty-cm", type=float, default=2.0,
                        help="a frame whose 95%% interval is wider than this is reported as not measured")
    parser.add_argument("--json", action="store_true",
                        help="one JSON record per image on stdout (distance, inside, uncertainty, reasons)")
    parser.set_defaults(func=measure)

    cam = sub.add_parser("calibrate-camera", help="lens intrinsics and distortion from photos of a printed board")
    cam.add_argument("images", nargs="*", metavar="IMAGES", help="photos of the board (globs allowed), 10-20 of them")
    cam.add_argument("--board", choices=("checkerboard", "charuco"), default="checkerboard")
    cam.add_argument("--squares", default="10x7", help="squares across x down, e.g. 10x7")
    cam.add_argument("--square-mm", type=float, default=25.0, help="side of one printed square, measured")
    cam.add_argument("--marker-mm", type=float, default=18.0, help="ChArUco marker side")
    cam.add_argument("--dictionary", default="DICT_4X4_50", help="ChArUco marker dictionary")
    cam.add_argument("--calibration", default="calibration/bowl_top.yaml",
                     help="the rim calibration; the lens is saved beside it as camera_top.yaml")
    cam.add_argument("--output", help="where to save instead")
    cam.add_argument("--print-board", metavar="PNG", help="write the board to print")
    cam.set_defaults(func=calibrate_camera)

    scene = sub.add_parser("scene-check", help="find objects in the top view that the reference frames lack")
    scene.add_argument("frame", help="the live top frame (PNG/JPEG)")
    scene.add_argument("--reference", action="append", required=True,
                       help="empty-scene capture or a training episode's first frame (repeatable)")
    scene.add_argument("--min-area-px", type=int, default=None,
                       help="smallest region reported, in pixels (default: 150 px at 640x480, scaled with the "
                            "frame's area: 38 at 320x240, 1,350 at 1920x1080)")
    scene.set_defaults(func=scene_check)
