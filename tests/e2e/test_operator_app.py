"""`harness run` on a real arm builds the guided, proposing stage from --bowl-calibration and --trained-spot."""

from __future__ import annotations

import argparse
import io
import math
import os
import subprocess
import sys

import pytest
from PIL import Image

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.app.operator_parts import operator_stage
from harness.errors import HarnessInputError
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import Protocol, load_protocol
from harness.models.run_request import PlacementRequest, RunRequest
from harness.run.terminal import TerminalObserver
from harness.sim.world import SimWorld
from harness.vision.calibration import BowlCalibration
from harness.vision.rim import fit_rim
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # builds the arm's kinematic model and renders


class TopCamera:
    def __init__(self, frame) -> None:
        self.frame = frame

    def async_read(self, timeout_ms: float = 200):
        return self.frame


class Arm:
    def __init__(self, frame) -> None:
        self.robot = argparse.Namespace(cameras={"top": TopCamera(frame)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    # renderers earlier tests left unclosed are freed now, not by a collection between this world's draws (twice a
    # clean-clone CI run drew the spot picture as noise here; gl_draw.py)
    import gc

    gc.collect()
    folder = tmp_path_factory.mktemp("cal")
    world = SimWorld()
    world.set_arm(DEFAULT_START_POSE)
    world.place_cube((0.60, 0.40), 0.0)
    empty = world.render("top", 640, 480)
    BowlCalibration(fit_rim(empty).rim, 11.5, "auto", "bowl.png", "").save(folder / "bowl.yaml", empty)
    world.place_cube((0.22, -0.05), math.radians(0))
    spot = world.render("top", 640, 480)
    Image.fromarray(spot).save(folder / "spot.png")
    world.close()
    return folder, spot


def _placement(folder) -> PlacementRequest:
    return PlacementRequest(bowl_calibration=folder / "bowl.yaml", trained_spot=folder / "spot.png")


def _protocol() -> Protocol:
    return load_protocol(REPO / "tests" / "data" / "small.yaml")   # trial 1: the trained spot itself


def test_calibrated_real_arm_gets_a_guide_and_a_proposer(files) -> None:
    folder, spot = files
    observer = TerminalObserver(operator_scores=True, out=io.StringIO(), stdin=io.StringIO())
    stage = operator_stage(_placement(folder), _protocol(), Arm(spot), observer)
    assert stage.guide is not None and stage.proposer is not None
    outcome = stage.guide.place(_protocol().trials[0])   # the cube is on its (zero-offset) target
    assert outcome.reading.within and outcome.override_reason is None


BUILDS_LAB_TABLES = """
import argparse, io, sys
from pathlib import Path

import numpy as np
from PIL import Image

from harness.app.operator_parts import operator_stage
from harness.models.protocol import load_protocol
from harness.models.run_request import PlacementRequest
from harness.run.terminal import TerminalObserver
from harness.vision import lab
from tests.helpers import wait_until

folder, protocol = Path(sys.argv[1]), load_protocol(sys.argv[2])
camera = argparse.Namespace(async_read=lambda timeout_ms=200: np.asarray(Image.open(folder / "spot.png")))
arm = argparse.Namespace(robot=argparse.Namespace(cameras={"top": camera}))
assert not lab.tables_built(), "nothing has converted to Lab yet"
stage = operator_stage(PlacementRequest(bowl_calibration=folder / "bowl.yaml", trained_spot=folder / "spot.png"),
                       protocol, arm, TerminalObserver(True, io.StringIO(), io.StringIO()))
assert stage.guide is not None
wait_until(lab.tables_built, 60, "the Lab tables built on the stage's own thread")
"""


def test_a_guided_stage_has_the_lab_tables_built_before_its_first_placement(files) -> None:
    """OpenCV builds its Lab tables at a process's first conversion (0.3-0.9 s on two loaded cores): a guided stage
    has them built on a thread of its own while the check screen waits, so the first placement's scene check, right
    after the operator has cleared the table, does not (issue 40). A fresh process: this one has built them."""
    folder, _ = files
    protocol = REPO / "tests" / "data" / "small.yaml"
    done = subprocess.run([sys.executable, "-c", BUILDS_LAB_TABLES, str(folder), str(protocol)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_a_calibration_the_stage_is_as_before(files) -> None:
    observer = TerminalObserver(operator_scores=True, out=io.StringIO(), stdin=io.StringIO())
    stage = operator_stage(PlacementRequest(), _protocol(), Arm(files[1]), observer)
    assert stage.guide is None and stage.proposer is None


@pytest.mark.parametrize("change", [{"placement_tolerance": "half"}, {"placement_tolerance": "0,10"},
                                    {"trained_spot": "missing.png"}])
def test_bad_real_arm_inputs_are_one_clear_input_error(files, change) -> None:
    folder, spot = files
    flags = {"bowl_calibration": str(folder / "bowl.yaml"), "trained_spot": str(folder / "spot.png"), **change}
    if "trained_spot" in change:
        flags["trained_spot"] = str(folder / change["trained_spot"])
    with pytest.raises(HarnessInputError) as err:   # the tolerance is refused with the request, the files here
        request = RunRequest.from_flags({"protocol": "p.yaml", **flags})
        operator_stage(request.placement, _protocol(), Arm(spot), TerminalObserver(True, io.StringIO(), io.StringIO()))
    assert err.value.exit_code == 2
