"""The top camera's lens: intrinsics and distortion from a printed board (OpenCV's calibration).

USB webcams bend straight lines: barrel distortion of several pixels near the edges changes the
centimetres per pixel across the table. `harness calibrate-camera` finds the focal length, the
principal point and the distortion from views of a checkerboard (or a ChArUco board, whose
corners are identified even when part of it is out of view); `harness measure` then undistorts
every frame before it looks for the rim, and takes the field of view from the focal length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import cv2
import numpy as np
import yaml

from harness.errors import HarnessInputError
from harness.storage.atomic import write_text_atomic

CAMERA_FILE = "camera_top.yaml"


class BoardKind(StrEnum):
    CHECKERBOARD = "checkerboard"
    CHARUCO = "charuco"


@dataclass(frozen=True)
class Board:
    """A printed calibration target. `columns` x `rows` count squares, not inner corners."""

    kind: BoardKind = BoardKind.CHECKERBOARD
    columns: int = 10
    rows: int = 7
    square_mm: float = 25.0
    marker_mm: float = 18.0              # ChArUco only
    dictionary: str = "DICT_4X4_50"      # ChArUco only

    @property
    def inner_corners(self) -> tuple[int, int]:
        return self.columns - 1, self.rows - 1

    def object_points(self) -> np.ndarray:
        """Inner-corner positions on the board (mm, z = 0), row by row as OpenCV reports them."""
        cols, rows = self.inner_corners
        grid = np.zeros((rows * cols, 3), np.float32)
        grid[:, :2] = np.mgrid[0:cols, 0:rows].T.reshape(-1, 2) * self.square_mm
        return grid

    def charuco(self) -> cv2.aruco.CharucoBoard:
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard((self.columns, self.rows), self.square_mm, self.marker_mm, dictionary)

    def image(self, px_per_square: int = 80, margin_px: int = 40) -> np.ndarray:
        """The board to print (grey, white margin): print it at 100 % and measure a square."""
        size = (self.columns * px_per_square + 2 * margin_px, self.rows * px_per_square + 2 * margin_px)
        if self.kind is BoardKind.CHARUCO:
            return self.charuco().generateImage(size, marginSize=margin_px)
        out = np.full((size[1], size[0]), 255, np.uint8)
        for r in range(self.rows):
            for c in range(self.columns):
                if (r + c) % 2 == 0:
                    y, x = margin_px + r * px_per_square, margin_px + c * px_per_square
                    out[y:y + px_per_square, x:x + px_per_square] = 0
        return out


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole intrinsics and OpenCV distortion (k1, k2, p1, p2, k3) at one image size."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
    rms_px: float | None = None          # reprojection error of the calibration, when it was measured
    views: int = 0
    board: str = ""
    _maps: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, compare=False,
                                                                       repr=False)

    @property
    def matrix(self) -> np.ndarray:
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1]], float)

    @property
    def coefficients(self) -> np.ndarray:
        return np.asarray(self.distortion, float)

    @property
    def fovy_deg(self) -> float:
        return math.degrees(2 * math.atan(self.height / 2 / self.fy))

    def at_size(self, width: int, height: int) -> CameraIntrinsics:
        """The same lens at another resolution of the same aspect (the focal length scales with it)."""
        if (width, height) == (self.width, self.height):
            return self
        if abs(width * self.height - height * self.width) > max(width, height):
            raise HarnessInputError(None, "camera", f"calibrated at {self.width}x{self.height}; a {width}x{height} "
                                    "frame has another aspect ratio: re-run calibrate-camera at this resolution")
        s = width / self.width
        return CameraIntrinsics(width, height, self.fx * s, self.fy * s, self.cx * s, self.cy * s,
                                self.distortion, self.rms_px, self.views, self.board)

    def undistort(self, frame: np.ndarray) -> np.ndarray:
        """The frame as an ideal pinhole camera with the same matrix would have seen it."""
        cam = self.at_size(frame.shape[1], frame.shape[0])
        key = (frame.shape[1], frame.shape[0])
        maps = self._maps.get(key)
        if maps is None:
            maps = cv2.initUndistortRectifyMap(cam.matrix, cam.coefficients, None, cam.matrix, key, cv2.CV_16SC2)
            self._maps[key] = maps
        return cv2.remap(frame, maps[0], maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

    def save(self, path: Path) -> None:
        data = {"width": int(self.width), "height": int(self.height),
                "camera_matrix": {"fx": float(self.fx), "fy": float(self.fy), "cx": float(self.cx),
                                  "cy": float(self.cy)},
                "distortion": [float(v) for v in self.distortion],
                "rms_reprojection_px": None if self.rms_px is None else float(self.rms_px),
                "views": self.views, "board": self.board, "fovy_deg": round(self.fovy_deg, 3)}
        write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))


def load_intrinsics(path: Path) -> CameraIntrinsics:
    try:
        data = yaml.safe_load(path.read_text())
        m = data["camera_matrix"]
        distortion = tuple(float(v) for v in data["distortion"])
        if len(distortion) not in (4, 5, 8, 12, 14):
            raise ValueError(f"{len(distortion)} distortion coefficients")
        return CameraIntrinsics(int(data["width"]), int(data["height"]), float(m["fx"]), float(m["fy"]),
                                float(m["cx"]), float(m["cy"]), distortion, data.get("rms_reprojection_px"),
                                int(data.get("views", 0)), str(data.get("board", "")))
    except (OSError, yaml.YAMLError) as exc:
        raise HarnessInputError(path, None, f"cannot read the camera calibration ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessInputError(path, None, f"not a camera calibration (field {exc})") from None


@dataclass(frozen=True)
class BoardView:
    """One image's detected corners: image points and the matching board points."""

    image_points: np.ndarray    # (N, 1, 2) float32
    object_points: np.ndarray   # (N, 1, 3) float32


def find_board(gray: np.ndarray, board: Board) -> BoardView | None:
    """The board's corners in one grey image, to sub-pixel accuracy, or None when it is not seen."""
    if board.kind is BoardKind.CHARUCO:
        corners, ids, _, _ = cv2.aruco.CharucoDetector(board.charuco()).detectBoard(gray)
        if ids is None or len(ids) < 6:
            return None
        obj, img = board.charuco().matchImagePoints(corners, ids)
        return BoardView(img.astype(np.float32), obj.astype(np.float32))
    flags = cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE | cv2.CALIB_CB_FAST_CHECK
    found, corners = cv2.findChessboardCorners(gray, board.inner_corners, flags=flags)
    if not found:
        return None
    corners = cv2.cornerSubPix(gray, corners, (5, 5), (-1, -1),
                               (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 40, 0.001))
    return BoardView(corners.astype(np.float32), board.object_points().reshape(-1, 1, 3))


@dataclass(frozen=True)
class CameraCalibration:
    intrinsics: CameraIntrinsics
    rms_px: float            # reprojection error over every view (also in `intrinsics`, where it may be unknown)
    per_view_rms_px: list[float]
    used: list[str]
    skipped: list[str]       # images where the board was not found


def calibrate(images: Sequence[tuple[str, np.ndarray]], board: Board) -> CameraCalibration:
    """OpenCV's calibration from several views of the board (tilted, near the corners of the frame)."""
    views, used, skipped = [], [], []
    size = None
    for name, image in images:
        gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        if size is not None and gray.shape[::-1] != size:
            raise HarnessInputError(name, None, f"is {gray.shape[1]}x{gray.shape[0]}, the others {size[0]}x{size[1]}")
        size = gray.shape[::-1]
        view = find_board(gray, board)
        if view is None:
            skipped.append(name)
        else:
            views.append(view)
            used.append(name)
    if size is None or len(views) < 3:
        raise HarnessInputError(None, "IMAGES", f"the board was found in {len(views)} image(s), 3 or more are needed "
                                f"(board {board.kind.value} {board.columns}x{board.rows} squares: check --squares)")
    rms, matrix, dist, rvecs, tvecs = cv2.calibrateCamera(
        [v.object_points for v in views], [v.image_points for v in views], size, None, None)
    per_view = []
    for view, rvec, tvec in zip(views, rvecs, tvecs, strict=True):
        projected, _ = cv2.projectPoints(view.object_points, rvec, tvec, matrix, dist)
        per_view.append(float(np.sqrt(np.mean(np.sum((projected - view.image_points) ** 2, axis=2)))))
    label = f"{board.kind.value} {board.columns}x{board.rows} squares of {board.square_mm:g} mm"
    intrinsics = CameraIntrinsics(size[0], size[1], float(matrix[0, 0]), float(matrix[1, 1]), float(matrix[0, 2]),
                                  float(matrix[1, 2]), tuple(float(v) for v in dist.ravel()), float(rms),
                                  len(views), label)
    return CameraCalibration(intrinsics, float(rms), per_view, used, skipped)
