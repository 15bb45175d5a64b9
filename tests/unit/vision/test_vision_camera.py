"""Lens calibration: OpenCV's calibration on rendered boards with known distortion, undistortion that
straightens lines, the calibrate-camera command, and measure using (or missing) the lens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import harness.sim  # noqa: F401
from harness.cli import main
from harness.sim.scene import SceneGeometry
from harness.vision.camera import Board, BoardKind, CameraIntrinsics, calibrate, find_board, load_intrinsics
from tests.generators.stress_set import board_images, camera_matrix, distort
from tests.generators.truth import truth_frames

LENS = np.array([-0.28, 0.09, 0.0, 0.0, 0.0])   # a strong USB-webcam barrel distortion
MATRIX = camera_matrix(50.0)


def _worst_line_deviation_px(image: np.ndarray, board: Board) -> float:
    """Largest distance of a board corner from the straight line through its row or column."""
    view = find_board(image, board)
    assert view is not None
    cols, rows = board.inner_corners
    grid = view.image_points.reshape(rows, cols, 2).astype(float)
    worst = 0.0
    for line in [*grid, *grid.transpose(1, 0, 2)]:
        centre = line.mean(axis=0)
        _, _, vt = np.linalg.svd(line - centre)
        worst = max(worst, float(np.max(np.abs((line - centre) @ vt[1]))))
    return worst


@pytest.fixture(scope="module")
def checkerboard_views() -> tuple[Board, list[np.ndarray]]:
    board = Board(BoardKind.CHECKERBOARD)
    return board, board_images(board.image(80, 40), 80, board.square_mm, MATRIX, LENS, count=10, seed=4)


@pytest.mark.slow
def test_calibration_recovers_the_lens_and_undistortion_straightens_lines(checkerboard_views) -> None:
    board, views = checkerboard_views
    result = calibrate([(f"view{i}", v) for i, v in enumerate(views[:9])], board)
    cam = result.intrinsics
    assert cam.rms_px < 0.3
    assert cam.fovy_deg == pytest.approx(50.0, abs=0.3)
    assert (cam.cx, cam.cy) == pytest.approx((320, 240), abs=3)
    held_out = views[9]  # not used for the calibration
    assert _worst_line_deviation_px(held_out, board) > 2.0  # the lens visibly bends the board's lines
    assert _worst_line_deviation_px(cam.undistort(held_out), board) < 0.5


@pytest.mark.slow
def test_charuco_board_calibrates_as_well() -> None:
    board = Board(BoardKind.CHARUCO)
    views = board_images(board.image(80, 40), 80, board.square_mm, MATRIX, LENS, count=8, seed=5)
    cam = calibrate([(f"view{i}", v) for i, v in enumerate(views)], board).intrinsics
    assert cam.fy == pytest.approx(MATRIX[1, 1], rel=0.01)
    assert cam.distortion[0] == pytest.approx(LENS[0], abs=0.03)


@pytest.mark.slow
def test_calibrate_camera_command_saves_beside_the_rim_calibration(workdir, checkerboard_views, capsys) -> None:
    _, views = checkerboard_views
    for i, view in enumerate(views):
        Image.fromarray(view).save(workdir / f"shot{i:02d}.png")
    Image.fromarray(np.full((480, 640), 128, np.uint8)).save(workdir / "blank.png")
    assert main(["calibrate-camera", "shot*.png", "blank.png", "--squares", "10x7", "--square-mm", "25"]) == 0
    out = capsys.readouterr().out
    assert "board found in 10 of 11 images (not in: blank.png)" in out
    assert "reprojection error (RMS)" in out
    saved = load_intrinsics(workdir / "calibration" / "camera_top.yaml")
    assert saved.fovy_deg == pytest.approx(50.0, abs=0.3) and saved.views == 10


def test_calibrate_camera_refuses_bad_input_with_one_line(workdir, capsys) -> None:
    assert main(["calibrate-camera", "x.png", "--squares", "10by7"]) == 2
    assert "--squares: '10by7' is not COLUMNSxROWS" in capsys.readouterr().err
    Image.fromarray(np.full((48, 64), 128, np.uint8)).save(workdir / "grey.png")
    assert main(["calibrate-camera", "grey.png"]) == 2
    assert "the board was found in 0 image(s), 3 or more are needed" in capsys.readouterr().err
    assert not (workdir / "calibration").exists()


@pytest.mark.slow
def test_measure_undistorts_with_the_saved_lens_and_prints_json(workdir, capsys) -> None:
    # seed 4: its three cubes come to rest in full view (with seed 3 the one dropped on the rim now bounces under
    # the gripper's jaw, and a cube 22 % in view is refused, rightly: test_vision_self_check)
    calibration, frames = truth_frames(SceneGeometry(), count=3, seed=4)
    frames = list(frames)
    lens, matrix = np.array([-0.3, 0.1, 0, 0, 0]), camera_matrix(45.0)
    Image.fromarray(distort(calibration, matrix, lens)).save(workdir / "empty.png")
    names = []
    for i, t in enumerate(frames):
        names.append(f"frame{i}.png")
        Image.fromarray(distort(t.frame, matrix, lens)).save(workdir / names[-1])
    CameraIntrinsics(640, 480, matrix[0, 0], matrix[1, 1], 320, 240, tuple(lens)).save(
        Path("calibration/camera_top.yaml"))
    assert main(["measure", *names, "--bowl-cm", "11.5", "--auto", "--calibrate-on", "empty.png", "--json"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["image"] for r in records] == names
    for record, t in zip(records, frames, strict=True):
        assert record["measured"] and record["reasons"] == [] and record["caveats"] == []
        assert record["distance_cm"] == pytest.approx(t.distance_cm, abs=0.3)
        assert record["inside"] == t.inside
        assert 0 < record["uncertainty_cm"] < 1.0
    assert "3 measured, 0 not measured" in captured.err

    Path("calibration/camera_top.yaml").unlink()
    assert main(["measure", names[0], "--bowl-cm", "11.5", "--auto", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["caveats"] == ["lens_distortion_uncorrected", "no_height_correction"]
    assert "lens distortion is uncorrected" in captured.err


def test_measure_with_a_missing_camera_file_exits_2(workdir, capsys) -> None:
    Image.fromarray(np.zeros((48, 64, 3), np.uint8)).save(workdir / "f.png")
    assert main(["measure", "f.png", "--bowl-cm", "11.5", "--auto", "--camera", "nope.yaml"]) == 2
    assert "nope.yaml: --camera: no such camera calibration" in capsys.readouterr().err
