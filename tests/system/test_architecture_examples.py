"""The five worked examples in docs/developing.md compile and do what the text says."""

from __future__ import annotations

import argparse
import re
import types

import pytest

from harness.models.protocol import load_protocol
from harness.models.sheet_records import attempt_from_label
from harness.policies.base import TrialContext
from harness.reports.blocks import Table, to_html
from tests.helpers import REPO, locked_sheet

DOC = REPO / "docs" / "developing.md"
NAMES = ("new-robot", "new-policy", "new-report-block", "new-run-flag", "new-cli-command")


def example(name: str) -> types.ModuleType:
    """The example's code block, executed as a module of its own."""
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"docs/developing.md lost the '{name}' example"
    module = types.ModuleType(f"architecture_example_{name.replace('-', '_')}")
    exec(compile(match.group(1), f"docs/developing.md#{name}", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", NAMES)
def test_every_example_compiles(name) -> None:
    example(name)


def test_a_new_robot_type_is_guarded_and_its_torque_released(tmp_path) -> None:
    robots = example("new-robot")
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml")
    guard = robots.make_bench_robot({}, protocol)
    guard.send_action({"gripper.pos": 40.0})
    assert guard.get_observation()["gripper.pos"] == 40.0
    guard.emergency_stop()
    assert guard.robot.torque is False


def test_a_new_policy_holds_the_start_pose(tmp_path) -> None:
    policies = example("new-policy")
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml")
    policy = policies.HoldStartPolicy()
    policy.reset(TrialContext(protocol, protocol.trials[0]))
    action = policy.select_action({})
    assert action["shoulder_pan.pos"] == protocol.start_pose["shoulder_pan"]


def test_a_new_report_block_renders(tmp_path) -> None:
    blocks = example("new-report-block")
    sheet = locked_sheet(tmp_path)
    stamp = {"started_at": "2026-11-30T10:00:00.000+00:00", "ended_at": "2026-11-30T10:00:07.000+00:00",
             "duration_s": 7.0}
    sheet.add_attempt(attempt_from_label("void", trial_index=1, attempt=1, void_reason="cube bumped", **stamp))
    sheet.add_attempt(attempt_from_label("success", trial_index=1, attempt=2, **stamp))
    result = blocks.attempts_per_trial_blocks(sheet)
    table = next(b for b in result if isinstance(b, Table))
    assert table.rows[0] == ["1", "2", "1"]
    assert "Attempts per trial" in to_html("report", result)


def test_a_new_cli_command_parses_runs_and_refuses_bad_input(capsys) -> None:
    from harness.errors import HarnessInputError

    command = example("new-cli-command")
    parser = argparse.ArgumentParser(prog="harness")
    command.register(parser.add_subparsers(dest="command"))
    protocol = str(REPO / "tests" / "data" / "small.yaml")
    args = parser.parse_args(["count-trials", protocol])
    assert args.func(args) == 0
    assert "3 trials" in capsys.readouterr().out
    bad = parser.parse_args(["count-trials", protocol, "--at-least", "0"])
    with pytest.raises(HarnessInputError) as err:
        bad.func(bad)
    assert err.value.exit_code == 2


def test_a_new_run_flag_gets_its_type_and_default_from_its_field_and_is_shown_as_typed(capsys) -> None:
    from harness.app.commands.run import add_run_flags
    from harness.models.run_request import collect_flags

    module = example("new-run-flag")
    part = module.ExampleRequest
    part.model_rebuild(_types_namespace=vars(module))   # its annotations are read from the example's namespace
    flags = {spec.dest: spec for spec in collect_flags(part, part())}
    parser = argparse.ArgumentParser(prog="harness run")
    add_run_flags(parser, flags=flags)
    assert parser.parse_args([]).settle_steps == 50
    assert parser.parse_args(["--settle-steps", "7"]).settle_steps == 7
    with pytest.raises(SystemExit):
        parser.parse_args(["--settle-steps", "many"])
    assert "invalid int value: 'many'" in capsys.readouterr().err
    assert "physics steps the cube settles for" in parser.format_help()
    spec = flags["settle_steps"]
    assert spec.typed(part(settle_steps=7)) == ["--settle-steps=7"]
