from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessInputError, StaleRunError
from harness.models.scoresheet import (
    LOCKED_FIELDS,
    OPTIONAL_LOCKED_FIELDS,
    check_resumable,
    load_scoresheet,
    policy_fingerprint,
)
from tests.helpers import fake_attempt, locked_sheet, replace_once


def _rewrite(path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_lock_covers_every_promised_field(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    assert list(type(sheet.locked).model_fields) == list(LOCKED_FIELDS + OPTIONAL_LOCKED_FIELDS)
    assert list(sheet.locked_data) == [*LOCKED_FIELDS, "journal"]   # every new sheet locks its format and id
    assert sheet.locked_data["journal"]["format"] == 2
    assert sheet.locked.trial_count == 3
    assert sheet.locked.taxonomy == ["success", "no_grasp", "grasped_then_dropped", "wrong_placement", "void"]
    assert load_scoresheet(sheet.path).lock["sha256"] == sheet.lock["sha256"]


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("task", lambda d: d["locked"].update(task="Pick up the cube.")),
        ("success_definition", lambda d: d["locked"].update(success_definition="in or near the bowl")),
        ("taxonomy", lambda d: d["locked"]["taxonomy"].pop()),
        ("trial_count", lambda d: d["locked"].update(trial_count=2)),
        ("trials", lambda d: d["locked"]["trials"][1].update(dx_cm=0.0)),
        ("policy", lambda d: d["locked"]["policy"].update(fingerprint="builtin:other")),
        ("robot", lambda d: d["locked"].update(robot="so101")),
    ],
)
def test_hand_edit_of_a_locked_field_is_refused_by_name(tmp_path, field, change) -> None:
    sheet = locked_sheet(tmp_path)
    _rewrite(sheet.path, change)
    with pytest.raises(StaleRunError) as err:
        load_scoresheet(sheet.path)
    assert f"locked.{field}" in err.value.one_line()


def test_hand_edit_of_a_scored_trial_is_refused(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "no_grasp"))
    sheet.add_attempt(fake_attempt(2, 1, "success", placement_error_cm=1.0))
    _rewrite(sheet.path, lambda d: d["records"][0]["attempt"].update(outcome="success", failure_mode=None))
    with pytest.raises(StaleRunError, match=r"attempts\[0\]"):
        load_scoresheet(sheet.path)


def test_voided_attempts_stay_and_the_trial_is_retried(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "void", void_reason="camera dropout"))
    assert sheet.pending_trials() == [1, 2, 3]
    assert sheet.next_attempt_number(1) == 2
    sheet.add_attempt(fake_attempt(1, 2, "success"))
    reloaded = load_scoresheet(sheet.path)
    assert reloaded.pending_trials() == [2, 3]
    assert [(a.trial_index, a.attempt, a.outcome) for a in reloaded.attempts] == [(1, 1, "void"), (1, 2, "success")]


def test_a_scored_trial_is_never_rescored(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    sheet.add_attempt(fake_attempt(1, 1, "success"))
    with pytest.raises(HarnessInputError, match="already scored"):
        sheet.add_attempt(fake_attempt(1, 2, "no_grasp"))
    with pytest.raises(HarnessInputError, match="not in the locked trial list"):
        sheet.add_attempt(fake_attempt(7, 1, "success"))


def test_void_needs_a_reason_and_labels_stay_in_the_taxonomy() -> None:
    with pytest.raises(HarnessInputError, match="reason"):
        fake_attempt(1, 1, "void")
    with pytest.raises(HarnessInputError, match="taxonomy"):
        fake_attempt(1, 1, "almost")


def test_resume_refuses_a_changed_protocol(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    protocol = tmp_path / "small.yaml"
    protocol.write_text(replace_once(protocol.read_text(), "episode_time_limit_s: 12.0", "episode_time_limit_s: 30.0"))
    with pytest.raises(StaleRunError, match="protocol changed"):
        check_resumable(load_scoresheet(sheet.path), protocol, None)


def test_resume_refuses_a_changed_checkpoint(tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights-v1")
    sheet = locked_sheet(tmp_path, policy=str(ckpt))
    assert sheet.locked.policy.fingerprint == policy_fingerprint(str(ckpt))
    check_resumable(load_scoresheet(sheet.path), tmp_path / "small.yaml", None)
    (ckpt / "model.safetensors").write_bytes(b"weights-v2")
    with pytest.raises(StaleRunError, match="checkpoint"):
        check_resumable(load_scoresheet(sheet.path), tmp_path / "small.yaml", None)


labels = st.sampled_from(["success", "no_grasp", "grasped_then_dropped", "wrong_placement", "void"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(st.tuples(st.integers(1, 3), labels, st.floats(0, 20, allow_nan=False)), max_size=12))
def test_any_sequence_of_attempts_round_trips_and_verifies(tmp_path_factory, sequence) -> None:
    sheet = locked_sheet(tmp_path_factory.mktemp("sheet"))
    for trial, label, err in sequence:
        if sheet.final_attempt(trial) is not None:
            continue
        extra = {"void_reason": "operator bumped the table"} if label == "void" else {"placement_error_cm": err}
        sheet.add_attempt(fake_attempt(trial, sheet.next_attempt_number(trial), label, **extra))
    reloaded = load_scoresheet(sheet.path)
    assert [a.model_dump() for a in reloaded.attempts] == [a.model_dump() for a in sheet.attempts]
    assert reloaded.pending_trials() == sheet.pending_trials()
