from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import HarnessInputError
from harness.models.protocol import (
    Scene,
    generate_randomized_trials,
    load_protocol,
    parse_protocol,
    workspace_problem,
)

REPO = Path(__file__).resolve().parents[3]


def _edit(text: str, change) -> str:
    data = yaml.safe_load(text)
    change(data)
    return yaml.safe_dump(data)


def test_shipped_protocols_are_valid() -> None:
    fixed = load_protocol(REPO / "protocols" / "fixed.yaml")
    randomized = load_protocol(REPO / "protocols" / "randomized.yaml")
    assert len(fixed.trials) == 50 and all(t.dx_cm == 0 and t.dy_cm == 0 for t in fixed.trials)
    assert len(randomized.trials) == 50
    assert randomized.generator is not None and randomized.generator.kind == "randomized"
    regenerated = generate_randomized_trials(
        randomized.scene, randomized.generator.n, randomized.generator.radius_cm,
        randomized.generator.min_spacing_cm, randomized.generator.seed, randomized.generator.max_yaw_deg,
    )
    assert regenerated == randomized.trials, "the shipped randomized protocol must be reproducible"


@pytest.mark.parametrize(
    ("change", "field_fragment"),
    [
        (lambda d: d.update(colour="red"), "colour"),
        (lambda d: d.pop("task"), "task"),
        (lambda d: d["scene"].update(bowl_diameter_cm=-1), "scene.bowl_diameter_cm"),
        (lambda d: d["trials"].append({"index": 1, "dx_cm": 0, "dy_cm": 0}), "duplicate trial index 1"),
        (lambda d: d["trials"].append({"index": 9, "dx_cm": 30, "dy_cm": 0}), "trials[3]"),
        (lambda d: d["trials"].append({"index": 9, "dx_cm": -4, "dy_cm": 19}), "bowl"),
        (lambda d: d.update(failure_taxonomy=["success", "no_grasp"]), "failure_taxonomy"),
        (lambda d: d["start_pose"].pop("gripper"), "start_pose"),
    ],
)
def test_bad_protocols_give_one_line_naming_the_field(small_protocol_text, change, field_fragment) -> None:
    with pytest.raises(HarnessInputError) as err:
        parse_protocol(_edit(small_protocol_text, change), "p.yaml")
    line = err.value.one_line()
    assert "\n" not in line
    assert line.startswith("p.yaml: ")
    assert field_fragment in line


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(HarnessInputError) as err:
        parse_protocol("name: a\ntrials: [\n", "bad.yaml")
    assert "bad.yaml" in err.value.one_line() and "malformed YAML" in err.value.one_line()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), radius=st.floats(3.0, 8.0),
       spacing=st.floats(0.0, 0.5))
def test_randomized_offsets_are_reproducible_placeable_and_spaced(seed, n, radius, spacing) -> None:
    scene = Scene()
    trials = generate_randomized_trials(scene, n, radius, spacing, seed)
    assert trials == generate_randomized_trials(scene, n, radius, spacing, seed)
    assert [t.index for t in trials] == list(range(1, n + 1))
    for i, a in enumerate(trials):
        assert workspace_problem(scene, a.dx_cm, a.dy_cm) is None
        assert math.hypot(a.dx_cm, a.dy_cm) <= radius + 0.1
        for b in trials[i + 1:]:
            assert math.hypot(a.dx_cm - b.dx_cm, a.dy_cm - b.dy_cm) >= spacing - 1e-9


@pytest.mark.slow
def test_impossible_spacing_fails_loudly() -> None:
    with pytest.raises(HarnessInputError, match="cannot fit"):
        generate_randomized_trials(Scene(), 50, 1.0, 2.0, seed=1)


def test_every_released_taxonomy_extends_the_one_before_and_names_only_labels() -> None:
    """The versions are history: one never edited, each the last plus new labels, every name a `Label`."""
    from harness.models.taxonomy import TAXONOMY, TAXONOMY_VERSION, TAXONOMY_VERSIONS, Label

    versions = sorted(TAXONOMY_VERSIONS)
    assert versions == list(range(1, len(versions) + 1)) and TAXONOMY_VERSIONS[TAXONOMY_VERSION] == TAXONOMY
    for earlier, later in itertools.pairwise(versions):
        assert TAXONOMY_VERSIONS[later][:len(TAXONOMY_VERSIONS[earlier])] == TAXONOMY_VERSIONS[earlier]
    assert TAXONOMY_VERSIONS[1] == ("success", "no_grasp", "grasped_then_dropped", "wrong_placement")
    assert all(Label(name) for listed in TAXONOMY_VERSIONS.values() for name in listed)


@pytest.mark.parametrize("rule, counted", [
    ({"min_difference": 0.2, "max_trials_per_arm": 176, "primary_outcome": "progress"}, "1 comparison"),
    ({"min_difference": 0.2, "max_trials_per_arm": 5}, "1 comparison"),
    ({"min_difference": 0.3, "max_trials_per_arm": 250, "comparisons": [["A", "B"], ["A", "C"], ["B", "C"]]},
     "3 comparison"),
])
def test_protocol_check_refuses_a_cap_the_run_would_refuse(small_protocol_text, tmp_path, capsys, rule,
                                                            counted) -> None:
    """`protocol check` applies the lock's own cap check: a protocol it passes is one `harness run` accepts."""
    from harness.cli import main
    from tests.helpers import refused

    data = yaml.safe_load(small_protocol_text)
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, **rule}
    path = tmp_path / "cmp.yaml"
    path.write_text(yaml.safe_dump(data))
    line = refused(["protocol", "check", str(path)], tmp_path, capsys)
    assert "stopping_rule.max_trials_per_arm" in line and "cannot reach power 0.8" in line and counted in line
    data["stopping_rule"]["max_trials_per_arm"] = int(line.split("max_trials_per_arm: ")[-1].split()[0])
    path.write_text(yaml.safe_dump(data))
    assert main(["protocol", "check", str(path)]) == 0
    assert "ok" in capsys.readouterr().out


def test_protocol_check_counts_the_comparisons_of_the_declared_policies(small_protocol_text, tmp_path,
                                                                         capsys) -> None:
    """Three policies are three comparisons: a cap enough for one is refused for them, and a protocol that does
    not name its policies is checked for two and says so."""
    from harness.cli import main
    from tests.helpers import refused

    data = yaml.safe_load(small_protocol_text)
    data["stopping_rule"] = {"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.2,
                             "max_trials_per_arm": 547}
    path = tmp_path / "cmp.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["protocol", "check", str(path)]) == 0
    assert "checked for 2 policies" in capsys.readouterr().out
    data.setdefault("run", {})["policies"] = ["expert", "replay", "ckpt"]
    path.write_text(yaml.safe_dump(data))
    assert "3 comparison(s)" in refused(["protocol", "check", str(path)], tmp_path, capsys)


def test_every_stopping_rule_in_the_docs_passes_the_lock_cap_check() -> None:
    """A doc's example rule runs as written: each yaml `stopping_rule:` block in docs/*.md gets a design."""
    import re

    from harness.models.protocol import StoppingRule
    from harness.stats import sequential

    rules = []
    for page in sorted((REPO / "docs").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and isinstance(data.get("stopping_rule"), dict):
                rules.append((page.name, StoppingRule.model_validate(data["stopping_rule"])))
    assert len(rules) >= 2
    for page, rule in rules:
        if rule.kind == "sequential":
            count = len(rule.comparisons or [("A", "B")])
            try:
                sequential.locked_design(rule.alpha, rule.power, rule.min_difference, count, rule.max_trials_per_arm)
            except ValueError as exc:
                pytest.fail(f"docs/{page}: {exc}")


@pytest.mark.parametrize("rule, expected", [
    ({"kind": "sequential", "max_trials_per_arm": True}, "(given True)"),
    ({"kind": "sequential", "alpha": 0.05, "power": 0.8, "min_difference": 0.2},
     "stopping_rule.max_trials_per_arm: required for kind sequential"),
])
def test_a_stopping_rule_error_says_what_was_given_once(small_protocol_text, rule, expected) -> None:
    data = yaml.safe_load(small_protocol_text)
    data["stopping_rule"] = rule
    with pytest.raises(HarnessInputError) as caught:
        parse_protocol(yaml.safe_dump(data), Path("p.yaml"))
    assert expected in str(caught.value) and "stopping_rule: stopping_rule" not in str(caught.value)
