"""`harness rehearse --camera-size`: the whole desk flow on the emulated arm with cameras that are not 640x480
(issue 59): the rim calibrated on the empty table at the camera's size, the trained spot measured where it is,
the placement guide measuring the cube onto each trial's target. Before, at 320x240 the rim took the bowl's inner
disc and read the trained spot 31 cm from the bowl instead of 19; at 1280x720 the emulated camera could not draw.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from harness.cli import main
from tests.realtime.test_rehearse import _protocol

TRAINED_SPOT_CM = math.hypot(22.0 - 18.0, -5.0 - 14.0)   # the protocol's trained spot from its bowl


@pytest.mark.slow
@pytest.mark.parametrize("size", ["320x240", "1280x720"])
def test_a_rehearsal_at_another_camera_size_measures_the_trained_spot_and_guides_the_cube(
        size: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    protocol = _protocol(tmp_path)
    code = main(["rehearse", str(protocol), "--policy", "expert", "--operator", "scripted", "--camera-size", size,
                 "--placement-error-cm", "1.5", "--rehearsal-dir", "desk_files", "--max-trials", "1"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    height = int(size.split("x")[1])
    rim = re.search(r"calibrated on \S+: rim ([\d.]+) x ([\d.]+) px", out)
    assert rim, out
    # the project's top camera (45 deg vertical field of view, 0.75 m up) sees the rim 47 px across at 480 lines
    assert float(rim[1]) == pytest.approx(47.2 * height / 480, rel=0.03)
    spot = re.search(r"trained_spot.png: ([\d.]+) \+/- ([\d.]+) cm from bowl centre \(outside\)", out)
    assert spot and abs(float(spot[1]) - TRAINED_SPOT_CM) <= 1.0, out[:2000]
    assert re.search(r"cube at dx [+-][\d.]+ dy [+-][\d.]+ cm .* - OK", out), out[-3000:]
