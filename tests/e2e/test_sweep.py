"""`harness sweep`: a checkpoint x protocol grid on local Ray, resumable, with the report that ranks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.models.scoresheet import load_scoresheet
from harness.models.sweep_spec import load_sweep
from tests.helpers import REPO
from tests.tiny_policy import save_tiny_act

# quick tests import LeRobot's policies; the two that run a sweep start Ray clusters of their own, marked one by one
# so that the quick ones (refused before anything runs) stay off the worker that runs every Ray test (tests/conftest.py)
pytestmark = pytest.mark.lerobot_policies


def _protocols(tmp_path: Path) -> tuple[Path, Path]:
    randomized, fixed = tmp_path / "scattered.yaml", tmp_path / "fixed.yaml"
    assert main(["protocol", "new", "--randomized", "--n", "2", "--radius-cm", "4", "--min-spacing-cm", "1.2",
                 "--seed", "5", "--time-limit-s", "1", "-o", str(randomized)]) == 0
    assert main(["protocol", "new", "--fixed", "--n", "2", "--time-limit-s", "1", "-o", str(fixed)]) == 0
    return randomized, fixed


def _training_output(tmp_path: Path) -> Path:
    """What `lerobot-train --output_dir` leaves: checkpoints/<step>/pretrained_model, two steps."""
    out = tmp_path / "train" / "act_cube"
    save_tiny_act(out / "checkpoints" / "000002" / "pretrained_model")
    save_tiny_act(out / "checkpoints" / "000004" / "pretrained_model", action_mean=[0, -60, 60, 60, 0, 30])
    return out


def _write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def test_sweep_file_expands_a_training_folder_into_named_checkpoints(tmp_path: Path) -> None:
    randomized, fixed = _protocols(tmp_path)
    _training_output(tmp_path)
    spec = _write(tmp_path / "sweep.yaml", {"name": "grid", "checkpoints": ["train/act_cube", "expert"],
                                            "protocols": [randomized.name, fixed.name],
                                            "conditions": [{}, {"no_video": True}]})
    sweep = load_sweep(spec, tmp_path / "sheets")
    assert [c.label for c in sweep.checkpoints] == ["act_cube-step2", "act_cube-step4", "expert"]
    assert len(sweep.cells) == 3 * 2 * 2
    assert len({c.key for c in sweep.cells}) == len(sweep.cells)   # every cell its own scoresheet
    assert sweep.baseline.label == "act_cube-step2"


@pytest.mark.parametrize(("change", "field"), [
    ({"conditions": [{"latency": 5}]}, "conditions"),
    ({"protocols": ["missing.yaml"]}, "protocols"),
    ({"baseline": "act_cube-step9"}, "baseline"),
    ({"checkpoints": ["nowhere"]}, "checkpoints"),
    ({"name": "../escape"}, "name"),
    ({"workers": 0}, "workers"),
    # YAML says what it means, as a protocol does: no text, switch or float where a whole number belongs
    ({"workers": True}, "workers"),
    ({"workers": "2"}, "workers"),
    ({"workers": 2.0}, "workers"),
    ({"offline_eval": {"dataset": "d", "frames": "200"}}, "frames"),
    ({"conditions": [{"latency_ms": "50"}]}, "latency_ms: '50' is not a number"),
    ({"conditions": [{"latency_ms": True}]}, "latency_ms: True is not a number"),
    ({"conditions": [{"no_video": "yes"}]}, "no_video: 'yes' is not true or false"),
    ({"conditions": [{"max_trials": 2.5}]}, "max_trials: 2.5 is not a whole number"),
])
def test_bad_sweep_files_are_refused_in_one_line_before_anything_runs(tmp_path: Path, change: dict, field: str,
                                                                        capsys) -> None:
    randomized, _ = _protocols(tmp_path)
    _training_output(tmp_path)
    spec = {"name": "grid", "checkpoints": ["train/act_cube"], "protocols": [randomized.name]} | change
    path = _write(tmp_path / "sweep.yaml", spec)
    assert main(["sweep", str(path), "--scoresheets-dir", str(tmp_path / "sheets")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err
    assert not (tmp_path / "sheets").exists()


@pytest.mark.slow
@pytest.mark.ray_cluster
def test_two_checkpoints_by_two_protocols_on_local_ray_then_resume_skips_them(tmp_path: Path, capsys) -> None:
    randomized, fixed = _protocols(tmp_path)
    _training_output(tmp_path)
    spec = _write(tmp_path / "sweep.yaml", {"name": "grid", "checkpoints": ["train/act_cube"],
                                            "protocols": [randomized.name, fixed.name], "workers": 2})
    sheets, runs = tmp_path / "sheets", tmp_path / "runs"
    args = ["sweep", str(spec), "--scoresheets-dir", str(sheets), "--runs-dir", str(runs)]
    assert main(args) == 0
    cells = sorted((sheets / "grid").glob("*.yaml"))
    assert [c.stem for c in cells] == ["fixed-act_cube-step2", "fixed-act_cube-step4", "scattered-act_cube-step2",
                                       "scattered-act_cube-step4"]
    for cell in cells:
        sheet = load_scoresheet(cell)
        assert sheet.complete and len(sheet.scored_attempts()) == 2
        assert sheet.locked.policy.ref.endswith("pretrained_model")
    report = (sheets / "grid" / "report.html").read_text()
    assert "Which checkpoint to ship" in report and "act_cube-step4" in report
    out = capsys.readouterr().out
    assert "closed-loop success picks" in out

    assert main(args) == 2   # a second sweep into the same folder must say --resume
    assert main([*args, "--resume"]) == 0
    assert capsys.readouterr().out.count("scored already, skipped") == 4


def test_the_shipped_act_against_smolvla_sweep_is_a_valid_sweep_file() -> None:
    from harness.models.run_request import RunRequest
    from harness.models.sweep_spec import SweepSpec, condition_settings
    from harness.storage.safe_yaml import load_yaml_text

    path = REPO / "sweeps" / "act-vs-smolvla.yaml"
    spec = SweepSpec.model_validate(load_yaml_text(path.read_text(), path))
    base = RunRequest(protocol=Path("p.yaml"))
    requests = [base.with_flags(condition_settings(c, server="127.0.0.1:8080")) for c in spec.conditions]
    assert [(r.latency, r.inference.engine, r.inference.policy_server) for r in requests] == [
        (None, None, None), ("measured", None, None), ("measured", "rtc", None), (None, None, "127.0.0.1:8080")]


@pytest.mark.parametrize(("condition", "problem"), [
    ({"latency": "fast"}, "latency: 'fast' is not 'measured'"),
    ({"inference": "async"}, "inference: 'async' is not sync or rtc"),
    ({"policy_server": 8080}, "policy_server: 'local' or HOST:PORT"),
])
def test_a_bad_latency_condition_is_one_line(tmp_path: Path, capsys, condition: dict, problem: str) -> None:
    randomized, _ = _protocols(tmp_path)
    spec = _write(tmp_path / "sweep.yaml", {"name": "s", "checkpoints": ["expert"], "protocols": [randomized.name],
                                            "conditions": [condition]})
    assert main(["sweep", str(spec), "--scoresheets-dir", str(tmp_path / "sheets")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and problem in err, err
    assert not (tmp_path / "sheets").exists()


def test_rtc_applies_only_to_a_policy_that_supports_it(tmp_path: Path) -> None:
    from harness.app.sweep_command import not_applicable
    from harness.models.sweep_spec import Cell, Checkpoint, NotApplicable

    act = save_tiny_act(tmp_path / "act")
    smolvla = tmp_path / "smolvla"
    smolvla.mkdir()
    (smolvla / "config.json").write_text(json.dumps({"type": "smolvla"}))

    def why(ref: str, condition: dict) -> NotApplicable | None:
        return not_applicable(Cell(Checkpoint(ref, ref), tmp_path / "p.yaml", condition, "c"))

    assert why(str(act), {"inference": "rtc"}) is NotApplicable.NO_RTC
    assert why(str(smolvla), {"inference": "rtc"}) is None
    assert why("expert", {"policy_server": "local"}) is NotApplicable.BUILT_IN
    assert why(str(act), {"policy_server": "local"}) is None and why(str(act), {"latency": "measured"}) is None


def _records(sheets: Path, runs: Path) -> dict[str, tuple[list[dict], list]]:
    """Each cell's attempts without what timing decides, and each trial's posed arm trajectory."""
    import numpy as np

    timing = {"started_at", "ended_at", "duration_s", "loop", "artifacts", "chain_sha256"}
    cells = {}
    for path in sorted(sheets.glob("*.yaml")):
        attempts = [a.model_dump(mode="json", exclude=timing) for a in load_scoresheet(path).attempts]
        states = []
        for state in sorted((runs / path.stem).glob("trial-*/sim_state.npz")):
            with np.load(state) as npz:
                states.append(npz["posed_qpos"].copy())
        cells[path.stem] = (attempts, states)
    return cells


@pytest.mark.slow
@pytest.mark.ray_cluster
def test_a_sweep_whose_workers_keep_their_policies_scores_what_fresh_workers_score(tmp_path: Path, capfd) -> None:
    import re

    import numpy as np

    from harness.app.sweep_command import run_sweep
    from harness.models.defaults import DEFAULT_START_POSE
    from harness.models.protocol import JOINT_NAMES

    protocols = []
    for kind, seed in (("--randomized", "5"), ("--fixed", "0")):
        protocols.append(tmp_path / f"{kind[2:]}.yaml")
        # two trials a cell (a kept worker's second trial of a cell after its first) and a second of each: the
        # outcomes are compared trial for trial, and the arms still move (below); three 2-s trials cost the
        # fresh sweep's one Ray worker per cell twice the time for the same comparison
        assert main(["protocol", "new", kind, "--n", "2", "--seed", seed, "--time-limit-s", "1",
                     "-o", str(protocols[-1])]) == 0
    for step, pan in (("000002", 25.0), ("000004", -25.0)):   # image-dependent ACTs that move the arm
        mean = [DEFAULT_START_POSE[n] + (pan if n == "shoulder_pan" else 0.0) for n in JOINT_NAMES]
        save_tiny_act(tmp_path / "train" / "act_cube" / "checkpoints" / step / "pretrained_model", height=72,
                      width=96, action_mean=mean)
    spec = _write(tmp_path / "sweep.yaml", {"name": "kept", "checkpoints": ["train/act_cube"],
                                            "protocols": [p.name for p in protocols],
                                            "conditions": [{"no_video": True}]})
    runs = {}
    # kept: every trial on one Ray worker, kept from cell to cell; fresh: every cell's checkpoint loaded and scene
    # built afresh, by a worker of its own, the driver's (a Ray worker started per cell scores what the driver's
    # scores: test_parallel_run.py; here it cost four more starts of a process importing torch and LeRobot)
    for name, driver, ran_by in (("kept", False, "2 by ray-1"), ("fresh", True, "2 by driver")):
        assert run_sweep(spec, False, None, tmp_path / f"runs-{name}", tmp_path / f"sheets-{name}",
                         keep_workers=name == "kept", driver_worker=driver) == 0
        runs[name] = capfd.readouterr().err
        assert re.findall(r"\d+ attempts in [^(]+\(([^;]+);", runs[name]) == [ran_by] * 4, runs[name]
    kept = _records(tmp_path / "sheets-kept" / "kept", tmp_path / "runs-kept" / "kept")
    fresh = _records(tmp_path / "sheets-fresh" / "kept", tmp_path / "runs-fresh" / "kept")
    assert sorted(kept) == sorted(fresh) and len(kept) == 4
    for cell in kept:
        assert kept[cell][0] == fresh[cell][0], cell   # outcomes, judges, anatomy: attempt for attempt
        assert len(kept[cell][1]) == len(fresh[cell][1]) == 2
        for a, b in zip(kept[cell][1], fresh[cell][1], strict=True):
            np.testing.assert_array_equal(a, b)
    moved = max(np.abs(trial[-1] - trial[0]).max() for _, trials in kept.values() for trial in trials)
    assert moved > 0.05   # equal trajectories are not arms standing still
    # one Ray worker for the four cells: each checkpoint loaded once, the scene built once
    assert "4 cells run: this process loaded 2 checkpoints and built 0 scenes; Ray worker 1: 2 and 1" in runs["kept"]
    assert "cells run" not in runs["fresh"]
