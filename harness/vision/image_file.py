"""Image files a user hands the harness (frames to measure, board photos, reference frames), checked before
they are decoded.

Why: a PNG of a few dozen bytes can claim 100,000 x 100,000 pixels; decoding it is 30 GB (PIL refuses past
179 million pixels with a `DecompressionBombError` traceback), and a 1 x 1 frame reaches OpenCV's resize as an
empty image (an assertion traceback). The file itself is read through `storage.safe_yaml.read_limited` (no
folder, device or pipe, and a size limit), then its header alone gives the dimensions, which must lie between
`MIN_SIDE_PX` and `MAX_SIDE_PX` a side and `MAX_PIXELS` in all, before a pixel is decoded. Every refusal is
one line (`HarnessInputError`) naming the file.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from harness.errors import HarnessInputError
from harness.storage.safe_yaml import read_limited

# An encoded frame larger than this is no camera's: a 50-megapixel PNG at its worst is about 150 MiB.
MAX_IMAGE_BYTES = 256 * 1024 * 1024
# 8K by 6K: a phone's photo of the board, with room; decoded RGB it is 150 MB, not the 30 GB a bomb asks for.
MAX_PIXELS = 50_000_000
MAX_SIDE_PX = 16_384
# The rim search works on a half-size copy, and a bowl a few pixels wide measures nothing: below this a side
# holds no measurement (and OpenCV's resize fails on the empty half).
MIN_SIDE_PX = 32

_UNREADABLE = (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError)


def _opened(path: Path, raw: bytes) -> Image.Image:
    """PIL's image over `raw`, its header read and its dimensions checked; no pixel decoded yet."""
    try:
        image = Image.open(io.BytesIO(raw))
    except Image.DecompressionBombError:
        raise HarnessInputError(path, None, f"its header claims more than {2 * Image.MAX_IMAGE_PIXELS:,} pixels "
                                f"(at most {MAX_PIXELS:,} are read): not a camera frame") from None
    except _UNREADABLE as exc:
        raise HarnessInputError(path, None, f"not a readable image ({type(exc).__name__})") from None
    width, height = image.size
    problem = None
    if min(width, height) < MIN_SIDE_PX:
        problem = f"at least {MIN_SIDE_PX} pixels a side are needed"
    elif max(width, height) > MAX_SIDE_PX or width * height > MAX_PIXELS:
        problem = f"at most {MAX_SIDE_PX:,} pixels a side and {MAX_PIXELS:,} in all are read"
    if problem is not None:
        image.close()
        raise HarnessInputError(path, None, f"{width} x {height} pixels: {problem}")
    return image


def _raw(path: str | Path) -> tuple[Path, bytes]:
    path = Path(path)
    raw = read_limited(path, MAX_IMAGE_BYTES, what="image")
    if not raw:
        raise HarnessInputError(path, None, "empty: not an image")
    return path, raw


def check_image(path: str | Path) -> tuple[int, int]:
    """Refuse a file that is not an image of a usable size, decoding nothing; its (width, height)."""
    path, raw = _raw(path)
    with _opened(path, raw) as image:
        try:
            image.verify()   # the file's structure and checksums, without decoding the pixels
        except _UNREADABLE as exc:
            raise HarnessInputError(path, None, f"not a readable image ({type(exc).__name__})") from None
        width, height = image.size
        return int(width), int(height)


def read_image(path: str | Path, mode: str = "RGB") -> np.ndarray:
    """The image's pixels in `mode` ("RGB", or "L" for grey), its size checked before it is decoded."""
    path, raw = _raw(path)
    with _opened(path, raw) as image:
        try:
            return np.asarray(image.convert(mode))
        except _UNREADABLE as exc:
            raise HarnessInputError(path, None, f"not a readable image ({type(exc).__name__})") from None
