"""`harness score DATASET`: a recorded dataset's episodes scored after the fact (NOT pre-registered)."""

from __future__ import annotations

import argparse
from typing import Any


def score(args: argparse.Namespace) -> int:
    from harness.app.score_command import score_from_args

    return score_from_args(args)


def register(sub: Any) -> None:
    parser = sub.add_parser("score", help="score a recorded LeRobot dataset's episodes after the fact (a sheet "
                                          "marked NOT pre-registered)")
    parser.add_argument("dataset", help="a LeRobot v3 dataset folder recorded with a policy (lerobot-rollout, "
                                        "lerobot-record), or its Hub id in the local Hub cache")
    parser.add_argument("--scoresheet", metavar="PATH",
                        help="the post-hoc sheet to write or resume (default: scoresheets/posthoc-<dataset>.yaml)")
    parser.add_argument("--protocol", metavar="PROTOCOL.yaml",
                        help="the scene (bowl, cube, trained spot) and stall limit to read the traces against "
                             "(default: the harness's default scene)")
    parser.add_argument("--top-camera", default="top", metavar="NAME",
                        help="the dataset's top camera (observation.images.NAME; default top)")
    parser.add_argument("--bowl-calibration", metavar="FILE",
                        help="measure each episode's final top frame against the bowl's rim (`harness measure "
                             "... --auto` writes one): placement error and whether the cube ended in the bowl")
    parser.add_argument("--plain", action="store_true",
                        help="label at plain terminal prompts (one line per episode naming its video) rather than "
                             "the screen that plays each episode's video beside its proposal")
    parser.add_argument("--accept-proposals", action="store_true",
                        help="label each episode with its proposal, unseen (recorded as such in the sheet)")
    parser.set_defaults(func=score)
