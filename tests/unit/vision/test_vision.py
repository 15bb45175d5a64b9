"""Placement error from pixels: calibration, accuracy against the simulator's truth, failures, scene checks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import harness.sim  # noqa: F401
from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from harness.reports.trials import trial_rows
from harness.sim.scene import SceneGeometry
from harness.vision.calibration import MOVED_PX, camera_shift_px
from harness.vision.measure import DetectionError, Geometry, measure_frame
from harness.vision.rim import find_rim, rim_from_clicks
from harness.vision.scene_check import unexpected_objects
from tests.generators.truth import FOVY_DEG, truth_frames
from tests.helpers import small_protocol_copy

FOCAL = 240 / np.tan(np.radians(FOVY_DEG / 2))


@pytest.fixture(scope="module")
def truth():
    calibration, frames = truth_frames(SceneGeometry(), count=15, seed=11)
    return calibration, list(frames)


def test_automatic_rim_fit_matches_the_rim_and_two_clicks_agree(truth) -> None:
    calibration, _ = truth
    rim = find_rim(calibration)
    assert rim is not None
    # the outer rim edge, 5.75 cm radius, seen from 0.705 m with a 45 deg field of view: 47.0 px
    assert rim.mean_radius_px == pytest.approx(47.0, abs=1.0)
    clicked = rim_from_clicks((rim.cx - rim.a, rim.cy), (rim.cx + rim.a, rim.cy))
    assert (clicked.cx, clicked.cy) == pytest.approx((rim.cx, rim.cy), abs=0.5)
    assert clicked.mean_radius_px == pytest.approx(rim.mean_radius_px, rel=0.01)


@pytest.mark.slow
def test_measured_distance_meets_the_targets_against_the_truth(truth) -> None:
    calibration, frames = truth
    rim = find_rim(calibration)
    errors, agree = [], []
    for t in frames:   # clean renders: every one is measured (a DetectionError fails the test)
        result = measure_frame(t.frame, rim, Geometry(focal_px=FOCAL))
        errors.append(abs(result.distance_cm - t.distance_cm))
        agree.append(result.inside == t.inside)
    assert len(errors) == len(frames) == 15
    assert np.mean(errors) < 0.3 and np.percentile(errors, 95) < 0.6
    assert np.mean(agree) >= 0.99
    assert {t.where for t in frames} == {"inside", "rim", "outside"}


def test_a_frame_without_a_cube_fails_clearly(truth) -> None:
    calibration, _ = truth
    rim = find_rim(calibration)
    empty = calibration.copy()
    r, g, b = (empty[:, :, i].astype(int) for i in range(3))
    empty[(r > g + 40) & (r > b + 40)] = (150, 120, 90)  # paint the parked cube over with table colour
    with pytest.raises(DetectionError, match="no cube-coloured blob"):
        measure_frame(empty, rim, Geometry())


def test_camera_moved_is_noticed(truth) -> None:
    calibration, frames = truth
    assert camera_shift_px(calibration, frames[0].frame) < 1.0
    moved = np.roll(calibration, (6, 5), axis=(0, 1))
    assert camera_shift_px(calibration, moved) > MOVED_PX


def test_scene_check_finds_an_added_object(truth) -> None:
    calibration, _ = truth
    frame = calibration.copy()
    frame[300:330, 500:540] = (40, 160, 60)  # a green mug-sized object on the table
    found = unexpected_objects(frame, [calibration])
    assert len(found) == 1
    assert found[0].centre == pytest.approx((520, 315), abs=4)
    assert unexpected_objects(calibration, [calibration]) == []


@pytest.mark.parametrize("size", [(320, 240), (640, 480), (1280, 960), (1920, 1440)])
def test_scene_check_sees_the_same_object_and_ignores_the_same_speck_at_any_resolution(truth, size) -> None:
    """One physical object (16 px across at 640x480: a pen cap) is reported and one speck (4 px: dust, a
    noisy pixel run) is not, whatever the camera's resolution: the check's sizes scale with the frame."""
    import cv2

    calibration, _ = truth
    width, height = size
    s = width / 640
    reference = cv2.resize(calibration, (width, height), interpolation=cv2.INTER_AREA)
    frame = reference.copy()
    x, y, side = round(500 * s), round(300 * s), round(16 * s)
    frame[y:y + side, x:x + side] = (40, 160, 60)
    speck_x, speck_y, speck = round(200 * s), round(400 * s), round(4 * s)
    frame[speck_y:speck_y + speck, speck_x:speck_x + speck] = (240, 240, 240)
    found = unexpected_objects(frame, [reference])
    assert len(found) == 1, found
    assert found[0].centre == pytest.approx((x + side // 2, y + side // 2), abs=3 * s + 1)


@pytest.mark.slow
def test_measure_command_records_placement_in_the_scoresheet(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    assert main(["run", str(protocol), "--headless", "--video-fps", "5", "--video-size", "160x120"]) == 0
    capsys.readouterr()
    assert main(["measure", "runs/small-expert", "--bowl-cm", "11.5", "--auto", "--fovy-deg", str(FOVY_DEG),
                 "--calibration", "calibration/bowl_top.yaml"]) == 0
    out = capsys.readouterr().out
    assert "3 measured, 0 not measured" in out
    sheet = load_scoresheet(workdir / "scoresheets" / "small-expert.yaml")
    assert len(sheet.measurements) == 3
    for m in sheet.measurements:
        truth_cm = next(a for a in sheet.attempts if a.trial_index == m.trial_index).placement_error_cm
        assert m.placement_error_cm == pytest.approx(truth_cm, abs=0.3)
        assert m.inside_bowl
        assert 0 < m.uncertainty_cm < 1.0  # from the rim fit, the cube's blob and the camera's tilt
    # the report's placement error is the simulator's truth here, so no pixel uncertainty is attached
    assert all(row.placement_uncertainty_cm is None for row in trial_rows(sheet))
    assert (workdir / "runs/small-expert/trial-001-a1/final_top_measured.png").stat().st_size > 1000
    assert (workdir / "calibration/bowl_top.yaml").is_file() and (workdir / "calibration/bowl_top.png").is_file()


def test_measure_without_calibration_says_how_to_make_one(workdir, capsys) -> None:
    image = workdir / "frame.png"
    from PIL import Image

    Image.fromarray(np.zeros((48, 64, 3), np.uint8)).save(image)
    assert main(["measure", str(image), "--bowl-cm", "11.5"]) == 2
    assert "--auto or --clicks" in capsys.readouterr().err


def test_scene_check_command_marks_the_object_and_exits_1(truth, tmp_path, capsys) -> None:
    from PIL import Image

    calibration, _ = truth
    cluttered = calibration.copy()
    cluttered[60:100, 60:120] = (30, 30, 200)
    Image.fromarray(calibration).save(tmp_path / "empty.png")
    Image.fromarray(cluttered).save(tmp_path / "live.png")
    assert main(["scene-check", str(tmp_path / "live.png"), "--reference", str(tmp_path / "empty.png")]) == 1
    found = re.search(r"unexpected object at x=(\d+) y=(\d+)", capsys.readouterr().out)
    assert found and abs(int(found[1]) - 89) <= 3 and abs(int(found[2]) - 79) <= 3
    assert (tmp_path / "live_scene_check.png").is_file()
    assert main(["scene-check", str(tmp_path / "empty.png"), "--reference", str(tmp_path / "empty.png")]) == 0


def test_pixel_uncertainty_is_kept_in_the_scoresheet_and_stated_in_the_report(workdir) -> None:
    from harness.models.sheet_records import PlacementMeasurement
    from harness.reports.blocks import Para
    from harness.reports.document import run_blocks
    from tests.helpers import fake_attempt, locked_sheet

    sheet = locked_sheet(workdir)
    for trial in (1, 2, 3):  # a real-arm run: no simulator truth, so placement comes from pixels
        sheet.add_attempt(fake_attempt(trial, 1, "success"))
    common = {"attempt": 1, "inside_bowl": True, "method": "pixels (auto rim calibration)", "image": "x.png",
              "measured_at": "2026-11-30T10:00:08.000+00:00"}
    sheet.add_measurements([
        PlacementMeasurement(trial_index=1, placement_error_cm=1.2, uncertainty_cm=0.31, **common),
        PlacementMeasurement(trial_index=2, placement_error_cm=2.0, uncertainty_cm=0.52, **common),
        PlacementMeasurement(trial_index=3, placement_error_cm=0.8, **common),  # made before uncertainties existed
    ])
    reloaded = load_scoresheet(sheet.path)  # the hash chain verifies, with and without the new field
    assert [m.uncertainty_cm for m in reloaded.measurements] == [0.31, 0.52, None]
    assert [row.placement_uncertainty_cm for row in trial_rows(reloaded)] == [0.31, 0.52, None]
    text = " ".join(b.text for b in run_blocks(reloaded) if isinstance(b, Para))
    assert "2 of these were measured from the top camera's pixels with a 95% interval of +/- 0.31 to 0.52 cm" in text
