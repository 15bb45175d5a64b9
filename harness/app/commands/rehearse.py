"""`harness rehearse`: the real-arm flow end to end on the emulated arm (see `harness.app.rehearse_command`)."""

from __future__ import annotations

import argparse
from typing import Any


def rehearse(args: argparse.Namespace) -> int:
    from harness.app.rehearse_command import rehearse_from_args

    return rehearse_from_args(args)


def register(sub: Any) -> None:
    parser = sub.add_parser("rehearse", help="the real-arm flow on the emulated arm with simulated cameras: bowl "
                                             "calibration, trained spot, guided placement, policy, proposals, "
                                             "measured placement, score")
    parser.add_argument("protocol", help="protocol YAML (its scene must be the emulated table's)")
    parser.add_argument("--policy", required=True, metavar="PATH", action="append",
                        help="LeRobot pretrained_model folder, or expert (plans from the emulated cube's true "
                             "pose); two or more: a blind comparison (the protocol's stopping rule must be sequential)")
    parser.add_argument("--operator", choices=["person", "scripted"], default="person",
                        help="person (default): you place the cube by typing the emulator's `cube DX DY YAW` at "
                             "the prompts and score; scripted: the cube is moved for you and each proposal "
                             "confirmed (CI)")
    parser.add_argument("--placement-error-cm", type=float, default=0.0, metavar="CM",
                        help="scripted operator: put the cube this far off its target first, then correct it from "
                             "the guide's reading (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="scripted operator: direction of its placement errors")
    parser.add_argument("--rehearsal-dir", metavar="DIR",
                        help="where the desk's files go (photos, bowl calibration; default "
                             "rehearsals/<protocol>-<policy>-rehearsal)")
    parser.add_argument("--camera-size", default="640x480", metavar="WxH",
                        help="simulated cameras' frame size (default 640x480, a real arm's)")
    parser.add_argument("--resume", action="store_true",
                        help="continue a paused or interrupted rehearsal: its scoresheet, with the desk's photos and "
                             "bowl calibration it already made (same protocol, policy and --rehearsal-dir)")
    parser.add_argument("--gap", action="append", metavar="NAME=VALUE",
                        help="a declared reality gap, repeatable: the emulated arm differs from the simulated twin "
                             "(`harness twin`) in this knob, recorded in the scoresheet: cube_friction (twin 1.0), "
                             "cube_mass_g (30), servo_gain (1.0), servo_backlash_deg (0), camera_tilt_deg (0), "
                             "exposure (1.0), table_height_mm (0); docs/twin.md")
    from harness.app.commands.run import add_run_flags
    from harness.app.rehearse_command import REHEARSAL_OWNS

    # the run's own flags (--max-trials, --device, --inference and --rtc-*, --video-*, ...), passed on to it
    # as given; those the rehearsal decides (robot, port, cameras, files, scoresheet) are its own
    add_run_flags(parser, skip=REHEARSAL_OWNS)
    parser.set_defaults(func=rehearse)
