"""The fidelity report of twin sheets: per twin the paired labels, and across three twins Pearson r, MMRV and the
ranking, as `report --json` prints them and the Markdown shows them (with the disagreeing final frames side by
side). Sheets are made by hand: real A 3/4 with twin 2/4, B 1/4 with 1/4, C 2/4 with 3/4. By hand: real rates
(.75, .25, .5), twin (.5, .25, .75); deviations (.25, -.25, 0) and (0, -.25, .25) give r = .0625 / .125 = 0.5;
the twin swaps A and C (real gap .25), so the maximum violations are (.25, 0, .25) and MMRV = 1/6."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.cli import main
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, lock_scoresheet
from tests.helpers import fake_attempt, small_protocol_copy

LABELS = {"a": (["success", "success", "success", "no_grasp"], ["success", "no_grasp", "success", "no_grasp"]),
          "b": (["success", "no_grasp", "no_grasp", "no_grasp"], ["success", "no_grasp", "no_grasp", "no_grasp"]),
          "c": (["success", "grasped_then_dropped", "success", "no_grasp"],
                ["success", "success", "success", "wrong_placement"])}


def _frame(path: Path, colour: tuple[int, int, int]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((48, 64, 3), colour, dtype=np.uint8)).save(path)
    return str(path)


def _pair(folder: Path, name: str) -> Path:
    folder.mkdir()
    protocol_path = small_protocol_copy(folder)
    third = "- {index: 3, dx_cm: -4.0, dy_cm: 3.0}"
    fourth = "- {index: 4, dx_cm: 1.0, dy_cm: 1.0}"
    protocol_path.write_text(protocol_path.read_text().replace(third, f"{third}\n{fourth}"))
    protocol = load_protocol(protocol_path)
    policy = folder / f"ckpt-{name}"
    policy.mkdir()
    (policy / "config.json").write_text("{}")
    real = lock_scoresheet(folder / f"{name}.yaml", build_locked(protocol, protocol_path, str(policy), "so101",
                                                                 {"rehearsal": {"gap": {"servo_gain": 0.3}}}),
                           {"cameras": {}})
    twin = lock_scoresheet(folder / f"{name}-twin.yaml", build_locked(
        protocol, protocol_path, str(policy), "sim",
        {"latency_ms": 30.0, "twin_of": {"real_sheet": str(real.path), "real_lock_sha256": real.lock["sha256"]}}),
        {"cameras": {}})
    reals, twins = LABELS[name]
    for index, (r, t) in enumerate(zip(reals, twins, strict=True), start=1):
        real.add_attempt(fake_attempt(index, 1, r, measured_start={"dx_cm": 0.5, "dy_cm": -0.5, "yaw_deg": 0.0},
                                      artifacts={"final_top.png": _frame(folder / f"real-{name}{index}.png",
                                                                         (200, 40, 40))}))
        twin.add_attempt(fake_attempt(index, 1, t, artifacts={
            "final_top.png": _frame(folder / f"twin-{name}{index}.png", (40, 40, 200))}))
    return twin.path


@pytest.mark.slow
def test_the_report_pairs_each_twin_with_its_real_sheet_and_ranks_them_across(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    twins = [_pair(tmp_path / name, name) for name in ("a", "b", "c")]
    assert main(["report", "--json", *map(str, twins)]) == 0
    report = json.loads(capsys.readouterr().out)["twin_fidelity"]
    first = report["twins"][0]
    assert first["rehearsal_gap"] == {"servo_gain": 0.3} and first["paired"] == 4
    assert (first["real_success"]["k"], first["twin_success"]["k"]) == (3, 2)
    assert (first["label_agreement"]["k"], first["label_agreement"]["n"]) == (3, 4)
    assert first["confusion"]["success"]["no_grasp"] == 1
    third = {m["label"]: m for m in report["twins"][2]["modes"]}
    assert (third["grasped_then_dropped"]["missed"], third["wrong_placement"]["invented"]) == (1, 1)
    across = report["across"]
    assert [s["real"] for s in across["sheets"]] == [0.75, 0.25, 0.5]
    assert across["pearson_r"] == pytest.approx(0.5)
    assert across["mmrv"] == pytest.approx(1 / 6)
    assert across["same_ranking"] is False

    md = tmp_path / "twin.md"
    assert main(["report", "--md", str(md), *map(str, twins)]) == 0
    text = md.read_text()
    assert "Twin fidelity" in text and "servo_gain=0.3" in text and "MMRV 0.167" in text and "Pearson r 0.50" in text
    side_by_side = sorted((tmp_path / "twin_files").glob("twin1-trial2*.png"))
    assert side_by_side, sorted(p.name for p in (tmp_path / "twin_files").iterdir())
    pixels = np.asarray(Image.open(side_by_side[0]).convert("RGB"))
    assert pixels[40, 10, 0] > 150 and pixels[40, -10, 2] > 150      # the real frame left, the twin's right


def test_the_plain_report_of_a_twin_says_how_well_it_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/twin.md: a twin sheet in `harness report` adds its agreement; the plain text too, not only -o, --md and
    --json (issue 60)."""
    twin = _pair(tmp_path / "a", "a")
    assert main(["report", str(twin)]) == 0
    out = capsys.readouterr().out
    assert "4 real attempts paired with the twin's run" in out
    assert "same label 3/4 (75 %" in out and "kappa" in out, out
    assert out.index("Twin ") < out.index("Success")   # before the run itself, as the other reports put it
