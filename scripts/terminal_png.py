"""Draw a terminal capture with its colours (`tmux capture-pane -e -p > screen.ansi`) as a PNG.

    python scripts/terminal_png.py screen.ansi docs/images/tui_mid_trial.png

How the README's picture of the operator TUI mid-trial was made: the TUI ran in tmux (110x34), the pane
was captured with its escape codes, and each cell is drawn here in DejaVu Sans Mono with its colours.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from rich.color import Color
from rich.console import Console
from rich.text import Text

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BACKGROUND, FOREGROUND = (18, 18, 18), (220, 220, 220)


def _rgb(color: Color | None, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if color is None or color.is_default:
        return default
    triplet = color.get_truecolor()
    return (triplet.red, triplet.green, triplet.blue)


def render(ansi: str, size: int = 15) -> Image.Image:
    lines = [Text.from_ansi(line) for line in ansi.rstrip("\n").split("\n")]
    # blank rows between the screen's content and its footer (the key bar) are left out
    last = max(i for i, line in enumerate(lines[:-1]) if line.plain.strip()) if len(lines) > 1 else 0
    lines = [*lines[:last + 2], lines[-1]] if len(lines) > last + 2 else lines
    font = ImageFont.truetype(FONT, size)
    cell_w, cell_h = round(font.getlength("M")), int(size * 1.25)
    columns = max(len(line.plain) for line in lines)
    image = Image.new("RGB", (columns * cell_w + 16, len(lines) * cell_h + 16), BACKGROUND)
    draw = ImageDraw.Draw(image)
    console = Console()
    for row, line in enumerate(lines):
        for column, char in enumerate(line.plain):
            style = line.get_style_at_offset(console, column)
            fg, bg = _rgb(style.color, FOREGROUND), _rgb(style.bgcolor, BACKGROUND)
            if style.reverse:
                fg, bg = bg, fg
            x, y = 8 + column * cell_w, 8 + row * cell_h
            draw.rectangle([x, y, x + cell_w - 1, y + cell_h - 1], fill=bg)
            if char == "▀":   # the half block the TUI draws camera frames with: upper half fg, lower bg
                draw.rectangle([x, y, x + cell_w - 1, y + cell_h // 2 - 1], fill=fg)
            elif char == "▄":
                draw.rectangle([x, y + cell_h // 2, x + cell_w - 1, y + cell_h - 1], fill=fg)
            elif char == "█":
                draw.rectangle([x, y, x + cell_w - 1, y + cell_h - 1], fill=fg)
            elif not char.isspace():
                draw.text((x, y), char, font=font, fill=fg)
    return image


if __name__ == "__main__":
    render(Path(sys.argv[1]).read_text()).save(sys.argv[2], optimize=True)
