"""`harness calibrate-camera`: the top camera's lens from photos of a printed board, saved beside the rim's."""

from __future__ import annotations

import argparse
import glob
import re
from pathlib import Path

import numpy as np
from PIL import Image

from harness.errors import HarnessInputError
from harness.storage.atomic import write_bytes_atomic
from harness.vision.camera import CAMERA_FILE, Board, BoardKind, calibrate
from harness.vision.image_file import read_image

RMS_WARN_PX = 1.0


def _board(args: argparse.Namespace) -> Board:
    match = re.fullmatch(r"(\d+)x(\d+)", args.squares)
    if not match or min(int(match[1]), int(match[2])) < 3:
        raise HarnessInputError(None, "--squares", f"'{args.squares}' is not COLUMNSxROWS of squares, e.g. 10x7")
    if not 1.0 <= args.square_mm <= 500.0:
        raise HarnessInputError(None, "--square-mm", f"{args.square_mm}: must be within 1..500 mm")
    kind = BoardKind(args.board)
    if kind is BoardKind.CHARUCO and not 0 < args.marker_mm < args.square_mm:
        raise HarnessInputError(None, "--marker-mm", f"{args.marker_mm}: must be smaller than --square-mm")
    return Board(kind, int(match[1]), int(match[2]), args.square_mm, args.marker_mm, args.dictionary)


def _images(patterns: list[str]) -> list[tuple[str, np.ndarray]]:
    paths = sorted({p for pattern in patterns for p in (glob.glob(pattern) or [pattern])})
    images = []
    for path in paths:
        images.append((path, read_image(path, "L")))
    return images


def _save_png(path: Path, image: np.ndarray) -> None:
    import io

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    write_bytes_atomic(path, buffer.getvalue())


def calibrate_camera_from_args(args: argparse.Namespace) -> int:
    board = _board(args)
    images = _images(args.images) if args.images else None   # read first: a refusal writes no board either
    if args.print_board:
        out = Path(args.print_board)
        _save_png(out, board.image())
        print(f"board written to {out}: print it at 100 %, glue it flat, and check that a square measures "
              f"{board.square_mm:g} mm; then photograph it 10-20 times with the top camera, tilted and moved "
              "into every corner of the frame")
        if not args.images:
            return 0
    if not args.images:
        raise HarnessInputError(None, "IMAGES", "photos of the board are needed (or --print-board PATH)")
    result = calibrate(images or [], board)
    out = Path(args.output) if args.output else Path(args.calibration).with_name(CAMERA_FILE)
    out.parent.mkdir(parents=True, exist_ok=True)
    cam = result.intrinsics
    cam.save(out)
    print(f"board found in {len(result.used)} of {len(result.used) + len(result.skipped)} images"
          + (f" (not in: {', '.join(result.skipped)})" if result.skipped else ""))
    for name, rms in zip(result.used, result.per_view_rms_px, strict=True):
        print(f"  {name}: reprojection error {rms:.3f} px")
    k = ", ".join(f"{v:.4f}" for v in cam.distortion)
    print(f"reprojection error (RMS) {result.rms_px:.3f} px; focal {cam.fx:.1f} x {cam.fy:.1f} px, principal point "
          f"({cam.cx:.1f}, {cam.cy:.1f}), field of view {cam.fovy_deg:.1f} deg vertical; distortion [{k}]")
    if result.rms_px > RMS_WARN_PX:
        print(f"warning: an error above {RMS_WARN_PX:g} px means the board was not flat, the --squares or "
              "--square-mm are wrong, or the photos are blurred: retake them before trusting this")
    print(f"saved {out}; `harness measure` will undistort every frame with it")
    return 0
