"""`harness run`: the parser; the command itself is `harness.app.run_command`."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import Any


def run(args: argparse.Namespace) -> int:
    from harness.app.run_command import run_from_args

    return run_from_args(args)


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number or auto") from None


class _Skipping:
    """A parser that adds every flag but those whose destination is in `skip` (what another command decides)."""

    def __init__(self, parser: argparse.ArgumentParser, skip: Collection[str]) -> None:
        self.parser = parser
        self.skip = frozenset(skip)

    def add_argument(self, *names: str, **kwargs: Any) -> None:
        dest = kwargs.get("dest") or next((n for n in names if n.startswith("--")), names[0]).lstrip("-")
        if dest.replace("-", "_") not in self.skip:
            self.parser.add_argument(*names, **kwargs)


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run a protocol, trial by trial (resumable)")
    add_run_flags(parser)
    parser.set_defaults(func=run)


def add_run_flags(target: argparse.ArgumentParser, skip: Collection[str] = ()) -> None:
    """Every `harness run` flag (each a `models.run_request.RUN_FLAGS` entry), but those in `skip`: `harness
    rehearse` takes the run's flags it does not decide itself, so a new flag reaches rehearsals at once."""
    from harness.app.async_inference import register_flags as register_async_flags
    from harness.app.rtc_inference import register_flags as register_rtc_flags
    from harness.models.render_profile import RenderProfile
    from harness.models.run_settings import InferenceEngine, RobotKind

    parser: Any = _Skipping(target, skip)
    parser.add_argument("protocol")
    parser.add_argument("--resume", action="store_true", help="continue the run's scoresheet where it stopped")
    parser.add_argument("--robot", choices=[kind.value for kind in RobotKind],
                        help="robot target (default: protocol's run section)")
    parser.add_argument("--port", help="serial port of a real arm (e.g. /dev/ttyACM0, COM4)")
    parser.add_argument("--robot-id", default="harness_follower",
                        help="calibration id: calibration/<id>.json, else LeRobot's calibration folder (where "
                             "lerobot-calibrate writes), or a path to a .json file (emulated_follower for "
                             "`emulate-bus --sim`)")
    parser.add_argument("--camera", action="append", default=[], metavar="NAME=SOURCE",
                        help="real camera: top=0 or wrist=/dev/video2, optionally sized, paced and formatted: "
                             "top=0@1280x720,fps=30,fourcc=MJPG (default 640x480 at the control rate); simulated "
                             "(emulate-bus --sim): top=sim or top=sim@320x240 (repeatable)")
    parser.add_argument("--policy", action="append",
                        help="a LeRobot pretrained folder, a Hugging Face Hub id ORG/NAME[@REVISION] (the local cache "
                             "first; downloaded when HF_HUB_OFFLINE allows), or a built-in: expert, replay; two or "
                             "more: a blind, interleaved comparison with sequential stopping (docs/comparisons.md)")
    parser.add_argument("--no-blind", action="store_true",
                        help="a comparison that shows which arm is which policy while it runs (simulation)")
    parser.add_argument("--rename-map", help='JSON map of camera keys, e.g. \'{"top": "camera1"}\'')
    parser.add_argument("--scoresheet", help="scoresheet path (default scoresheets/<protocol>-<policy>.yaml)")
    parser.add_argument("--runs-dir", default="runs", help="where per-trial evidence goes (default runs/)")
    parser.add_argument("--headless", action="store_true", help="plain terminal mode, no TUI")
    parser.add_argument("--realtime", action="store_true", help="pace the simulator at wall-clock speed (demos)")
    parser.add_argument("--video-fps", type=float, default=10.0, help="evidence video frame rate (default 10)")
    parser.add_argument("--video-size", default="320x240", help="evidence video size WxH (default 320x240)")
    parser.add_argument("--video", choices=["failures", "all", "none"],
                        help="simulated arm: which attempts get evidence videos (default failures: drawn for failed "
                             "and voided attempts; every attempt keeps its state trajectory and final frames, and "
                             "`harness replay` draws any video later)")
    parser.add_argument("--no-video", action="store_true",
                        help="same as --video none; on a real arm: final frames and trajectories only")
    parser.add_argument("--record-dataset", nargs="?", const="", default=None, metavar="DIR",
                        help="also write the rollouts as a LeRobot v3.0 dataset (default runs/<scoresheet>/dataset)")
    parser.add_argument("--record-size", default="128x96", metavar="WxH",
                        help="--record-dataset frame size (default 128x96: ACT trains at under a second a step on "
                             "a laptop CPU; 640x480 costs ~25 s a step)")
    parser.add_argument("--record-codec", default="h264", choices=["h264", "libsvtav1", "hevc"],
                        help="--record-dataset video codec (default h264: fastest to encode and decode on a CPU; "
                             "libsvtav1, LeRobot's default, makes the smallest files)")
    parser.add_argument("--record-fps", type=int, metavar="N",
                        help="--record-dataset frame rate, a divisor of the protocol's control rate (default: "
                             "the control rate)")
    parser.add_argument("--bowl-calibration", metavar="PATH",
                        help="real arm: the bowl-rim calibration (harness measure --auto): propose each outcome "
                             "from evidence")
    parser.add_argument("--trained-spot", metavar="PNG",
                        help="real arm: a top frame with the cube on its trained spot: guide each placement")
    parser.add_argument("--placement-tolerance", default="0.5,10", metavar="CM,DEG",
                        help="real arm: how close the cube must be before a trial starts (default 0.5,10)")
    parser.add_argument("--device", help="torch device for LeRobot policies (default: cuda if available)")
    parser.add_argument("--max-trials", type=int, help="stop after this many attempts (the run stays resumable)")
    parser.add_argument("--inject-dropout", metavar="TRIAL:STEP",
                        help="testing aid: freeze the sim's top camera in TRIAL from STEP on")
    parser.add_argument("--latency-ms", type=float, metavar="N",
                        help="simulated arm: each action lands N ms of simulated time after its observation, the "
                             "arm executing its last command meanwhile (default: lock-step); locked with the run")
    parser.add_argument("--render-profile", choices=[p.value for p in RenderProfile],
                        help="simulated arm: how the policy's camera frames are drawn: sized-v1 (default: frames up "
                             "to 160 px from coarse meshes, 3x cheaper, validated in docs/benchmarks.md) or full-v1 "
                             "(the full meshes at every size, as before); locked with the run")
    parser.add_argument("--latency", choices=["measured"],
                        help="simulated arm: the latency model with each action's own measured policy time")
    parser.add_argument("--latency-chunk-ms", type=float, metavar="C",
                        help="simulated arm, with --latency-ms N: an action the policy computes a new chunk for "
                             "lands C ms after its observation (the others N ms), and the episode is counted in "
                             "commands, as a paced real arm's is (what `harness twin` gives a chunking policy); "
                             "locked with the run")
    parser.add_argument("--inference", choices=[InferenceEngine.SYNC.value, InferenceEngine.RTC.value],
                        help="LeRobot inference engine: sync (default) or rtc (Real-Time Chunking, for policies "
                             "that support it; refused before anything is written otherwise); locked with the run")
    register_async_flags(parser)
    register_rtc_flags(parser)
    parser.add_argument("--workers", type=_workers, default=1, metavar="N|auto",
                        help="simulated arm only: run this many trials at a time: this process at once, the "
                             "other N-1 on Ray workers as they start; the scoresheet is written in trial order, as "
                             "a serial run writes it (default 1; auto: the count a model of the run's costs "
                             "predicts fastest, serial when parallel would not win)")
    parser.add_argument("--no-driver-worker", action="store_true",
                        help="with --workers: all N workers on Ray, this process only records (a cluster whose "
                             "driver machine should run no trials)")
    parser.add_argument("--address", help="an existing Ray cluster to run --workers on (default: a local Ray runtime "
                                          "on loopback only); see docs/sweeps.md for what must protect a cluster")
    parser.add_argument("--ray-dashboard", action="store_true",
                        help="start Ray's dashboard for a local --workers run (on 127.0.0.1; off by default)")
