"""`harness dataset validate|coverage|split` and `harness offline-eval`: handlers in `harness.app.dataset_command`."""

from __future__ import annotations

import argparse
from typing import Any


def dataset(args: argparse.Namespace) -> int:
    from harness.app import dataset_command as commands

    handlers = {"validate": commands.validate_from_args, "coverage": commands.coverage_from_args,
                "split": commands.split_from_args}
    return handlers[args.dataset_command](args)


def offline_eval(args: argparse.Namespace) -> int:
    from harness.app.dataset_command import offline_eval_from_args

    return offline_eval_from_args(args)


def register(sub: Any) -> None:
    parser = sub.add_parser("dataset", help="check LeRobot v3.0 datasets before training")
    dsub = parser.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    validate = dsub.add_parser("validate", help="metadata, tabular data and every video frame; exit 0/1/2")
    validate.add_argument("path")
    validate.add_argument("--json", action="store_true", help="machine-readable report with stable check codes")
    validate.add_argument("--processes", type=int, default=2,
                          help="parallel decoding processes (default 2; under 3,000 camera frames, one)")
    validate.set_defaults(func=dataset)
    cover = dsub.add_parser("coverage", help="where the cube starts in each episode, and how spread out")
    cover.add_argument("path")
    cover.add_argument("--calibration", help="bowl calibration (harness measure), on a top frame of the same "
                                             "camera at any size: positions in cm from the trained position")
    cover.add_argument("--px-per-cm", type=float, help="or a plain scale for a camera straight above the table "
                                                       "(positions from the median start)")
    cover.add_argument("--fovy-deg", type=float, help="top camera's vertical field of view (the simulated one: 45): "
                                                      "corrects for the cube standing below the rim")
    cover.add_argument("--bowl-height-cm", type=float, default=4.0,
                       help="rim above the table (default 4.0, the simulated bowl)")
    cover.add_argument("--min-score", type=float, help="a start scoring less is reported as not found "
                                                       "(default 0.6)")
    cover.add_argument("--truth", metavar="SCORESHEET", help="the run that recorded this dataset with "
                       "--record-dataset: compare the found starts with where it put the cube (a collected "
                       "dataset's meta/selection.json is used without asking)")
    cover.add_argument("--protocol", help="report each trial offset's distance to the nearest training start")
    cover.add_argument("-o", "--output", default="coverage.png", help="plot (PNG); starts go to the same name .csv")
    cover.set_defaults(func=dataset)
    split = dsub.add_parser("split", help="hold out every tenth episode index (a splits file for LeRobot)")
    split.add_argument("path")
    split.add_argument("-o", "--output", help="default <dataset>/meta/splits_every10.json")
    split.add_argument("--every", type=int, default=10)
    split.set_defaults(func=dataset)

    offline = sub.add_parser("offline-eval", help="teacher-forced action accuracy on held-out episodes")
    offline.add_argument("--policy", help="a LeRobot pretrained policy folder")
    offline.add_argument("--checkpoints", nargs="+", help="several checkpoint folders, compared in one table")
    offline.add_argument("--dataset", required=True, help="LeRobot v3.0 dataset folder")
    offline.add_argument("--episodes", help="held-out episode indices, e.g. 0,10,20 (default: every tenth)")
    offline.add_argument("--frames", type=int, default=200, help="first N frames of each episode (default 200)")
    offline.add_argument("--device", default="cpu")
    offline.add_argument("--resize-images", action="store_true",
                         help="resize camera frames to the size a policy was trained at (otherwise refused)")
    offline.set_defaults(func=offline_eval)
