"""`harness report SHEET --model-card CHECKPOINT/README.md`: the result in the card's `model-index`, read back by
huggingface_hub's own model-card parser, the rest of the card untouched, and a second write changing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from harness import __version__
from harness.cli import main
from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet
from harness.stats.estimates import wilson_interval
from tests.helpers import fake_attempt, refused, small_protocol_copy

CARD = """---
license: apache-2.0
library_name: lerobot
tags:
- robotics
- act   # the policy type
pipeline_tag: robotics
---

# ACT on the SO-101

Trained on 50 demonstrations at one spot.
"""


def _sheet(workdir: Path, labels: list[str], name: str = "small") -> Path:
    protocol = small_protocol_copy(workdir / "protocols")
    protocol.write_text(protocol.read_text().replace("name: small", f"name: {name}"))
    sheet = lock_scoresheet(workdir / "sheet.yaml", build_locked(load_protocol(protocol), protocol, "expert", "sim"),
                            {})
    for i, label in enumerate(labels, start=1):
        sheet.add_attempt(fake_attempt(i, 1, label))
    return sheet.path


def _harness_results(card: ModelCard) -> list:
    return [r for r in card.data.eval_results or [] if r.dataset_type == "harness-protocol"]


def test_the_card_gets_the_success_rate_with_its_interval_and_keeps_everything_else(workdir: Path, capsys) -> None:
    sheet = _sheet(workdir, ["success", "no_grasp", "success"], name="six-cm-disc")
    checkpoint = workdir / "act" / "pretrained_model"
    checkpoint.mkdir(parents=True)
    path = checkpoint / "README.md"
    path.write_text(CARD)

    assert main(["report", str(sheet), "--model-card", str(path)]) == 0
    assert "2/3 = 66.7%" in capsys.readouterr().out
    card = ModelCard.load(path)
    (result,) = _harness_results(card)
    locked = load_scoresheet(sheet).locked
    low, high = wilson_interval(2, 3)
    assert result.task_type == "robotics" and result.task_name == locked.task
    # the protocol's own name (the file is the one locked) and its hash
    assert result.dataset_name == "six-cm-disc" and result.dataset_revision == locked.protocol_sha256
    assert result.dataset_config == "sim"
    assert result.metric_type == "success_rate" and result.metric_value == pytest.approx(2 / 3, abs=1e-4)
    assert result.metric_args["trials"] == 3 and result.metric_args["successes"] == 2
    assert result.metric_args["wilson95_low"] == pytest.approx(low, abs=1e-4)
    assert result.metric_args["wilson95_high"] == pytest.approx(high, abs=1e-4)
    assert result.metric_args["harness_version"] == __version__
    assert card.data.model_name == "act"
    # the rest of the card, as it was: the body byte for byte, the other metadata lines (comment included)
    text = path.read_text()
    assert text.endswith(CARD.split("---\n", 2)[2])
    assert CARD.split("---\n")[1] in text
    assert card.data.license == "apache-2.0" and card.data.tags == ["robotics", "act"]

    before = path.read_bytes()
    assert main(["report", str(sheet), "--model-card", str(path)]) == 0   # again: nothing changes
    assert path.read_bytes() == before


def test_a_later_run_of_the_same_protocol_replaces_its_result_and_others_stay(workdir: Path) -> None:
    path = workdir / "README.md"
    other = {"task": {"type": "robotics", "name": "push"}, "dataset": {"type": "pusht", "name": "PushT"},
             "metrics": [{"type": "pc_success", "value": 40.0}]}
    path.write_text("---\n" + yaml.safe_dump({"model-index": [{"name": "mine", "results": [other]}]}) + "---\nbody\n")
    first = _sheet(workdir, ["no_grasp"])
    assert main(["report", str(first), "--model-card", str(path)]) == 0
    load_scoresheet(first).add_attempt(fake_attempt(2, 1, "success"))   # the run went on
    assert main(["report", str(first), "--model-card", str(path)]) == 0
    card = ModelCard.load(path)
    (ours,) = _harness_results(card)
    assert ours.metric_value == 0.5 and ours.metric_args["trials"] == 2
    assert [r.dataset_type for r in card.data.eval_results] == ["pusht", "harness-protocol"]
    assert card.data.model_name == "mine" and card.text == "body\n"


def test_a_card_without_metadata_gets_its_front_matter_and_keeps_its_text(workdir: Path) -> None:
    path = workdir / "README.md"
    path.write_text("# just text\n")
    assert main(["report", str(_sheet(workdir, ["success"])), "--model-card", str(path)]) == 0
    card = ModelCard.load(path)
    assert card.text == "# just text\n" and len(_harness_results(card)) == 1


def test_nothing_scored_or_a_card_in_no_folder_is_refused_in_one_line(workdir: Path, capsys) -> None:
    empty = _sheet(workdir, [])
    (workdir / "README.md").write_text(CARD)
    assert "no trials scored yet" in refused(["report", str(empty), "--model-card", "README.md"], workdir, capsys)
    assert "does not exist" in refused(["report", str(empty), "--model-card", "nowhere/README.md"], workdir, capsys)


@pytest.fixture
def comparison(workdir: Path, capsys) -> tuple[Path, str]:
    """Two trials of a blind comparison (expert against replay) on the simulated arm; its sheet and what it printed."""
    from harness.app.run_command import run_request
    from harness.models.run_request import RunRequest

    data = yaml.safe_load(small_protocol_copy(workdir / "protocols").read_text())
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.6,
                             "max_trials_per_arm": 47}
    data["episode_time_limit_s"] = 6.0
    protocol = workdir / "protocols" / "cmp.yaml"
    protocol.write_text(yaml.safe_dump(data, sort_keys=False))
    sheet_path = workdir / "cmp.yaml"
    assert run_request(RunRequest(protocol=protocol, policies=("expert", "replay"), robot={"kind": "sim"},
                                  headless=True, max_trials=2, scoresheet=sheet_path, runs_dir=workdir / "runs",
                                  evidence={"no_video": True})) == 0
    return sheet_path, capsys.readouterr().out


def test_a_blind_comparison_writes_only_the_cards_own_arm_once_unblinded(comparison, workdir: Path, capsys) -> None:
    from harness.models.comparison import unseal

    sheet_path, started = comparison
    # the start line counts as the report does (issue 60): per arm and in all, never a per-arm number alone
    design = load_scoresheet(sheet_path).locked.comparison.design
    assert (f"at most 47 trials per arm, 94 in all (a fixed-sample design: {design.fixed_sample_pairs} per arm, "
            f"{2 * design.fixed_sample_pairs} in all, as the report counts them)") in started, started
    card = workdir / "README.md"
    card.write_text(CARD)
    said = refused(["report", str(sheet_path), "--model-card", str(card)], workdir, capsys)
    assert "still open and blind" in said

    # neither arm is the checkpoint whose card this is (built-ins have none): refused, naming the arms,
    # instead of writing the replay arm's rate onto this checkpoint's card
    before = card.read_bytes()
    capsys.readouterr()
    assert main(["report", str(sheet_path), "--model-card", str(card), "--unblind"]) == 2
    (said,) = capsys.readouterr().err.strip().splitlines()
    mapping = unseal(load_scoresheet(sheet_path).locked.comparison.sealed)
    assert "no arm's policy is the checkpoint" in said and all(f"{code} {mapping[code].ref}" in said for code in "AB")
    assert card.read_bytes() == before


def test_only_the_arm_whose_policy_is_the_cards_checkpoint_is_the_cards(tmp_path: Path, monkeypatch) -> None:
    """The card is CHECKPOINT/README.md: an arm is that checkpoint by its locked folder or by its files."""
    from harness.models.scoresheet import policy_fingerprint
    from harness.reports.model_card import is_checkpoint

    monkeypatch.chdir(tmp_path)
    mine, other = tmp_path / "my_act", tmp_path / "other_act"
    for folder, weights in ((mine, b"1"), (other, b"2")):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(weights)
    locked = policy_fingerprint("my_act")
    assert is_checkpoint("my_act", locked, mine)                     # the folder it was locked from
    assert is_checkpoint("elsewhere/copy", locked, mine)             # a copy of its files
    assert not is_checkpoint("other_act", policy_fingerprint("other_act"), mine)
    assert not is_checkpoint("replay", "builtin:replay", mine)
    (tmp_path / "replay").mkdir()
    assert not is_checkpoint("replay", "builtin:replay", tmp_path / "replay")   # a built-in, even beside its name


def test_the_card_says_written_then_up_to_date(workdir: Path, capsys) -> None:
    sheet = _sheet(workdir, ["success"])
    path = workdir / "README.md"
    path.write_text(CARD)
    assert main(["report", str(sheet), "--model-card", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"model-index of {path}: updated"
    assert main(["report", str(sheet), "--model-card", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"model-index of {path}: up to date (unchanged)"
    fresh = workdir / "fresh" / "README.md"
    fresh.parent.mkdir()
    assert main(["report", str(sheet), "--model-card", str(fresh)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"model-index of {fresh}: written"


def test_the_cards_own_metadata_and_others_results_keep_every_byte(workdir: Path) -> None:
    """Flow-style lists, comments and quoting stay as written; a result that is not harness's stays as written
    (extra fields included), only harness's own results are added to model-index."""
    other = ("model-index:\n- name: my_act\n  results:\n  - task: {type: robotics, name: push}\n"
             "    dataset: {type: pusht, name: PushT, split: test}\n"
             "    metrics:\n    - {type: pc_success, value: 40.0, verified: false}\n"
             "    source: {name: my eval, url: 'https://example.org/x'}\n")
    head = "license: 'apache-2.0'\ntags: [robotics, act]   # flow style\ndatasets: [\"lerobot/x\"]\n"
    path = workdir / "README.md"
    path.write_text(f"---\n{head}{other}---\nbody\n")
    assert main(["report", str(_sheet(workdir, ["success"])), "--model-card", str(path)]) == 0
    text = path.read_text()
    assert text.startswith(f"---\n{head}") and text.endswith("---\nbody\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    (kept, ours) = meta["model-index"][0]["results"]
    assert kept == yaml.safe_load(other)["model-index"][0]["results"][0]
    assert ours["dataset"]["type"] == "harness-protocol"
    assert len(_harness_results(ModelCard.load(path))) == 1
