"""The proposal-agreement script over finished simulated runs: the proposer is given what a real arm would give
it (the joints the loop observed, the final 640x480 top frame, the rim calibrated by `harness measure`), and
its proposals are compared with the judge's recorded labels, per attempt and in one table."""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.cli import main
from harness.models.protocol import JOINT_NAMES
from harness.models.scoresheet import load_scoresheet
from harness.models.taxonomy import Label
from harness.sim.world import SimWorld
from tests.helpers import REPO, locked_sheet, small_protocol_copy


@functools.cache
def _script():
    """benchmarks/proposal_agreement.py as a module (benchmarks/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("proposal_agreement", REPO / "benchmarks" / "proposal_agreement.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_proposals_agree_with_the_judge_over_expert_and_replay_runs(workdir, capsys) -> None:
    protocol = small_protocol_copy(workdir)
    for policy in ("expert", "replay"):
        assert main(["run", str(protocol), "--headless", "--policy", policy, "--no-video",
                     "--scoresheet", f"scoresheets/small-{policy}.yaml"]) == 0
    sheets = {p: load_scoresheet(workdir / "scoresheets" / f"small-{p}.yaml") for p in ("expert", "replay")}
    judged = {(f"small-{p}", a.trial_index): a.label for p, s in sheets.items() for a in s.scored_attempts()}
    assert len(judged) == 6 and any(label != Label.SUCCESS for label in judged.values()), judged
    assert all(label == Label.SUCCESS for (sheet, _), label in judged.items() if sheet == "small-expert"), judged
    # one attempt without its stored final frame: the script draws it from the trajectory
    lacking = workdir / "runs" / "small-replay" / "trial-002-a1"
    kept = workdir / "final_top_kept.png"
    shutil.move(lacking / "final_top.png", kept)
    capsys.readouterr()

    script = _script()
    out = workdir / "agreement.json"
    assert script.main(["scoresheets/small-expert.yaml", "scoresheets/small-replay.yaml", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    results = json.loads(out.read_text())

    # every scored attempt compared once, against the label the judge recorded
    assert sorted((r["sheet"], r["trial"]) for r in results) == sorted(judged)
    assert all(r["judge"] == judged[(r["sheet"], r["trial"])] for r in results)
    checked = 0
    for r in results:
        if r["sheet"] == "small-expert":
            assert r["proposed"] == Label.SUCCESS, r       # the expert's successes are proposed as such
            checked += 1
        if r["judge"] != Label.SUCCESS:
            assert r["proposed"] != Label.SUCCESS, r       # no failure of replay's is proposed a success
            checked += 1
        assert r["reasons"], r
    assert checked == 3 + sum(label != Label.SUCCESS for label in judged.values())
    agreed = sum(r["agrees"] for r in results)
    assert f"Overall agreement {agreed}/6" in printed.out and "| judge \\ proposed |" in printed.out
    assert "[   6/6]" in printed.err and "left" in printed.err
    by_trial = {(r["sheet"], r["trial"]): r for r in results}
    assert by_trial[("small-replay", 2)]["final_frame"] == "drawn"
    assert sum(r["final_frame"] == "stored" for r in results) == 5


@pytest.mark.slow
def test_the_rebuilt_evidence_is_what_the_loop_observed_and_recorded(workdir) -> None:
    protocol = small_protocol_copy(workdir)
    assert main(["run", str(protocol), "--headless", "--policy", "replay", "--no-video", "--max-trials", "2",
                 "--scoresheet", "scoresheets/small-replay.yaml"]) == 0
    script = _script()
    for folder in sorted((workdir / "runs" / "small-replay").glob("trial-*")):
        trajectory = script.trial_trajectory(folder)
        world = SimWorld(trajectory.geometry, control_fps=30)
        try:
            joints = script.observed_joints(trajectory, world)
            # the joints the engine observed (steps 1.., the first is before any state was logged)
            table = pd.read_parquet(folder / "trajectory.parquet")
            observed = table[[f"obs.{n}.pos" for n in JOINT_NAMES]].to_numpy()[1:]
            rebuilt = np.array([[j[n] for n in JOINT_NAMES] for j in joints])
            assert rebuilt.shape == observed.shape and np.array_equal(rebuilt, observed), folder
            stored = np.asarray(Image.open(folder / "final_top.png").convert("RGB"))
            frame, source = script.final_top_frame(folder, trajectory, world)
            assert source == "stored" and np.array_equal(frame, stored)
            (folder / "final_top.png").unlink()
            drawn, source = script.final_top_frame(folder, trajectory, world)
            assert source == "drawn" and np.array_equal(drawn, stored), folder   # pixel-equal
        finally:
            world.close()


def test_a_run_without_its_evidence_is_one_line_and_exit_2(workdir, capsys) -> None:
    sheet = locked_sheet(workdir)
    code = _script().main([str(sheet.path), "--runs-dir", str(workdir / "elsewhere")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "elsewhere" in err[0] and "--runs-dir" in err[0], err
