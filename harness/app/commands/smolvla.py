"""`harness smolvla-backbone OUT`: a small SmolVLM2-architecture backbone and a SmolVLA base on it, made on
this machine (no Hugging Face hub), for the card's `lerobot-train` SmolVLA command (docs/smolvla.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError

MAX_CHUNK = 1000    # actions per chunk: LeRobot's SmolVLA default is 50
MAX_SIDE = 4096


def _size(text: str) -> tuple[int, int]:
    from harness.models.frame_size import parse_size

    try:
        width, height = parse_size(text)
    except ValueError as exc:
        raise HarnessInputError(None, "--camera-size", str(exc)) from None
    if width < 16 or height < 16:
        raise HarnessInputError(None, "--camera-size", f"'{text}': width and height must be at least 16")
    return width, height


def smolvla_backbone(args: argparse.Namespace) -> int:
    from harness.models.defaults import DEFAULT_TASK
    from harness.models.protocol import load_protocol
    from harness.policies.smolvla_backbone import build_backbone, build_tiny_smolvla_base

    if not 1 <= args.chunk_size <= MAX_CHUNK:
        raise HarnessInputError(None, "--chunk-size", f"{args.chunk_size}: must be within 1..{MAX_CHUNK}")
    for flag, text in (("output", args.output), *(("--task", t) for t in args.task or [])):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise HarnessInputError(None, flag, "not UTF-8 text") from None
    if max(_size(args.camera_size)) > MAX_SIDE:
        raise HarnessInputError(None, "--camera-size", f"'{args.camera_size}': at most {MAX_SIDE} pixels a side")
    tasks = [load_protocol(Path(p)).task for p in args.protocol or []] + list(args.task or [])
    camera_size = _size(args.camera_size)
    out = Path(args.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HarnessInputError(out, None, "exists and is not an empty folder: name a new one")
    vlm = build_backbone(out / "vlm", tasks or [DEFAULT_TASK])
    base = build_tiny_smolvla_base(out / "smolvla_base", vlm, camera_size=camera_size,
                                   chunk_size=args.chunk_size)
    print(f"backbone: {vlm}\nSmolVLA base: {base}\n"
          f"train: the dataset card's SmolVLA command with --policy.path={base.resolve()}")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("smolvla-backbone", help="a small SmolVLM2-architecture backbone and SmolVLA base, "
                                                     "random weights, made locally (no hub)")
    parser.add_argument("output", help="folder to create: OUT/vlm (the backbone, SmolVLA's vlm_model_name) and "
                                       "OUT/smolvla_base (stands where lerobot/smolvla_base stands)")
    parser.add_argument("--protocol", action="append", help="a protocol whose task instruction the tokenizer must "
                                                            "know (repeatable; default: the default task)")
    parser.add_argument("--task", action="append", help="another task instruction (repeatable)")
    parser.add_argument("--camera-size", default="640x480", help="the cameras' WxH in the base's config: the size "
                                                                 "the simulator renders for the trained policy "
                                                                 "(the collected data's; default 640x480)")
    parser.add_argument("--chunk-size", type=int, default=10, help="actions per chunk (default 10)")
    parser.set_defaults(func=smolvla_backbone)
