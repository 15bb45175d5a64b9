"""`harness measure`: calibrate on the rim, measure each trial's final top frame, record the results.

With a camera calibration beside the rim's (`harness calibrate-camera`), every frame is undistorted
first and the focal length comes from it; `--json` prints one record per image on stdout (distance,
inside, uncertainty, reasons) and the human lines on stderr.

Every flag and input image is checked, and each scoresheet involved is locked (one writer: a
measure during a live run is refused, naming the run) and loaded once, before anything is
written; the measurements then go into each sheet with one append, and the annotated images are
written fast (PNG compression level 1: 4x quicker than the default, a few % larger).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from harness.errors import HarnessInputError
from harness.models.measure_request import MeasureRequest
from harness.models.scoresheet import Scoresheet, load_scoresheet, now_iso
from harness.models.sheet_records import PlacementMeasurement
from harness.storage.atomic import check_output_path, write_bytes_atomic
from harness.storage.lock import WriterLock
from harness.vision.calibration import MOVED_PX, BowlCalibration, camera_shift_px, load_calibration, rim_at_size
from harness.vision.camera import CAMERA_FILE, CameraIntrinsics, load_intrinsics
from harness.vision.image_file import check_image, read_image
from harness.vision.measure import DetectionError, Geometry, annotate, bowl_shape, measure_image
from harness.vision.reasons import Caveat
from harness.vision.rim import fit_rim, rim_from_clicks

TRIAL_FOLDER = re.compile(r"trial-(\d+)-a(\d+)$")
# an image to measure: (image, (trial, attempt) or None, scoresheet or None)
Frame = tuple[Path, tuple[int, int] | None, Path | None]


def _frames(inputs: list[str]) -> list[Frame]:
    """Each image of the run folders and image files given."""
    found: list[Frame] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            sheet = Path("scoresheets") / f"{path.name}.yaml"
            for trial in sorted(path.glob("trial-*")):
                match = TRIAL_FOLDER.search(trial.name)
                if match and (trial / "final_top.png").is_file():
                    found.append((trial / "final_top.png", (int(match[1]), int(match[2])),
                                  sheet if sheet.is_file() else None))
        elif path.is_file():
            found.append((path, None, None))
        else:
            raise HarnessInputError(path, None, "neither a run folder nor an image")
    if not found:
        raise HarnessInputError(None, "RUN_OR_IMAGES", "no final top frames found (runs/<name>/trial-*/final_top.png)")
    for image, _, _ in found:
        _check_image(image)
        check_output_path(_annotated_path(image))
    return found


def _check_image(path: Path) -> None:
    """Refuse a file that is not an image of a usable size before anything is written (nothing decoded here)."""
    check_image(path)


def _read_rgb(path: Path) -> np.ndarray:
    return read_image(path, "RGB")


def _annotated_path(image_path: Path) -> Path:
    return image_path.with_name(image_path.stem + "_measured.png")


def _save_png(path: Path, frame: np.ndarray) -> None:
    """Level-1 PNG through a temporary name: fast, and never a half-written image."""
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG", compress_level=1)
    write_bytes_atomic(path, buffer.getvalue(), durable=False)


def _check_flags(args: MeasureRequest) -> None:
    for flag, value, low, high in (("--bowl-cm", args.bowl_cm, 1.0, 100.0), ("--cube-cm", args.cube_cm, 0.5, 50.0),
                                   ("--bowl-height-cm", args.bowl_height_cm, 0.0, 50.0),
                                   ("--rim-width-cm", args.rim_width_cm, 0.05, 0.3 * args.bowl_cm),
                                   ("--floor-cm", args.floor_cm, 0.0, args.bowl_cm)):
        if not (math.isfinite(value) and low <= value <= high):
            raise HarnessInputError(None, flag, f"{value}: must be within {low:g}..{high:g} cm")
    if args.fovy_deg is not None and not (math.isfinite(args.fovy_deg) and 1.0 <= args.fovy_deg <= 170.0):
        raise HarnessInputError(None, "--fovy-deg", f"{args.fovy_deg}: must be within 1..170 degrees")
    if not (math.isfinite(args.max_uncertainty_cm) and args.max_uncertainty_cm > 0):
        raise HarnessInputError(None, "--max-uncertainty-cm", f"{args.max_uncertainty_cm}: must be above 0")


def _lock_and_load(paths: set[Path]) -> tuple[dict[Path, Scoresheet], list[WriterLock]]:
    """Each sheet this command writes: locked against other writers first, then loaded once."""
    sheets, locks = {}, []
    try:
        for path in sorted(paths):
            locks.append(WriterLock(path, "harness measure").acquire())
            sheets[path] = load_scoresheet(path)
            sheets[path].hold_writer_lock(locks[-1])
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return sheets, locks


def _clicks(text: str) -> tuple[tuple[float, float], tuple[float, float]]:
    try:
        a, b = (tuple(float(v) for v in point.split(",")) for point in text.split())
        return (a[0], a[1]), (b[0], b[1])
    except ValueError:
        raise HarnessInputError(None, "--clicks", f"'{text}' is not \"x1,y1 x2,y2\"") from None


def _clicks_from_window(frame: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """Two clicks on opposite rim points, in a matplotlib window (OpenCV here is the headless build)."""
    if not os.environ.get("DISPLAY") and os.name != "nt":
        raise HarnessInputError(None, "--clicks", "no display for clicking: pass --clicks \"x1,y1 x2,y2\" or --auto")
    import matplotlib.pyplot as plt

    plt.imshow(frame)
    plt.title("Click two opposite points on the bowl rim")
    points = plt.ginput(2, timeout=0)
    plt.close()
    if len(points) != 2:
        raise HarnessInputError(None, "--clicks", "two rim points are needed")
    return points[0], points[1]


def run_measure(args: MeasureRequest) -> int:
    """Every flag and image checked, each sheet locked and loaded, then measured (module docstring)."""
    _check_flags(args)
    frames = _frames(list(args.inputs))
    sheets, locks = _lock_and_load({sheet for _, trial, sheet in frames if trial and sheet})
    try:
        return _measure(args, frames, sheets)
    finally:
        for lock in locks:
            lock.release()


def _load_camera(args: MeasureRequest, cal_path: Path) -> CameraIntrinsics | None:
    """The lens calibration (`harness calibrate-camera`): --camera, else the one beside the rim's."""
    path = args.camera if args.camera else cal_path.with_name(CAMERA_FILE)
    if not path.is_file():
        if args.camera:
            raise HarnessInputError(path, "--camera", "no such camera calibration (make one: harness calibrate-camera)")
        return None
    return load_intrinsics(path)


def _undistorted_clicks(points: tuple[tuple[float, float], ...], camera: CameraIntrinsics | None,
                        shape: tuple[int, ...]) -> tuple[tuple[float, float], ...]:
    """Clicks are made on the raw frame; with a known lens they move to where the undistorted frame has them."""
    if camera is None:
        return points
    cam = camera.at_size(shape[1], shape[0])
    moved = cv2.undistortPoints(np.array(points, np.float32).reshape(-1, 1, 2), cam.matrix, cam.coefficients,
                                P=cam.matrix).reshape(-1, 2)
    return tuple((float(x), float(y)) for x, y in moved)


def _geometry(args: MeasureRequest, focal: float | None) -> Geometry:
    return Geometry(bowl_cm=args.bowl_cm, cube_cm=args.cube_cm, bowl_height_cm=args.bowl_height_cm,
                    rim_width_cm=args.rim_width_cm, floor_cm=args.floor_cm, focal_px=focal,
                    max_uncertainty_cm=args.max_uncertainty_cm)


def _check_sizes(frames: list[Frame], calibration: BowlCalibration, reference: np.ndarray, cal_path: Path) -> None:
    """Every image's size (from its header) against the calibration's, before anything is measured or written:
    another aspect is refused in one line (`rim_at_size`)."""
    for image_path, _, _ in frames:
        with Image.open(image_path) as image:
            rim_at_size(calibration, reference, image.size, cal_path)


def _measure(args: MeasureRequest, frames: list[Frame], sheets: dict[Path, Scoresheet]) -> int:
    say = (lambda text: print(text, file=sys.stderr)) if args.as_json else print
    cal_path = args.calibration
    camera = _load_camera(args, cal_path)
    if camera is None:
        say("note: lens distortion is uncorrected (no camera calibration beside the rim's): "
            "run `harness calibrate-camera` for the full accuracy")
    elif args.fovy_deg:
        say(f"note: the field of view comes from the camera calibration ({camera.fovy_deg:.1f} deg), "
            "not --fovy-deg")
    if args.calibrates:
        source = args.calibrate_on or frames[0][0]
        frame = _read_rgb(source)
        seen = camera.undistort(frame) if camera else frame
        if args.auto:
            try:
                rim = fit_rim(seen, shape=bowl_shape(_geometry(args, None))).rim
            except DetectionError as err:
                raise HarnessInputError(source, "--auto", f"no bowl rim ({err}); use --clicks on two opposite "
                                        "rim points") from None
            method = "auto"
        else:
            try:
                clicks = _clicks(args.clicks) if args.clicks else _clicks_from_window(frame)
                rim = rim_from_clicks(*_undistorted_clicks(clicks, camera, frame.shape))
            except ValueError as exc:
                raise HarnessInputError(None, "--clicks", str(exc)) from None
            method = "clicks"
        calibration = BowlCalibration(rim, args.bowl_cm, method, str(cal_path.with_suffix(".png")), "")
        _check_sizes(frames, calibration, frame, cal_path)   # before the calibration is written
        calibration.save(cal_path, frame)
        calibration, reference = load_calibration(cal_path)
        say(f"calibrated on {source}: rim {rim.a:.1f} x {rim.b:.1f} px ({method}), saved {cal_path}")
    else:
        calibration, reference = load_calibration(cal_path)
        if abs(calibration.bowl_cm - args.bowl_cm) > 1e-9:
            raise HarnessInputError(cal_path, "bowl_cm", f"calibrated for {calibration.bowl_cm} cm, not {args.bowl_cm}")
        _check_sizes(frames, calibration, reference, cal_path)
    pending: dict[Path, list[PlacementMeasurement]] = {path: [] for path in sheets}
    measured = failed = 0
    rescaled_from: set[tuple[int, int]] = set()
    for image_path, trial, sheet_path in frames:
        frame = _read_rgb(image_path)
        label = f"trial {trial[0]} attempt {trial[1]}" if trial else str(image_path)
        # the camera's real resolution is the frame's: the calibration's rim in its pixels, the focal length
        # (from --fovy-deg) at its height
        calibrated_rim, rescaled = rim_at_size(calibration, reference, (frame.shape[1], frame.shape[0]), cal_path)
        if rescaled and (frame.shape[1], frame.shape[0]) not in rescaled_from:
            rescaled_from.add((frame.shape[1], frame.shape[0]))
            say(f"note: the bowl calibration was made on {reference.shape[1]}x{reference.shape[0]} frames; "
                f"rescaled to these {frame.shape[1]}x{frame.shape[0]} ones (same aspect)")
        focal = None
        if args.fovy_deg and camera is None:
            focal = (frame.shape[0] / 2) / math.tan(math.radians(args.fovy_deg / 2))
        geometry = _geometry(args, focal)
        shift = camera_shift_px(reference, frame)
        if shift > MOVED_PX:
            say(f"warning: {label}: the camera appears to have moved {shift:.1f} px since calibration; "
                "re-calibrate (--auto or --clicks) before trusting this number")
        # --auto finds the rim in every frame (a bowl nudged during a trial is followed); clicks hold for all
        result = measure_image(frame, geometry, camera, rim=None if args.auto else calibrated_rim,
                               expected_rim=calibrated_rim if args.auto else None)
        out = _annotated_path(image_path)
        rim = result.rim or calibrated_rim
        m = result.measurement
        if args.as_json:
            moved = (Caveat.CAMERA_MOVED,) if shift > MOVED_PX else ()
            print(json.dumps({"image": str(image_path), "trial": trial[0] if trial else None,
                              "attempt": trial[1] if trial else None, **result.record(moved)}))
        if m is None:
            failed += 1
            note = f"not measured: {result.why_not()}"
            say(f"{label}: {note}")
            _save_png(out, annotate(result.frame, rim, geometry, None, note[:70]))
            continue
        measured += 1
        where = "inside" if m.inside else "outside"
        note = f"{m.distance_cm:.2f} +/- {m.uncertainty_cm:.2f} cm from bowl centre ({where})"
        _save_png(out, annotate(result.frame, rim, geometry, m, note))
        learned = Caveat.CUBE_OUTLINED_BY_SEGMENTER in m.caveats
        say(f"{label}: {note} -> {out}" + ("; the colour rule found no whole cube, the learned segmenter outlined "
                                           "it: look at the image" if learned else ""))
        if trial and sheet_path:
            pending[sheet_path].append(PlacementMeasurement(
                trial_index=trial[0], attempt=trial[1], placement_error_cm=round(m.distance_cm, 3),
                inside_bowl=m.inside, method=f"pixels ({calibration.method} rim calibration"
                + (", lens corrected" if camera else "") + (", cube outlined by the learned segmenter" if learned
                                                             else "") + ")",
                image=str(out), measured_at=now_iso(), uncertainty_cm=m.uncertainty_cm))
    for sheet_path, measurements in pending.items():
        sheets[sheet_path].add_measurements(measurements)
        say(f"recorded {len(measurements)} measurements in {sheet_path}")
    say(f"{measured} measured, {failed} not measured")
    return 0 if failed == 0 else 1


def scene_check_from_args(args: argparse.Namespace) -> int:
    from PIL import ImageDraw

    from harness.vision.scene_check import unexpected_objects

    if args.min_area_px is not None and args.min_area_px < 1:
        raise HarnessInputError(None, "--min-area-px", f"{args.min_area_px}: must be at least 1 pixel")
    frame = read_image(args.frame)
    references = [read_image(r) for r in args.reference]
    for path, reference in zip(args.reference, references, strict=True):   # the camera's real size is the frame's
        if reference.shape != frame.shape:
            raise HarnessInputError(path, None, f"{reference.shape[1]}x{reference.shape[0]}; the frame is "
                                    f"{frame.shape[1]}x{frame.shape[0]}: references come from the same camera "
                                    "at the same size")
    found = unexpected_objects(frame, references, min_area_px=args.min_area_px)
    if not found:
        print(f"{args.frame}: nothing unexpected compared with {len(args.reference)} reference frame(s)")
        return 0
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    for u in found:
        print(f"unexpected object at x={u.centre[0]} y={u.centre[1]} px ({u.width}x{u.height} px, {u.area_px} px^2)")
        draw.rectangle([u.x, u.y, u.x + u.width, u.y + u.height], outline=(255, 0, 255), width=2)
    out = Path(args.frame).with_name(Path(args.frame).stem + "_scene_check.png")
    image.save(out)
    print(f"{len(found)} unexpected object(s); marked in {out}. Clear the view before running trials.")
    return 1
