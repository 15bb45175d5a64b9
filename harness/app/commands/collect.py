"""`harness collect`: the parser; the command itself is `harness.app.collect_command`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.render_profile import DEFAULT_PROFILE, RenderProfile


def _size(text: str) -> tuple[int, int]:
    from harness.models.frame_size import parse_size

    try:
        width, height = parse_size(text)
    except ValueError as exc:
        raise HarnessInputError(None, "--image-size", str(exc)) from None
    if width < 16 or height < 16 or width % 2 or height % 2:
        raise HarnessInputError(None, "--image-size", f"'{text}': width and height must be even and at least 16")
    return width, height


def collect(args: argparse.Namespace) -> int:
    from harness.app.collect_command import CollectRequest, collect, default_output
    from harness.data.acceptance import AcceptMode
    from harness.models.run_request import check_policy_refs

    if args.max_attempts is not None and args.max_attempts < 1:
        raise HarnessInputError(None, "--max-attempts", f"{args.max_attempts}: must be at least 1")
    if args.device is not None:
        from harness.policies.lerobot_policy import check_device

        check_device(args.device)
    check_policy_refs([args.policy])
    protocol = Path(args.protocol)
    output = Path(args.output) if args.output else default_output(protocol, args.policy)
    request = CollectRequest(
        protocol=protocol, policy=args.policy, episodes=args.episodes, output=output,
        accept=AcceptMode(args.accept), fps=args.fps,
        cameras=() if args.no_video else ("top", "wrist"), image_size=_size(args.image_size), seed=args.seed,
        max_attempts=args.max_attempts if args.max_attempts is not None else 4 * args.episodes,
        checkpoint_every=args.checkpoint_every, device=args.device,
        render_profile=RenderProfile(args.render_profile),
    )
    result = collect(request, progress=lambda line: print(line, flush=True))
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(result.rejected.items())) or "none"
    print(f"{output}: {result.accepted} accepted of {result.attempts} attempts; rejected: {reasons}")
    if not result.complete:
        print(f"harness: stopped at the attempt limit ({request.max_attempts}) with {result.accepted} of "
              f"{args.episodes} episodes; raise --max-attempts and rerun to continue", file=sys.stderr)
        return 1
    from harness.command import harness_command

    print(f"check it: {harness_command()} dataset validate {output}; train with the command in {output}/README.md")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("collect", help="collect judged demonstrations on the simulated arm as a LeRobot "
                                            "dataset (resumable: rerun the same command)")
    parser.add_argument("protocol", help="protocol whose start positions the attempts cycle through")
    parser.add_argument("--policy", required=True, help="expert (scripted, reads the true cube pose), replay, "
                                                         "or a LeRobot pretrained folder")
    parser.add_argument("--episodes", type=int, required=True, help="accepted episodes wanted")
    parser.add_argument("--accept", choices=["strict", "clean-release"], default="strict",
                        help="strict: the judge's full sequence; clean-release: also no renewed contact or "
                             "closing after the release (default strict)")
    parser.add_argument("--fps", type=int, choices=[30, 60],
                        help="control rate; each action is held for 300/fps physics steps (default: the "
                             "protocol's fps)")
    parser.add_argument("-o", "--output", help="dataset folder (default datasets/<protocol>-<policy>); the "
                                               "journal lives beside it in <output>.collect/")
    parser.add_argument("--image-size", default="640x480", help="recorded camera size WxH (default 640x480)")
    parser.add_argument("--render-profile", default=DEFAULT_PROFILE.value, choices=[p.value for p in RenderProfile],
                        help="how the recorded frames are drawn (default sized-v1: frames up to 160 px from coarse "
                             "meshes; full-v1: the full meshes at every size); on the dataset's card, and a run "
                             "of a policy trained on it with another profile says so")
    parser.add_argument("--no-video", action="store_true", help="record joint states and actions only")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the per-attempt cube jitter")
    parser.add_argument("--max-attempts", type=int, help="give up after this many attempts in all "
                                                         "(default 4 x --episodes)")
    parser.add_argument("--checkpoint-every", type=int, default=10,
                        help="finalize the dataset every N accepted episodes; a kill loses at most N-1 (default 10)")
    parser.add_argument("--device", help="torch device for a LeRobot policy (default: cuda if available)")
    parser.set_defaults(func=collect)
