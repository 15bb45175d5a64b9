"""Why a frame gets no number: stable reasons that scripts and reports can act on."""

from __future__ import annotations

from enum import StrEnum

from harness.errors import HarnessError


class NotMeasured(StrEnum):
    RIM_NOT_FOUND = "rim_not_found"
    WEAK_EDGE_SUPPORT = "weak_edge_support"
    RIM_AMBIGUOUS = "rim_ambiguous"
    ELLIPSE_INCONSISTENT_WITH_CAMERA = "ellipse_inconsistent_with_camera"
    CUBE_NOT_FOUND = "cube_not_found"
    CUBE_PARTLY_HIDDEN = "cube_partly_hidden"
    CUBE_AMBIGUOUS = "cube_ambiguous"
    CUBE_COLOURED_BACKGROUND = "cube_coloured_background"
    TOO_UNCERTAIN = "too_uncertain"
    # the self-check (issue 59): the scene does not look as it must if the rim found is the bowl's
    RIM_FITS_DISAGREE = "rim_fits_disagree"
    RIM_SIZE_INCONSISTENT = "rim_size_inconsistent"
    CUBE_SIZE_INCONSISTENT = "cube_size_inconsistent"
    CALIBRATION_SIZE_MISMATCH = "calibration_size_mismatch"   # frames of another size than the calibration's


class Caveat(StrEnum):
    """A number was given, but the user should know this about it."""

    LENS_DISTORTION_UNCORRECTED = "lens_distortion_uncorrected"
    NO_HEIGHT_CORRECTION = "no_height_correction"
    CAMERA_MOVED = "camera_moved"
    CUBE_OUTLINED_BY_SEGMENTER = "cube_outlined_by_segmenter"   # the colour rule refused; the learned net's outline


class DetectionError(HarnessError):
    """The frame does not show what a measurement needs (no cube, no rim); never a made-up number."""

    def __init__(self, reason: NotMeasured, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value.replace('_', ' ')}: {detail}")
