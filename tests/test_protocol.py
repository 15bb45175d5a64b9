from __future__ import annotations

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

REPO = Path(__file__).resolve().parents[1]


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
