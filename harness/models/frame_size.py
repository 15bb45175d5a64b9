"""`WIDTHxHEIGHT`: a frame size as every flag and setting spells it (`640x480`, `sim@320x240`), parsed here once.

Each caller keeps its own limits (an evidence video's sizes must be even, a camera's fit its driver) and names
its own flag in the error; what a size looks like is decided only here.
"""

from __future__ import annotations

import re

SIZE_PATTERN = re.compile(r"(\d+)[xX](\d+)")


def parse_size(text: object, example: str | None = None) -> tuple[int, int]:
    """'640x480' (or 640X480) -> (640, 480); ValueError "'TEXT' is not WIDTHxHEIGHT" otherwise (with `example`
    after it where the caller gives one, as its flag's help does)."""
    match = SIZE_PATTERN.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"'{text}' is not WIDTHxHEIGHT" + (f" (e.g. {example})" if example else ""))
    return int(match.group(1)), int(match.group(2))


def size_text(size: tuple[int, int]) -> str:
    """(640, 480) -> '640x480': the spelling `parse_size` reads back."""
    return f"{size[0]}x{size[1]}"
