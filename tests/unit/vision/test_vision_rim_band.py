"""The automatic rim takes the rim's outer edge when only one edge of its lip shows.

Drawn top views of a bowl (table, lip, wall, floor) in the project's proportions: a 0.6 cm lip on
an 11.5 cm rim, the floor's edge at 60 % of the rim's size as seen. A lip the colour of the table
(white on white, a glossy lip catching the light) shows only its inner edge; a lip the colour of
the wall (dark on dark) shows only its outer edge; a hard shadow beside the bowl adds an edge
outside it. In every case the rim found must be the outer edge, not 10 % inside or outside it.
"""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from PIL import Image

from harness.cli import main
from harness.vision.rim import BowlShape, fit_rim

SCALE = 8  # drawn at 8x and averaged down: edges with sub-pixel positions, as a camera sees them
DRAWN = (2579, 1894)  # the bowl's centre in the drawing
CENTRE = tuple((v + 0.5) / SCALE - 0.5 for v in DRAWN)  # where INTER_AREA puts it in the frame
RADIUS = 46.0


def _bowl(table: int, lip: int, wall: int, floor: int, shadow: int | None = None, seed: int = 0) -> np.ndarray:
    shape = BowlShape()
    image = np.full((480 * SCALE, 640 * SCALE, 3), table, np.uint8)

    def disc(radius: float, value: int, at: tuple[int, int] = DRAWN) -> None:
        cv2.circle(image, at, round(radius * SCALE), (value, value, value), -1)

    if shadow is not None:  # the bowl's own shadow, cast to one side by a low light
        disc(RADIUS * 1.02, shadow, (DRAWN[0] + 9 * SCALE, DRAWN[1] + 6 * SCALE))
    disc(RADIUS, lip)
    disc(RADIUS * shape.inner_ratio, wall)
    disc(RADIUS * shape.floor_ratio, floor)
    small = cv2.resize(image, (640, 480), interpolation=cv2.INTER_AREA).astype(np.float32)
    small += np.random.default_rng(seed).normal(0, 2.0, small.shape).astype(np.float32)
    return np.clip(cv2.GaussianBlur(small, (0, 0), 1.0), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(("name", "table", "lip", "wall", "floor", "shadow"), [
    ("lip the colour of the table: only the inner edge shows", 205, 205, 120, 185, None),
    ("lip the colour of the wall: only the outer edge shows", 70, 40, 40, 60, None),
    ("both edges show", 150, 200, 90, 170, None),
    ("a hard shadow beside a lip the colour of the table", 205, 205, 120, 185, 150),
])
def test_the_rim_found_is_the_outer_edge(name: str, table: int, lip: int, wall: int, floor: int,
                                         shadow: int | None) -> None:
    fit = fit_rim(_bowl(table, lip, wall, floor, shadow))
    assert fit.rim.mean_radius_px == pytest.approx(RADIUS, rel=0.02), name
    assert np.hypot(fit.rim.cx - CENTRE[0], fit.rim.cy - CENTRE[1]) < 0.5, name


def test_the_rims_width_decides_which_edge_a_lone_one_is() -> None:
    """Told the bowl has no visible floor and no lip to speak of, a lone edge is the outer one."""
    frame = _bowl(205, 205, 120, 185)
    fit = fit_rim(frame, shape=BowlShape(rim_width_frac=0.02, floor_frac=0.0))
    assert fit.rim.mean_radius_px == pytest.approx(RADIUS * BowlShape().inner_ratio, rel=0.02)


@pytest.mark.parametrize("flags", [["--rim-width-cm", "4"], ["--rim-width-cm", "nan"], ["--floor-cm", "12"]])
def test_a_bowl_shape_that_cannot_be_is_refused_in_one_line_before_anything_is_written(workdir, capsys,
                                                                                       flags: list[str]) -> None:
    image = workdir / "frame.png"
    Image.fromarray(_bowl(205, 205, 120, 185)).save(image)
    assert main(["measure", str(image), "--bowl-cm", "11.5", "--auto", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flags[0] in err
    assert not (workdir / "calibration").exists() and not (workdir / "frame_measured.png").exists()


def test_measure_auto_takes_the_outer_edge_of_a_lip_the_colour_of_the_table(workdir, capsys) -> None:
    image = workdir / "frame.png"
    Image.fromarray(_bowl(205, 205, 120, 185)).save(image)
    assert main(["measure", str(image), "--bowl-cm", "11.5", "--auto", "--json"]) == 1  # no cube in view
    record = json.loads(capsys.readouterr().out)
    assert record["reasons"] == ["cube_not_found"]
    assert (record["rim_px"]["a"] + record["rim_px"]["b"]) / 2 == pytest.approx(RADIUS, rel=0.02)
