"""`scripts/train_reference --quick`: the reference policy's recipe at toy size, with the network
off (an unreachable proxy and the hub offline), as CI runs it: collect, train two steps, then a
rerun with more steps resumes from the saved checkpoint instead of starting over, and a third run
finds everything done. A user following the recipe on a machine without network must get a
checkpoint and no traceback (no ImageNet download, no torchcodec failure pages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"}


def _run(out: Path, steps: int) -> str:
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(REPO), "PYTHON_BIN": str(Path(sys.executable).parent),
           "STEPS": str(steps), "SAVE_FREQ": "2"}
    done = subprocess.run(["bash", str(REPO / "scripts" / "train_reference"), "--quick", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Traceback" not in output, output[output.index("Traceback") - 2000:][:4000]
    return output


@pytest.mark.slow
def test_quick_reference_training_resumes_offline_without_tracebacks(tmp_path) -> None:
    out = tmp_path / "reference"
    first = _run(out, steps=2)
    run = out / "train" / "act-fixed"
    assert (run / "checkpoints" / "000002" / "pretrained_model" / "model.safetensors").is_file()
    config = json.loads((run / "checkpoints" / "000002" / "pretrained_model" / "config.json").read_text())
    assert config["pretrained_backbone_weights"] is None and config["device"] == "cpu"
    assert "resuming" not in first

    second = _run(out, steps=4)  # raising the steps continues the same run
    assert "resuming train/act-fixed from step 2" in second
    assert "stage collect: done (2 episodes)" in second
    state = json.loads((run / "checkpoints" / "last" / "training_state" / "training_step.json").read_text())
    assert state["step"] == 4
    assert (run / "checkpoints" / "000002").is_dir()  # the earlier checkpoint was kept, not retrained

    third = _run(out, steps=4)
    assert "stage train: done (4 steps)" in third and "Start offline training" not in third
