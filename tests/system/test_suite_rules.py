"""The suite's own rules, read from its source (AST): every test can fail, and no test sleeps to wait.

A test function must reach a failure path: an `assert`, a `raise`, `pytest.raises`/`fail`/`warns`,
a mock's `assert_*`, or a call to a helper (any function defined under tests/, by name) that does.
A test that only runs code proves that it does not crash, and says nothing a user can rely on.

`time.sleep` in tests/ is allowed only in `helpers.wait_until` (the one polling loop, bounded by a
deadline) and where the pause itself is the behaviour under test (a person typing late, a 30 Hz loop's
period, a kill at a random moment): such a line, or the one above it, says so in a comment containing
`behaviour`.

LeRobot's policies, processors, dataset class and async-inference helpers (transformers, torchvision: about
10 s) are imported inside the test or helper that uses them, never at a module's top: every pytest-xdist worker
collects every module, so one such line made each worker pay for it in the inner loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import parsed_python

TESTS = Path(__file__).resolve().parents[1]
CHECKING_CALLS = {"raises", "fail", "warns", "deprecated_call"}   # pytest.<name>
HEAVY_LEROBOT = ("lerobot.policies", "lerobot.processor", "lerobot.configs", "lerobot.datasets",
                 "lerobot.async_inference", "lerobot.utils.feature_utils", "lerobot.envs", "transformers",
                 "torchvision")


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _called_names(node: ast.AST) -> set[str]:
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def _checks_directly(node: ast.AST) -> bool:
    for child in ast.walk(node):
        if isinstance(child, ast.Assert | ast.Raise):
            return True
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
            attr = child.func.attr
            if attr.startswith("assert_") or (attr in CHECKING_CALLS and isinstance(child.func.value, ast.Name)
                                             and child.func.value.id == "pytest"):
                return True
    return False


def _trees(folder: Path) -> dict[Path, ast.Module]:
    """Every Python file under `folder`, tiers' subfolders included (tests/unit/<package>/, tests/e2e/, ...)."""
    return {path: parsed_python(path) for path in sorted(folder.rglob("*.py"))}


def _shown(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def unfailing_tests(folder: Path) -> list[str]:
    """`file:line name` of each test function in `folder` that cannot fail."""
    trees = _trees(folder)
    functions = [f for tree in trees.values() for f in _functions(tree)]
    calls = {id(f): _called_names(f) for f in functions}   # walked once: the loop below repeats to a fixed point
    checking = {f.name for f in functions if _checks_directly(f)}
    changed = True
    while changed:                       # a helper that calls a checking helper checks too
        changed = False
        for f in functions:
            if f.name not in checking and calls[id(f)] & checking:
                checking.add(f.name)
                changed = True
    found = []
    for path, tree in trees.items():
        if not path.name.startswith("test_"):
            continue
        for f in _functions(tree):
            if f.name.startswith("test_") and not (_checks_directly(f) or calls[id(f)] & checking):
                found.append(f"{_shown(path, folder)}:{f.lineno} {f.name}")
    return found


def waiting_sleeps(folder: Path) -> list[str]:
    """`file:line` of each `time.sleep` outside `wait_until` whose line does not say it is the behaviour."""
    found = []
    for path, tree in _trees(folder).items():
        if path.name == Path(__file__).name:     # this file's samples of what is refused
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        allowed = {n.lineno for f in _functions(tree) if f.name == "wait_until" for n in ast.walk(f)
                   if hasattr(n, "lineno")}
        for node in ast.walk(tree):
            is_sleep = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep"
            text_sleep = isinstance(node, ast.Constant) and isinstance(node.value, str) and "time.sleep(" in node.value
            if not (is_sleep or text_sleep) or node.lineno in allowed:
                continue
            if not any("behaviour" in line for line in lines[node.lineno - 2:node.end_lineno]):
                found.append(f"{_shown(path, folder)}:{node.lineno}")
    return found


def heavy_top_level_imports(folder: Path) -> list[str]:
    """`file:line module` of each import of a heavy LeRobot part at a module's top level in `folder`."""
    found = []
    for path, tree in _trees(folder).items():
        for node in tree.body:
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{_shown(path, folder)}:{node.lineno} {name}" for name in names
                      if name.startswith(HEAVY_LEROBOT)]
    return found


def test_every_test_function_can_fail() -> None:
    assert not (found := unfailing_tests(TESTS)), (
        "test functions with no assert, raise, pytest.raises/fail or checking helper:\n" + "\n".join(found))


def test_tests_wait_on_conditions_not_sleeps() -> None:
    assert not (found := waiting_sleeps(TESTS)), (
        "time.sleep in tests/ outside helpers.wait_until, with no comment saying the pause is the behaviour "
        "under test (wait on a condition with a deadline: tests.helpers.wait_until):\n" + "\n".join(found))


def test_no_test_module_imports_lerobots_policies_at_its_top() -> None:
    assert not (found := heavy_top_level_imports(TESTS)), (
        "import these inside the test or helper that uses them (every xdist worker collects every module):\n"
        + "\n".join(found))


def test_the_rules_catch_a_test_that_cannot_fail_and_a_sleep_that_waits(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def expect_ok(x):\n    assert x\n\ndef indirect(x):\n    expect_ok(x)\n")
    (tmp_path / "test_sample.py").write_text(
        "import time\nimport pytest\nfrom helpers import indirect\n\n"
        "def test_runs_only():\n    sum([1, 2])\n\n"
        "def test_through_helpers():\n    indirect(1)\n\n"
        "def test_refused():\n    with pytest.raises(ValueError):\n        int('x')\n\n"
        "def test_waits():\n    time.sleep(0.1)\n    assert True\n\n"
        "def test_paced():\n    time.sleep(0.1)  # the loop's period is the behaviour\n    assert True\n")
    assert unfailing_tests(tmp_path) == ["test_sample.py:5 test_runs_only"]
    assert waiting_sleeps(tmp_path) == ["test_sample.py:16"]


def test_the_rule_catches_a_top_level_policy_import_and_allows_one_inside_a_test(tmp_path: Path) -> None:
    (tmp_path / "test_heavy.py").write_text(
        "import torch\nfrom lerobot.robots import Robot\nfrom lerobot.policies.act.modeling_act import ACTPolicy\n"
        "import transformers\n\ndef test_inside():\n    from lerobot.datasets.lerobot_dataset import LeRobotDataset\n"
        "    assert LeRobotDataset\n")
    assert heavy_top_level_imports(tmp_path) == ["test_heavy.py:3 lerobot.policies.act.modeling_act",
                                                 "test_heavy.py:4 transformers"]
