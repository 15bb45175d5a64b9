"""A policy named on the Hugging Face Hub (`--policy ORG/NAME[@REVISION]`), from a Hub cache laid out here.

No network: the cache is built the way huggingface_hub lays one out (`models--ORG--NAME/snapshots/<commit>/`,
`refs/main`), and the commands run with `HF_HUB_OFFLINE=1` (conftest sets it for every test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.errors import HarnessInputError
from harness.models.checkpoint import HubRef, checkpoint_name, hub_ref
from harness.models.locked import LockedPolicy
from harness.models.scoresheet import load_scoresheet
from harness.models.sweep_spec import expand_checkpoints
from harness.policies.hub import checkpoint_folder, pinned_ref, policy_fingerprint
from tests.helpers import REPO, small_protocol_copy

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def cached_snapshot(cache: Path, repo_id: str, commit: str, files: dict[str, bytes] | None = None,
                    branch: str | None = "main") -> Path:
    """One snapshot in a Hub cache, as huggingface_hub stores it (content in blobs/, linked from snapshots/)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name, content in (files or {"config.json": b'{"type": "act"}'}).items():
        blob = repo / "blobs" / f"{commit[:8]}-{name.replace('/', '_')}"
        blob.write_bytes(content)
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).symlink_to(os.path.relpath(blob, (snapshot / name).parent))
    if branch:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / branch).write_text(commit)
    return snapshot


def test_a_hub_id_is_told_from_folders_and_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert hub_ref("lerobot/act_so101") == HubRef("lerobot/act_so101", None)
    assert hub_ref("user/act_so101@v1.0") == HubRef("user/act_so101", "v1.0")
    assert hub_ref("expert") is None and hub_ref("runs/act/checkpoints/000300/pretrained_model") is None
    assert hub_ref("../act") is None and hub_ref("/abs/act") is None
    (tmp_path / "outputs" / "act").mkdir(parents=True)
    assert hub_ref("outputs/act") is None   # a folder that exists wins over the Hub id spelled the same
    assert checkpoint_name("user/act_so101@v1.0").label == "act_so101@v1.0"


def test_the_cache_resolves_a_branch_a_pinned_commit_and_never_downloads_offline(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    cached_snapshot(cache, "org/tiny", COMMIT_A)
    newer = cached_snapshot(cache, "org/tiny", COMMIT_B)   # main moved on (a later `hf download`)
    assert policy_fingerprint("org/tiny", cache, offline=True) == f"hub:org/tiny@{COMMIT_B}"
    assert policy_fingerprint(f"org/tiny@{COMMIT_A}", cache, offline=True) == f"hub:org/tiny@{COMMIT_A}"
    assert checkpoint_folder("org/tiny", cache, offline=True) == str(newer)
    assert (Path(checkpoint_folder("org/tiny", cache, offline=True)) / "config.json").read_bytes() == b'{"type": "act"}'
    locked = LockedPolicy(ref="org/tiny", fingerprint=f"hub:org/tiny@{COMMIT_A}")
    assert pinned_ref(locked) == f"org/tiny@{COMMIT_A}"   # a resume or a worker loads the locked commit
    with pytest.raises(HarnessInputError) as err:
        policy_fingerprint("org/missing@v2", cache, offline=True)
    assert "org/missing@v2" in str(err.value) and "hf download org/missing --revision v2" in str(err.value)


def test_a_sweep_names_hub_checkpoints(tmp_path: Path) -> None:
    checkpoints = expand_checkpoints(["expert", "org/act_so101", "org/act_so101@step-20000"], tmp_path)
    assert [c.ref for c in checkpoints] == ["expert", "org/act_so101", "org/act_so101@step-20000"]
    assert [c.label for c in checkpoints] == ["expert", "act_so101", "act_so101@step-20000"]


def test_offline_with_nothing_cached_is_one_line_naming_the_download(workdir: Path, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert main(["run", str(protocol), "--policy", "nobody-here/no_such_policy@v3", "--headless"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "nobody-here/no_such_policy@v3" in err and "hf download nobody-here/no_such_policy --revision v3" in err
    assert not (workdir / "scoresheets").exists() or not any((workdir / "scoresheets").iterdir())


def _harness(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_a_tiny_act_runs_by_its_hub_id_and_a_moved_revision_refuses_the_resume(workdir: Path) -> None:
    from tests.tiny_policy import save_tiny_act

    saved = save_tiny_act(workdir / "saved")
    files = {str(p.relative_to(saved)): p.read_bytes() for p in sorted(saved.rglob("*")) if p.is_file()}
    cache = workdir / "hub-cache"
    cached_snapshot(cache, "someone/act_so101", COMMIT_A, files)
    shutil.rmtree(saved)
    protocol = small_protocol_copy(workdir / "protocols")
    data = yaml.safe_load(protocol.read_text())
    data["episode_time_limit_s"], data["trials"] = 1.0, data["trials"][:3]
    protocol.write_text(yaml.safe_dump(data, sort_keys=False))

    first = _harness(["run", str(protocol), "--policy", "someone/act_so101", "--headless", "--device", "cpu",
                      "--no-video", "--max-trials", "2"], workdir, cache)
    assert first.returncode == 0, first.stderr[-2000:]
    sheet = load_scoresheet(workdir / "scoresheets" / "small-act_so101.yaml")
    assert sheet.locked.policy.ref == "someone/act_so101"
    assert sheet.locked.policy.fingerprint == f"hub:someone/act_so101@{COMMIT_A}"
    assert [a.trial_index for a in sheet.scored_attempts()] == [1, 2]

    cached_snapshot(cache, "someone/act_so101", COMMIT_B, files)   # `hf download` fetched a new main
    moved = _harness(["run", str(protocol), "--policy", "someone/act_so101", "--headless", "--device", "cpu",
                      "--no-video", "--resume"], workdir, cache)
    assert moved.returncode == 2, moved.stderr[-2000:]
    line = moved.stderr.strip().splitlines()[-1]
    assert "revision moved" in line and COMMIT_B[:12] in line and COMMIT_A[:12] in line
    assert len(load_scoresheet(workdir / "scoresheets" / "small-act_so101.yaml").scored_attempts()) == 2


def test_a_protocol_names_a_hub_policy_in_its_run_section(workdir: Path, capsys) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    protocol.write_text(protocol.read_text().replace("policy: expert", "policy: nobody-here/in-a-protocol"))
    assert "nobody-here/in-a-protocol" in protocol.read_text()
    assert main(["run", str(protocol), "--headless"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "hf download nobody-here/in-a-protocol" in err
