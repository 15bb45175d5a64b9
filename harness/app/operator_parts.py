"""The real arm's stage from `harness run` arguments: placement guide and proposals when the bowl is calibrated.

Without `--bowl-calibration` the stage is as before: the operator is asked to place the cube and
scores alone. With it, every finished trial gets a proposed label (gripper positions plus the final
top frame). With `--trained-spot` too (a top frame with the cube on its trained spot, which fixes the
table's axes in the image) and a front end that can show it, the cube is guided onto each trial's
target and the scene is checked before the trial starts against the cleared table, captured live with the
arm at its start pose before the first trial (the calibration's own frame shows the arm wherever it was).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from harness.errors import HarnessInputError
from harness.models.protocol import Protocol
from harness.run.clock import MonotonicClock
from harness.run.stages import OperatorStage


def _tolerance(text: str) -> Any:
    from harness.run.placement_guide import Tolerance

    try:
        cm, deg = (float(v) for v in text.split(","))
    except ValueError:
        raise HarnessInputError(None, "--placement-tolerance", f"{text!r} is not CM,DEG (e.g. 0.5,10)") from None
    if cm <= 0 or deg <= 0:
        raise HarnessInputError(None, "--placement-tolerance", "both must be positive")
    return Tolerance(cm, deg)


def operator_stage(args: argparse.Namespace, protocol: Protocol, robot: Any, observer: Any) -> OperatorStage:
    show = getattr(observer, "proposal_ready", None)
    calibration_path = getattr(args, "bowl_calibration", None)
    if not calibration_path:
        return OperatorStage(observer.confirm_cube_placed, show_proposal=show)
    from harness.run.operator_trial import PlacementGuide, Proposer
    from harness.run.placement_guide import TopView, table_axes
    from harness.run.proposal import so101_grasp_point
    from harness.vision.calibration import load_calibration
    from harness.vision.measure import Geometry
    from harness.vision.reasons import DetectionError

    calibration, empty_scene = load_calibration(Path(calibration_path))
    geometry = Geometry(bowl_cm=calibration.bowl_cm, cube_cm=protocol.scene.cube_edge_cm)
    view = TopView(calibration.rim, geometry, protocol.scene, 0.0)
    tolerance = _tolerance(getattr(args, "placement_tolerance", None) or "0.5,10")
    spot = getattr(args, "trained_spot", None)
    if spot:
        try:
            frame = np.asarray(Image.open(spot).convert("RGB"))
            view = table_axes(calibration.rim, geometry, protocol.scene, frame)
        except OSError as exc:
            raise HarnessInputError(Path(spot), None, f"not an image ({exc})") from None
        except DetectionError as err:
            raise HarnessInputError(Path(spot), None, f"cannot find the table's axes: {err}") from None
    proposer = Proposer(view, so101_grasp_point())
    guide = None
    cameras = getattr(getattr(robot, "robot", None), "cameras", {}) or {}
    if spot and "top" in cameras and hasattr(observer, "placement"):
        guide = PlacementGuide(view, lambda: cameras["top"].async_read(timeout_ms=1000), [empty_scene], observer,
                               MonotonicClock(), tolerance, capture_references=3)
    return OperatorStage(observer.confirm_cube_placed, guide=guide, proposer=proposer, show_proposal=show)
