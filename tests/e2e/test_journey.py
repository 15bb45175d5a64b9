"""The researcher's journey of docs/journey.md without workarounds: record with `--record-dataset`,
validate, coverage against the known starts, split, `lerobot-train` on the train split, evaluate the
checkpoint (its scoresheet named by run and step), offline-eval on the held-out episodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.app.sheet import sheet_path
from harness.models.protocol import load_protocol
from harness.models.run_request import RunRequest
from tests.helpers import REPO


def test_each_checkpoint_of_a_training_run_gets_its_own_default_scoresheet(tmp_path) -> None:
    protocol_path = REPO / "tests" / "data" / "small.yaml"
    protocol = load_protocol(protocol_path)
    names = []
    for step in ("000150", "000300"):
        request = RunRequest(protocol=protocol_path,
                             policies=(str(tmp_path / "outputs/act_demos/checkpoints" / step / "pretrained_model"),))
        names.append(sheet_path(request, protocol, protocol_path).name)
    assert names == ["small-act_demos-step150.yaml", "small-act_demos-step300.yaml"]
    request = RunRequest(protocol=protocol_path, policies=("expert",))
    assert sheet_path(request, protocol, protocol_path).name == "small-expert.yaml"


def _short_protocol(folder: Path, seconds: float, trials: int) -> Path:
    data = yaml.safe_load((REPO / "tests" / "data" / "small.yaml").read_text())
    data["episode_time_limit_s"] = seconds
    data["trials"] = [{"index": i + 1, "dx_cm": dx, "dy_cm": dy}
                      for i, (dx, dy) in enumerate([(0.0, 0.0), (3.0, -2.0), (-2.0, 3.0), (4.0, 2.0)][:trials])]
    path = folder / "small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _calibrate(workdir: Path) -> Path:
    """What `harness measure --auto` saves: the rim on an empty 640x480 top frame of the simulated scene."""
    import harness.sim  # noqa: F401  (headless GL before mujoco)
    from harness.models.defaults import DEFAULT_START_POSE
    from harness.sim.world import SimWorld
    from harness.vision.calibration import BowlCalibration
    from harness.vision.rim import find_rim

    world = SimWorld()
    try:
        world.set_arm(DEFAULT_START_POSE)
        world.place_cube((0.20, 0.70), 0.0)
        frame = world.render("top", 640, 480)
    finally:
        world.close()
    path = workdir / "calibration" / "bowl_top.yaml"
    BowlCalibration(find_rim(frame), 11.5, "auto", "", "").save(path, frame)
    return path


@pytest.mark.slow
def test_record_check_train_evaluate_without_workarounds(workdir, capsys, harness_cli) -> None:
    from harness.cli import main

    protocol = _short_protocol(workdir / "protocols", seconds=1.0, trials=4)
    data = workdir / "data" / "demos"
    # 1. record: the default size is small enough to train on a CPU
    assert main(["run", str(protocol), "--headless", "--no-video", "--record-dataset", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"dataset: {data}" in out
    info = json.loads((data / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.top"]["shape"] == [96, 128, 3] and info["total_episodes"] == 4

    # 2. validate, 3. coverage against the starts the run used
    assert main(["dataset", "validate", str(data)]) == 0
    calibration = _calibrate(workdir)
    assert main(["dataset", "coverage", str(data), "--calibration", str(calibration), "--fovy-deg", "45",
                 "--truth", "scoresheets/small-expert.yaml", "-o", str(workdir / "coverage.png")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("against the known starts"))
    max_error = float(line.split("max ")[1].split(" cm")[0])
    assert max_error <= 0.5, line

    # 4. split, 5. lerobot-train a few steps on the train split
    assert main(["dataset", "split", str(data), "--every", "4"]) == 0
    split = json.loads((data / "meta" / "splits_every10.json").read_text())
    assert split == {"train": [1, 2, 3], "val": [0]}
    train = workdir / "outputs" / "act_demos"
    command = [
        "--policy.type=act", "--dataset.repo_id=local/demos",
        f"--dataset.root={data}", f"--dataset.episodes={json.dumps(split['train'])}", "--dataset.video_backend=pyav",
        "--policy.push_to_hub=false", "--wandb.enable=false", "--policy.device=cpu",
        "--policy.pretrained_backbone_weights=null", "--policy.dim_model=32", "--policy.n_heads=2",
        "--policy.dim_feedforward=64", "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1",
        "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8", "--policy.chunk_size=10",
        "--policy.n_action_steps=10", "--steps=2", "--batch_size=2", "--save_freq=1", "--num_workers=0",
        f"--output_dir={train}", "--job_name=act_demos",
    ]
    done = harness_cli.run(command, module="lerobot.scripts.lerobot_train", capture_output=True, text=True,
                           timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})   # forked: it trains as a fresh one
    assert done.returncode == 0, done.stderr[-2000:]
    step1 = train / "checkpoints" / "000001" / "pretrained_model"
    step2 = train / "checkpoints" / "000002" / "pretrained_model"
    assert (step1 / "config.json").is_file() and (step2 / "config.json").is_file()

    # 6. evaluate a checkpoint on the arm: its scoresheet is named by run and step
    assert main(["run", str(protocol), "--headless", "--no-video", "--policy", str(step2), "--max-trials", "1"]) == 0
    assert (workdir / "scoresheets" / "small-act_demos-step2.yaml").is_file()

    # 7. offline-eval both checkpoints on the held-out episode
    capsys.readouterr()
    assert main(["offline-eval", "--dataset", str(data), "--checkpoints", str(step1), str(step2),
                 "--frames", "5"]) == 0
    out = capsys.readouterr().out
    assert "| act_demos-step1 |" in out and "| act_demos-step2 |" in out and "pretrained_model" not in out


def test_headless_lines_give_each_trials_time_and_an_eta() -> None:
    import io

    from harness.models.protocol import Trial
    from harness.models.taxonomy import Void, VoidKind
    from harness.run.terminal import TerminalObserver
    from tests.helpers import fake_attempt

    out = io.StringIO()
    observer = TerminalObserver(operator_scores=False, out=out)
    observer.trial_started(Trial(index=1, dx_cm=0.0, dy_cm=0.0), 1, done=0, total=4)
    observer.trial_scored(fake_attempt(1, 1, "success", duration_s=10.0))
    observer.trial_started(Trial(index=2, dx_cm=1.0, dy_cm=0.0), 1, done=1, total=4)
    observer.trial_scored(fake_attempt(2, 1, "void", duration_s=20.0,
                                      void_reason=Void(VoidKind.OPERATOR_VOID, "cube slipped").reason))
    observer.trial_started(Trial(index=4, dx_cm=1.0, dy_cm=0.0), 1, done=3, total=4)
    observer.trial_scored(fake_attempt(4, 1, "success", duration_s=12.0))
    first, second, last = out.getvalue().splitlines()
    assert first.endswith("[0 steps, 10.0 s; 3 left, about 0 min 30 s]")
    assert second.endswith("20.0 s; 3 left, about 0 min 45 s]")      # a void is retried: still 3 left
    assert last.endswith("[0 steps, 12.0 s]")


@pytest.mark.slow
def test_third_party_output_goes_to_the_log_and_harness_lines_to_the_terminal(tmp_path) -> None:
    code = (
        "import logging, os, sys\n"
        "from pathlib import Path\n"
        "from harness.app.third_party_log import third_party_output_to\n"
        "logging.basicConfig(stream=sys.stderr)\n"
        "with third_party_output_to(Path(sys.argv[1])):\n"
        "    os.write(2, b'x264 [info]: profile High\\n')\n"
        "    logging.getLogger('lerobot.utils.import_utils').warning('torchcodec cannot be loaded')\n"
        "    logging.getLogger('harness.run').warning('our own warning')\n"
        "    print('harness: a line of ours', file=sys.stderr)\n"
        "    import datasets\n"
        "    assert not datasets.is_progress_bar_enabled()\n"
        "os.write(2, b'after\\n')\n"
    )
    log = tmp_path / "third_party.log"
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "x264" not in done.stderr and "torchcodec" not in done.stderr
    assert "harness: a line of ours" in done.stderr and "our own warning" in done.stderr and "after" in done.stderr
    text = log.read_text()
    assert "x264 [info]: profile High" in text and "torchcodec cannot be loaded" in text
    assert "our own warning" not in text
