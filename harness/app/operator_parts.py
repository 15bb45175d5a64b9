"""The real arm's stage from `harness run` arguments: placement guide and proposals when the bowl is calibrated.

Without `--bowl-calibration` the stage is as before: the operator is asked to place the cube and
scores alone. With it, every finished trial gets a proposed label (gripper positions plus the final
top frame). With `--trained-spot` too (a top frame with the cube on its trained spot, which fixes the
table's axes in the image) and a front end that can show it, the cube is guided onto each trial's
target and the scene is checked before the trial starts against the cleared table, captured live with the
arm at its start pose before the first trial (the calibration's own frame shows the arm wherever it was).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml
from PIL import Image

from harness.errors import HarnessInputError
from harness.models.protocol import Protocol
from harness.models.run_request import PlacementRequest
from harness.run.clock import MonotonicClock
from harness.run.stages import OperatorStage


@dataclass(frozen=True)
class PlacementFiles:
    """What `--bowl-calibration`, `--trained-spot` and `--placement-tolerance` say, read and checked."""

    calibration: Any            # vision.calibration.BowlCalibration
    empty_scene: np.ndarray     # the calibration's own frame
    view: Any                   # run.placement_guide.TopView (axes from the trained spot, or none yet)
    tolerance: Any              # run.placement_guide.Tolerance
    guided: bool                # a trained spot was given: placements are guided


def placement_files(request: PlacementRequest, protocol: Protocol) -> PlacementFiles | None:
    """Read and check the placement files; None without `--bowl-calibration`. `harness run` calls this before
    it locks anything, so a bad value is one line naming the flag, exit 2, and no scoresheet."""
    from harness.run.placement_guide import Tolerance

    tolerance = Tolerance(*request.tolerance)
    calibration_path = request.bowl_calibration
    spot = request.trained_spot
    if not calibration_path:
        if spot:
            raise HarnessInputError(spot, "--trained-spot", "needs --bowl-calibration (the rim gives the scale)")
        return None
    from harness.run.placement_guide import TopView, table_axes
    from harness.vision.calibration import load_calibration
    from harness.vision.measure import Geometry
    from harness.vision.reasons import DetectionError

    if not calibration_path.is_file():
        raise HarnessInputError(calibration_path, "--bowl-calibration",
                                "no such file (`harness measure RUN --bowl-cm 11.5 --auto` writes one)")
    try:
        calibration, empty_scene = load_calibration(calibration_path)
    except HarnessInputError as err:
        raise HarnessInputError(calibration_path, "--bowl-calibration", err.problem) from None
    except (yaml.YAMLError, ValueError, AttributeError, UnicodeDecodeError):
        raise HarnessInputError(calibration_path, "--bowl-calibration",
                                "not a bowl calibration (it needs rim, bowl_cm, method, frame)") from None
    geometry = Geometry(bowl_cm=calibration.bowl_cm, cube_cm=protocol.scene.cube_edge_cm)
    size = (empty_scene.shape[1], empty_scene.shape[0])   # the rim is in these frames' pixels
    view = TopView(calibration.rim, geometry, protocol.scene, 0.0, size=size)
    if spot:
        try:
            frame = np.asarray(Image.open(spot).convert("RGB"))
            view = table_axes(calibration.rim, geometry, protocol.scene, frame, size)
        except OSError as exc:
            raise HarnessInputError(spot, "--trained-spot", f"not an image ({exc})") from None
        except DetectionError as err:
            raise HarnessInputError(spot, "--trained-spot", f"cannot find the table's axes: {err}") from None
    return PlacementFiles(calibration, empty_scene, view, tolerance, bool(spot))


def operator_stage(request: PlacementRequest, protocol: Protocol, robot: Any, observer: Any) -> OperatorStage:
    show = getattr(observer, "proposal_ready", None)
    files = placement_files(request, protocol)
    if files is None:
        return OperatorStage(observer.confirm_cube_placed, show_proposal=show)
    from harness.run.operator_trial import PlacementGuide, Proposer
    from harness.run.proposal import so101_grasp_point

    proposer = Proposer(files.view, so101_grasp_point(), fps=protocol.fps)
    guide = None
    cameras = getattr(getattr(robot, "robot", None), "cameras", {}) or {}
    if files.guided and "top" in cameras and hasattr(observer, "placement"):
        from harness.vision.lab import build_tables_in_background

        build_tables_in_background()   # off the first cube prompt's path: its scene check converts to Lab
        guide = PlacementGuide(files.view, lambda: cameras["top"].async_read(timeout_ms=1000), [files.empty_scene],
                               observer, MonotonicClock(), files.tolerance, capture_references=3)
    return OperatorStage(observer.confirm_cube_placed, guide=guide, proposer=proposer, show_proposal=show)
