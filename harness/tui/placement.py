"""The run screen while the operator places the cube: the live top camera with the target's footprint drawn
where the protocol wants the cube, and the guide's reading (distance and yaw from the target) beside it.

The numbers are the placement guide's (`harness.run.placement_guide`); this module only draws them. The
camera is drawn with half blocks (two pixel rows per character cell), cropped around the target so a 3 cm
cube spans about ten cells; when something unexpected is in view the whole frame is shown instead, with
the objects boxed, because they may lie anywhere on the table.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw
from rich.color import Color
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from harness.tui.state import LivePlacement, RunState

CROP_CUBE_EDGES = 5.5      # the cropped view spans this many cube edges across (about 16 cm of table)
WITHIN, OFF, UNSEEN, OBJECT = (60, 230, 60), (250, 200, 30), (250, 200, 30), (240, 40, 40)


class HalfBlocks:
    """An RGB image (2 * rows, cols, 3) as a Rich renderable: one '▀' per cell, the upper pixel as the
    foreground and the lower as the background. Segments are built directly (no style strings to parse)."""

    def __init__(self, pixels: np.ndarray) -> None:
        self.pixels = pixels

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = self.pixels.shape[0] // 2
        colours: dict[tuple[int, int, int], Color] = {}

        def colour(p: np.ndarray) -> Color:
            key = (int(p[0]), int(p[1]), int(p[2]))
            found = colours.get(key)
            if found is None:
                found = colours[key] = Color.from_rgb(*key)
            return found

        for row in range(rows):
            top, bottom = self.pixels[2 * row], self.pixels[2 * row + 1]
            for upper, lower in zip(top, bottom, strict=True):
                yield Segment("▀", Style(color=colour(upper), bgcolor=colour(lower)))
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self.pixels.shape[1], self.pixels.shape[1])


def _crop_box(live: LivePlacement, aspect: float) -> tuple[int, int, int, int]:
    """The part of the frame to show (x0, y0, x1, y1): around the target, or all of it when objects are flagged."""
    height, width = live.frame.shape[:2]
    corners = live.reading.target_corners_px if live.reading is not None else ()
    if live.objects or not corners:
        return 0, 0, width, height
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    edge = float(np.hypot(corners[1][0] - corners[0][0], corners[1][1] - corners[0][1]))
    crop_w = min(width, max(32, round(CROP_CUBE_EDGES * edge)))
    crop_h = min(height, max(16, round(crop_w * aspect)))
    cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    x0 = int(min(max(0, round(cx - crop_w / 2)), width - crop_w))
    y0 = int(min(max(0, round(cy - crop_h / 2)), height - crop_h))
    return x0, y0, x0 + crop_w, y0 + crop_h


def camera_pixels(live: LivePlacement, cols: int, rows: int) -> np.ndarray:
    """The frame, cropped and scaled to `cols` x `2 * rows` pixels, with the target footprint (green when the
    cube is within tolerance, amber otherwise) and any unexpected objects (red boxes) drawn at that size, so
    lines stay one pixel wide and visible."""
    x0, y0, x1, y1 = _crop_box(live, 2 * rows / cols)
    image = Image.fromarray(np.ascontiguousarray(live.frame[y0:y1, x0:x1])).resize((cols, 2 * rows),
                                                                                 Image.Resampling.BOX)
    sx, sy = cols / (x1 - x0), 2 * rows / (y1 - y0)
    draw = ImageDraw.Draw(image)
    reading = live.reading
    if reading is not None and reading.target_corners_px:
        colour = WITHIN if reading.within else OFF if reading.error_cm is not None else UNSEEN
        points = [((x - x0) * sx, (y - y0) * sy) for x, y in reading.target_corners_px]
        draw.polygon(points, outline=colour)
    for u in live.objects:
        draw.rectangle([(u.x - x0) * sx, (u.y - y0) * sy, (u.x + u.width - x0) * sx, (u.y + u.height - y0) * sy],
                       outline=OBJECT)
    return np.asarray(image)


def guide_text(live: LivePlacement) -> Text:
    """The reading in words: target, where the cube is, how far off, what to do, and the keys."""
    text = Text()
    reading = live.reading
    if live.objects:
        text.append("Something unexpected is in view\n", style="bold red")
        where = ", ".join(f"{u.area_px} px at ({u.centre[0]}, {u.centre[1]})" for u in live.objects[:3])
        text.append(f"{where} (boxed in red): no demonstration shows it.\n", style="red")
        text.append("Remove it, or press ", style="red")
        text.append(" n ", style="bold reverse")
        text.append(" to accept it with a note.\n\n", style="red")
    if reading is None:
        return text
    tx, ty = reading.target_dxy_cm
    text.append("Place the cube on the outline\n", style="bold")
    text.append("target ", style="dim")
    text.append(f"dx {tx:+5.1f}  dy {ty:+5.1f} cm  yaw {reading.target_yaw_deg:+4.0f} deg\n")
    if reading.error_cm is None or reading.measured_dxy_cm is None:
        what = reading.not_measured.value.replace("_", " ") if reading.not_measured else "not measured"
        text.append("cube   ", style="dim")
        text.append(f"not measured ({what})\n", style="bold yellow")
        text.append(f"{reading.detail}\n", style="dim")
    else:
        mx, my = reading.measured_dxy_cm
        text.append("cube   ", style="dim")
        text.append(f"dx {mx:+5.1f}  dy {my:+5.1f} cm  yaw {reading.measured_yaw_deg or 0:+4.0f} deg\n")
        style = "bold green" if reading.within else "bold yellow"
        text.append("\n")
        text.append(f"{reading.error_cm:.1f} cm", style=style)
        text.append(f" (+/- {reading.uncertainty_cm or 0:.1f})", style="dim")
        text.append(f" and {reading.yaw_error_deg or 0:.0f} deg", style=style)
        text.append(" from the target\n")
        if reading.within:
            text.append("Within tolerance: the trial starts when it holds still.\n", style="bold green")
        else:
            text.append(f"{reading.correction() or 'move it'}\n", style="yellow")
    tol = reading.tolerance
    text.append(f"starts within {tol.cm:g} cm and {tol.deg:g} deg\n\n", style="dim")
    text.append(" o ", style="bold reverse")
    text.append(" start anyway (type a reason)")
    return text


class LiveCamera(Static):
    """The top camera as the guide saw it last, with the target footprint."""

    def show(self, s: RunState) -> None:
        live = s.placement
        if live is None:
            self.update("")
            return
        cols = max(16, self.content_size.width or 56)
        rows = max(6, (self.content_size.height or 20) - 1)
        caption = "top camera: whole frame" if live.objects else "top camera, around the target"
        image = Group(Text(caption, style="dim"), HalfBlocks(camera_pixels(live, cols, rows)))
        self.update(image, layout=False)   # the size is the layout's, not the frame's: no new layout per frame


class PlacementPanel(Static):
    """Where the cube is against its target, updated with every frame the guide measures."""

    def show(self, s: RunState) -> None:
        self.update(guide_text(s.placement) if s.placement is not None else "", layout=False)   # fixed size


def placement_active(s: RunState) -> bool:
    """Whether the run screen shows the placement view (a guided placement is in progress)."""
    return s.placement is not None


__all__ = ["HalfBlocks", "LiveCamera", "PlacementPanel", "camera_pixels", "guide_text", "placement_active"]
