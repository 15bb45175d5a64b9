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

Tests live in their tier (docs/developing.md), each test module in one of tests/unit/<package>/, tests/system/,
tests/e2e/ and tests/realtime/: a test module that starts a process (`subprocess`,
`multiprocessing`, `os.fork`/`exec*`/`spawn*`/`system`, `sys.executable`, pexpect, Ray, tmux through one of
these, a helper under tests/ that does, `open_rig_process`, or a fixture of tests/conftest.py that does: the
CLI-process fixture) lives in tests/e2e/ or tests/realtime/; a module in tests/unit/ reads no wall clock and
sleeps not at all (its time is a `ManualClock`'s; `wait_until` on another thread's condition is allowed).
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


PROCESS_MODULES = ("subprocess", "multiprocessing", "pexpect", "ray", "libtmux")   # importing one is starting one
OS_PROCESS_CALLS = ("fork", "forkpty", "system", "popen", "posix_spawn", "exec", "spawn")   # os.<name...>
PRODUCT_PROCESS_STARTERS = frozenset({"open_rig_process"})   # harness functions whose one job is a process
PROCESS_TIERS = ("e2e", "realtime")
WALL_CLOCK = frozenset({"sleep", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"})


def _bound_modules(tree: ast.AST) -> set[str]:
    """The names `import x` / `import x as y` bind in a file: `ray.init` is Ray's only where `ray` is the module,
    not a test's local variable of that name."""
    return {alias.asname or alias.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
            for alias in n.names}


def _starts_directly(node: ast.AST, modules: set[str]) -> str | None:
    """What in `node` starts a process by itself, or None (`modules`: the module names its file binds)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            names = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
            for name in names:
                if name.split(".")[0] in PROCESS_MODULES:
                    return f"imports {name}"
        elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            if child.value.id in PROCESS_MODULES and child.value.id in modules:
                return f"{child.value.id}.{child.attr}"
            if child.value.id == "sys" and child.attr in ("executable", "_base_executable"):
                return f"sys.{child.attr}"
            if child.value.id == "os" and child.attr.startswith(OS_PROCESS_CALLS):
                return f"os.{child.attr}"
        elif isinstance(child, ast.Name) and child.id in PRODUCT_PROCESS_STARTERS:
            return child.id
    return None


def _imported_from_tests(tree: ast.Module, folder: Path) -> dict[str, Path]:
    """Each name a module imports from another file under `folder` (`from tests.x.y import name`), with that file."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            source = folder.joinpath(*node.module.split(".")[1:]).with_suffix(".py")
            found.update({alias.asname or alias.name: source for alias in node.names})
    return found


def _fixture_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The fixtures a test or fixture asks for: its parameters and `@pytest.mark.usefixtures(...)`."""
    names = {a.arg for a in node.args.args + node.args.kwonlyargs}
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                and decorator.func.attr == "usefixtures":
            names |= {a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return names


def process_starters(folder: Path) -> dict[Path, str]:
    """Each Python file under `folder` that starts a process, with the first reason found.

    A file starts one directly (`_starts_directly`), or calls a function or class it defines or imports from another
    file under `folder` that does, or asks for a fixture of a conftest.py that does (a fixed point, by name within a
    file: two files' helpers of one name are not confused)."""
    trees = _trees(folder)
    defined = {path: {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                                          | ast.ClassDef)}
               for path, tree in trees.items()}
    imported = {path: _imported_from_tests(tree, folder) for path, tree in trees.items()}
    starting: dict[tuple[Path, str], str] = {   # (file, function or class) -> why; names imported from subprocess...
        (path, alias.asname or alias.name): f"{node.module}.{alias.name}" for path, tree in trees.items()
        for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        and node.module.split(".")[0] in PROCESS_MODULES for alias in node.names}
    for path, names in defined.items():
        for name, node in names.items():
            if (why := _starts_directly(node, _bound_modules(trees[path]))) is not None:
                starting[path, name] = why
    refs = {(path, name): _called_names(node) | {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for path, names in defined.items() for name, node in names.items()}   # walked once, not once a round
    asks = {(path, name): _fixture_names(node) for path, names in defined.items() for name, node in names.items()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    conftest_fixtures: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for key, names in refs.items():
            if key in starting:
                continue
            path = key[0]
            sources = ((imported[path].get(called, path), called) for called in names)
            if (source := next((s for s in sources if s in starting and s != key), None)) is not None:
                starting[key] = f"{source[1]}: {starting[source]}"
                changed = True
            elif asked := sorted(asks.get(key, set()) & set(conftest_fixtures)):
                starting[key] = f"fixture {asked[0]}: {conftest_fixtures[asked[0]]}"
                changed = True
        conftest_fixtures = {name: why for (path, name), why in starting.items() if path.name == "conftest.py"}
    found = {}
    for path, tree in trees.items():
        whys = [why for (p, _), why in starting.items() if p == path]
        if (why := _starts_directly(tree, _bound_modules(tree)) or (whys[0] if whys else None)) is not None:
            found[path] = why
    return found


def untiered_test_modules(folder: Path) -> list[str]:
    """Each test module under `folder` that is not in a tier: tests/unit/<package>/, system/, e2e/ or realtime/."""
    found = []
    for path in sorted(folder.rglob("test_*.py")):
        parts = path.relative_to(folder).parts
        depth = 3 if parts[0] == "unit" else 2   # unit/<package>/test_x.py; system/test_x.py
        if parts[0] not in ("unit", "system", *PROCESS_TIERS) or len(parts) != depth:
            found.append(_shown(path, folder))
    return found


def misplaced_process_tests(folder: Path) -> list[str]:
    """`file: why` of each test module outside e2e/ and realtime/ that starts a process."""
    return [f"{_shown(path, folder)}: {why}" for path, why in process_starters(folder).items()
            if path.name.startswith("test_") and path.relative_to(folder).parts[0] not in PROCESS_TIERS]


def unit_wall_clocks(folder: Path) -> list[str]:
    """`file:line time.name` of each sleep or wall-clock read in a test module under `folder`/unit."""
    found = []
    for path, tree in _trees(folder / "unit").items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "time" \
                    and node.attr in WALL_CLOCK:
                found.append(f"{_shown(path, folder)}:{node.lineno} time.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "time":
                found += [f"{_shown(path, folder)}:{node.lineno} time.{a.name}" for a in node.names
                          if a.name in WALL_CLOCK]
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


def test_every_test_module_lives_in_a_tier() -> None:
    assert not (found := untiered_test_modules(TESTS)), (
        "put each test module in its tier (docs/developing.md, 'Tests: the tiers'): tests/unit/<package>/ (one "
        "package, in-process), tests/system/ (several, in-process), tests/e2e/ (starts a process) or tests/realtime/ "
        "(the emulated desk, wall-timed):\n" + "\n".join(found))


def test_a_module_that_starts_a_process_lives_in_e2e_or_realtime() -> None:
    assert not (found := misplaced_process_tests(TESTS)), (
        "a test module that starts a process belongs in tests/e2e/ (a command as a user runs it, another process) "
        "or tests/realtime/ (wall-timed: the emulated desk); what starts one:\n" + "\n".join(found))


def test_unit_tests_read_no_wall_clock() -> None:
    assert not (found := unit_wall_clocks(TESTS)), (
        "tests/unit/ runs on a ManualClock: drive time by hand, or move a test that needs the wall clock to "
        "tests/system/ or tests/realtime/:\n" + "\n".join(found))


def test_the_process_rule_follows_helpers_and_fixtures_and_the_clock_rule_reads_unit_only(tmp_path: Path) -> None:
    for tier in ("unit/run", "system", "e2e", "realtime"):
        (tmp_path / tier).mkdir(parents=True)
    (tmp_path / "tool.py").write_text("import subprocess\n\nclass Tool:\n    def start(self):\n"
                                      "        return subprocess.Popen(['true'])\n\ndef pure(x):\n    return x\n")
    (tmp_path / "conftest.py").write_text("import pytest\nfrom tests.tool import Tool\n\n@pytest.fixture\n"
                                          "def started():\n    return Tool().start()\n\n@pytest.fixture\n"
                                          "def plain():\n    return 1\n")
    (tmp_path / "system" / "test_helper.py").write_text("from tests.tool import Tool\n\ndef test_a():\n"
                                                        "    assert Tool()\n")
    (tmp_path / "system" / "test_fixture.py").write_text("def test_a(started):\n    assert started\n")
    (tmp_path / "system" / "test_marked.py").write_text(
        "import pytest\n\n@pytest.mark.usefixtures('started')\ndef test_a():\n    assert True\n")
    (tmp_path / "system" / "test_exec.py").write_text("import os\n\ndef test_a():\n    os.execv('x', [])\n")
    (tmp_path / "system" / "test_python.py").write_text("import sys\n\ndef test_a():\n    assert sys.executable\n")
    (tmp_path / "system" / "test_pure.py").write_text(
        "from tests.tool import pure\n\ndef Tool():\n    return 1\n\ndef test_a(plain):\n    assert pure(Tool())\n")
    (tmp_path / "e2e" / "test_cli.py").write_text("import subprocess\n\ndef test_a():\n    assert subprocess\n")
    (tmp_path / "system" / "test_named_ray.py").write_text(   # a local named like a module is not the module
        "def test_a():\n    ray = object()\n    assert ray.__class__\n")
    (tmp_path / "unit" / "run" / "test_clock.py").write_text(
        "import time\nfrom time import perf_counter\n\ndef test_a():\n    time.sleep(1)  # behaviour\n"
        "    assert time.monotonic() and perf_counter()\n")
    (tmp_path / "realtime" / "test_wall.py").write_text("import time\n\ndef test_a():\n    assert time.monotonic()\n")
    assert misplaced_process_tests(tmp_path) == [
        "system/test_exec.py: os.execv", "system/test_fixture.py: fixture started: Tool: subprocess.Popen",
        "system/test_helper.py: Tool: subprocess.Popen",
        "system/test_marked.py: fixture started: Tool: subprocess.Popen", "system/test_python.py: sys.executable"]
    (tmp_path / "test_flat.py").write_text("def test_a():\n    assert True\n")
    (tmp_path / "unit" / "test_no_package.py").write_text("def test_a():\n    assert True\n")
    assert untiered_test_modules(tmp_path) == ["test_flat.py", "unit/test_no_package.py"]
    assert unit_wall_clocks(tmp_path) == ["unit/run/test_clock.py:2 time.perf_counter",
                                          "unit/run/test_clock.py:5 time.sleep",
                                          "unit/run/test_clock.py:6 time.monotonic"]


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
