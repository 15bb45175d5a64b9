"""The saved rim calibration, and the check that the camera has not moved since it was made."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml
from PIL import Image

from harness.errors import HarnessInputError
from harness.storage.atomic import write_bytes_atomic, write_text_atomic
from harness.vision.rim import Rim

MOVED_PX = 3.0


@dataclass(frozen=True)
class BowlCalibration:
    rim: Rim
    bowl_cm: float
    method: str            # clicks or auto
    frame: str             # the frame it was made on, saved beside it
    frame_sha256: str

    def save(self, path: Path, frame: np.ndarray) -> None:
        """The frame (PNG) and the calibration (YAML) beside it, each replaced atomically; if either cannot
        be written (a full disk), neither is left, nor the folder made for them."""
        import io

        frame_path = path.with_suffix(".png")
        made = []
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            made.append(folder)
            folder = folder.parent
        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, format="PNG")
        png = buffer.getvalue()
        data = {"bowl_cm": self.bowl_cm, "method": self.method, "frame": frame_path.name,
                "frame_sha256": hashlib.sha256(png).hexdigest(), "rim": asdict(self.rim)}
        had_frame = frame_path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(frame_path, png)
            write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))
        except (OSError, HarnessInputError) as exc:
            if not had_frame:
                frame_path.unlink(missing_ok=True)
            for created in made:
                with contextlib.suppress(OSError):
                    created.rmdir()
            if isinstance(exc, HarnessInputError):
                raise
            raise HarnessInputError(path.parent, None, f"cannot write: {exc.strerror or exc}") from None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(repr(asdict(self)).encode()).hexdigest()[:16]


def load_calibration(path: Path) -> tuple[BowlCalibration, np.ndarray]:
    if not path.is_file():
        raise HarnessInputError(path, None, "no bowl calibration yet: run with --auto or --clicks \"x1,y1 x2,y2\"")
    data = yaml.safe_load(path.read_text())
    try:
        rim = Rim(**{k: float(v) for k, v in data["rim"].items()})
        frame_path = path.parent / data["frame"]
        frame = np.asarray(Image.open(frame_path).convert("RGB"))
        return BowlCalibration(rim, float(data["bowl_cm"]), data["method"], str(frame_path),
                               data["frame_sha256"]), frame
    except (KeyError, TypeError, OSError) as exc:
        raise HarnessInputError(path, None, f"not a bowl calibration ({exc})") from None


def rim_at_size(calibration: BowlCalibration, reference: np.ndarray, size: tuple[int, int],
                where: Path | str) -> tuple[Rim, bool]:
    """The calibration's rim in the pixels of a frame `size` (width, height), and whether it was rescaled.

    A calibration holds for the resolution it was made at. The same camera at another resolution of
    the same aspect sees the same view, so the rim is rescaled (the caller says so); at another
    aspect the camera crops the view differently and the rim cannot be carried over: refused, one
    line naming the calibration (`where`) and both sizes."""
    height, width = reference.shape[:2]
    if (width, height) == tuple(size):
        return calibration.rim, False
    if abs(size[0] / size[1] - width / height) > 0.01:
        raise HarnessInputError(where, None, f"the bowl calibration was made on {width}x{height} frames; these are "
                                f"{size[0]}x{size[1]} (another aspect: the view is cropped differently). "
                                "Re-calibrate at this size (harness measure --auto, or --clicks)")
    k = size[0] / width
    rim = calibration.rim
    return Rim((rim.cx + 0.5) * k - 0.5, (rim.cy + 0.5) * k - 0.5, rim.a * k, rim.b * k, rim.angle_deg), True


def camera_shift_px(reference: np.ndarray, frame: np.ndarray) -> float:
    """How far the static scene has moved between two frames (phase correlation, in pixels)."""
    a = cv2.cvtColor(reference, cv2.COLOR_RGB2GRAY).astype(np.float32)
    b = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32)
    if a.shape != b.shape:
        b = cv2.resize(b, (a.shape[1], a.shape[0]))
    window = cv2.createHanningWindow(a.shape[::-1], cv2.CV_32F)
    (dx, dy), _ = cv2.phaseCorrelate(a, b, window)
    return float(np.hypot(dx, dy))
