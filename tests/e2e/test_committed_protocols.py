"""Every protocol the repository holds (shipped, results', tests' data; as `git ls-files` lists them, in a process
of its own) still loads when a failure label is added: the extension trap of issue 61 item 5."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from harness.models.protocol import load_protocol

REPO = Path(__file__).resolve().parents[2]


def _committed_protocols() -> list[Path]:
    """Every protocol file in the repository (shipped, results', tests' data): a YAML mapping with a protocol's
    required keys, found by what it holds rather than where it lies."""
    listed = subprocess.run(["git", "ls-files", "*.yaml", "*.yml"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    found = []
    for name in listed:
        text = (REPO / name).read_text(errors="replace")
        if "start_pose" not in text or "success_definition" not in text:
            continue
        data = yaml.safe_load(text)
        if isinstance(data, dict) and {"start_pose", "success_definition", "trials", "task"} <= set(data):
            found.append(REPO / name)
    return found


def test_a_new_failure_label_leaves_every_committed_protocol_loading_under_its_own_version(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Adding a label once made every protocol file fail to load (its taxonomy was matched exactly against the
    newest). With a version 2 that adds one, each committed protocol loads as the version it names and locks
    that version's labels, so its sheets stay comparable with those locked before; a protocol naming version 2
    loads as 2; a list no version wrote is still refused."""
    from harness.models import taxonomy
    from harness.models.protocol import Protocol
    from harness.models.scoresheet import build_locked

    protocols = _committed_protocols()
    assert len(protocols) >= 10 and REPO / "protocols" / "fixed.yaml" in protocols
    before = {path: build_locked(load_protocol(path), path, "expert", "sim")["taxonomy"] for path in protocols}
    newer = (*taxonomy.TAXONOMY_VERSIONS[taxonomy.TAXONOMY_VERSION], "slipped_at_release")
    monkeypatch.setitem(taxonomy.TAXONOMY_VERSIONS, taxonomy.TAXONOMY_VERSION + 1, newer)
    # the newest list is what a new protocol registers (the check must not match a file against it alone)
    monkeypatch.setattr(taxonomy, "TAXONOMY", newer)
    monkeypatch.setattr("harness.models.protocol.TAXONOMY", newer)
    for path in protocols:
        protocol = load_protocol(path)
        assert protocol.taxonomy_version == 1, path
        assert build_locked(protocol, path, "expert", "sim")["taxonomy"] == before[path], path
    data = yaml.safe_load((REPO / "protocols" / "fixed.yaml").read_text())
    data["failure_taxonomy"] = list(newer)
    assert Protocol.model_validate(data).taxonomy_version == taxonomy.TAXONOMY_VERSION + 1
    data["failure_taxonomy"] = ["success", "no_grasp"]
    with pytest.raises(Exception, match="failure_taxonomy: must be exactly one of the harness's taxonomies"):
        Protocol.model_validate(data)
