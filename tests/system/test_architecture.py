"""The package graph in docs/architecture.md is the one in the code, and it has no cycle.

Imports are read from the source (AST), so function-level imports count; imports under
`if TYPE_CHECKING:` do not, since they never run.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from harness.models.taxonomy import Label
from tests.helpers import REPO, parsed_python

PACKAGE = REPO / "harness"
DOC = REPO / "docs" / "architecture.md"
HEAVY = ("torch", "mujoco", "lerobot", "serial", "cv2", "textual")


def _node(module: str) -> str | None:
    """`harness.run.engine` -> `run`; `harness.cli` -> `cli`; `harness` alone -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@functools.cache   # the trees are `parsed_python`'s, one object per file text: each walked once a run
def _imports(tree: ast.AST, module: str, typing_too: bool = False, names: bool = False) -> list[str]:
    """Absolute module names imported anywhere in the tree, except in TYPE_CHECKING blocks (`typing_too`:
    those as well); `names`: with `source.name` for each name a `from source import name` takes (a module,
    where the name is one)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not typing_too:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.extend([source, *(f"{source}.{alias.name}" for alias in node.names if names)])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules(root: Path, typing_too: bool = False, names: bool = False) -> dict[str, list[str]]:
    modules = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        modules[name] = _imports(parsed_python(path), name, typing_too, names)
    return modules


def code_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, imports in _modules(root).items():
        source = _node(module)
        if source is None:
            continue
        graph.setdefault(source, set())
        for imported in imports:
            target = _node(imported)
            if target is not None and target != source:
                graph[source].add(target)
    return graph


def documented_graph(text: str) -> dict[str, set[str]]:
    block = re.search(r"```deps\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```deps block"
    graph = {}
    for line in block.group(1).strip().splitlines():
        name, _, targets = line.partition(":")
        graph[name.strip()] = {t.strip() for t in targets.split(",") if t.strip()}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_documented_package_graph_is_the_real_one() -> None:
    code, doc = code_graph(), documented_graph(DOC.read_text())
    extra = {f"{a} -> {b}" for a, targets in code.items() for b in targets if b not in doc.get(a, set())}
    stale = {f"{a} -> {b}" for a, targets in doc.items() for b in targets if b not in code.get(a, set())}
    assert not extra, f"imports the layering in docs/architecture.md does not allow: {sorted(extra)}"
    assert not stale, f"docs/architecture.md lists imports the code no longer has: {sorted(stale)}"
    assert set(code) <= set(doc), f"packages missing from docs/architecture.md: {sorted(set(code) - set(doc))}"


def test_the_package_graph_has_no_cycle() -> None:
    assert find_cycle(code_graph()) is None, f"package cycle: {' -> '.join(find_cycle(code_graph()) or [])}"


def test_models_and_errors_import_no_hardware_simulator_or_ui() -> None:
    for module, imports in _modules(PACKAGE).items():
        if _node(module) in ("models", "errors"):
            heavy = [i for i in imports if i.split(".")[0] in HEAVY]
            assert not heavy, f"{module} imports {heavy}"


def test_the_checks_catch_a_cycle_and_a_type_checking_import_is_not_an_edge(tmp_path) -> None:
    """The checker itself: a run -> tui -> run cycle is found; a TYPE_CHECKING import is ignored."""
    root = tmp_path / "harness"
    for package in ("run", "tui", "models"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "run" / "engine.py").write_text("def build():\n    from harness.tui.run_app import App\n")
    (root / "tui" / "app.py").write_text("from ..run import engine\n")
    (root / "models" / "x.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.run.engine import E\n")
    graph = code_graph(root)
    assert graph["models"] == set()
    assert find_cycle(graph) in (["run", "tui", "run"], ["tui", "run", "tui"])


def module_graph(root: Path = PACKAGE, typing_too: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (an import of a package counts as its `__init__`; a name
    imported from a package that is a module of it counts as that module); `typing_too`: with the imports
    under `if TYPE_CHECKING:`."""
    modules = _modules(root, typing_too, names=True)
    graph: dict[str, set[str]] = {}
    for module, imports in modules.items():
        graph[module] = {name for name in imports if name in modules and name != module}
    return graph


def test_the_module_check_finds_a_circle_closed_by_a_type_checking_import(tmp_path: Path) -> None:
    """Two modules that need each other's names, one only for its annotations, are still one idea split in two
    (the circles issue 61 broke: the shared surface moved down, as a `typing.Protocol` in the lower module)."""
    root = tmp_path / "harness"
    (root / "run").mkdir(parents=True)
    (root / "run" / "evidence.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.run.evidence_writer import W\n")
    (root / "run" / "evidence_writer.py").write_text("from harness.run.evidence import complete_folder\n")
    assert find_cycle(module_graph(root)) is None
    assert find_cycle(module_graph(root, typing_too=True)) in (
        ["harness.run.evidence", "harness.run.evidence_writer", "harness.run.evidence"],
        ["harness.run.evidence_writer", "harness.run.evidence", "harness.run.evidence_writer"])


def test_no_two_modules_import_each_other_even_through_others() -> None:
    """A file-level cycle hides inside a package the package graph cannot see."""
    cycle = find_cycle(module_graph(typing_too=True))
    assert cycle is None, f"module cycle (type-checking imports included): {' -> '.join(cycle or [])}"
    cycle = find_cycle(module_graph())
    assert cycle is None, f"module cycle: {' -> '.join(cycle or [])}"


def test_only_the_app_layer_reads_command_line_arguments() -> None:
    """Handlers live in `app/`; a domain module that takes an `argparse.Namespace` is a hidden CLI.

    `sim/frame_render.py` and `emulator/rig_process.py` are the exceptions the docs name: each is the entry point of
    its own process.
    """
    readers = []
    entry_points = ("harness.sim.frame_render", "harness.emulator.rig_process")
    for module, imports in _modules(PACKAGE).items():
        if "argparse" in imports and _node(module) not in ("app", "cli") and module not in entry_points:
            readers.append(module)
    assert not readers, f"modules below the app layer that parse or read arguments: {readers}"


def namespace_readers(root: Path = PACKAGE) -> list[str]:
    """Modules that name `argparse.Namespace` other than a command's handler: `cli.py`, `app/commands/`, the
    `*_command.py` beside them, and `app/request.py`, where a parsed `harness run` becomes its request."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent)
        module = ".".join(relative.with_suffix("").parts)
        handler = (module in ("harness.cli", "harness.app.request") or relative.parent.name == "commands"
                   or path.stem.endswith("_command"))
        if not handler and "Namespace" in path.read_text():
            found.append(module)
    return found


def test_below_the_command_handlers_a_run_travels_as_its_request() -> None:
    """`prepare_run`, `resolve_sheet`, Ray's workers, sweeps and rehearsals take the `RunRequest` (a measure its
    `MeasureRequest`): a module that names `argparse.Namespace` below the handlers is a second CLI."""
    readers = [m for m in namespace_readers() if m != "harness.sim.frame_render"]
    assert not readers, f"modules below the command handlers that read parsed arguments: {readers}"


def test_the_namespace_check_finds_a_reader_below_the_handlers(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    (root / "app" / "commands").mkdir(parents=True)
    (root / "app" / "commands" / "run.py").write_text("def run(args: argparse.Namespace): ...\n")
    (root / "app" / "run_command.py").write_text("def run_from_args(args: argparse.Namespace): ...\n")
    (root / "app" / "build.py").write_text("def prepare_run(request: argparse.Namespace): ...\n")
    assert namespace_readers(root) == ["harness.app.build"]

LABEL_VALUES = frozenset(label.value for label in Label)
TAXONOMY_MODULE = "harness/models/taxonomy.py"
# Strings equal to a label's value that name something else: `RejectReason` (why a collected attempt is not a
# demonstration) keeps its own stable names, written to selection.json, two of which read like labels.
NOT_LABELS = frozenset({("harness/data/acceptance.py", "RejectReason.NO_GRASP"),
                        ("harness/data/acceptance.py", "RejectReason.WRONG_PLACEMENT")})


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _named_enum_values(tree: ast.AST) -> dict[int, str]:
    """`Class.NAME` for each string a class body assigns to one name (an enum member's value), by node id."""
    named = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for statement in cls.body:
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Constant)):
                named[id(statement.value)] = f"{cls.name}.{statement.targets[0].id}"
    return named


def label_literals(root: Path = PACKAGE) -> list[str]:
    """Every string literal equal to a label's value outside the taxonomy module (docstrings and the named
    exceptions aside), as `path:line 'value'`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        if relative == TAXONOMY_MODULE:
            continue
        tree = parsed_python(path)
        docstrings, named = _docstrings(tree), _named_enum_values(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in LABEL_VALUES
                    and id(node) not in docstrings and (relative, named.get(id(node))) not in NOT_LABELS):
                found.append(f"{relative}:{node.lineno} {node.value!r}")
    return found


def test_no_label_is_spelled_outside_the_taxonomy_module() -> None:
    """A label written as a string is a second definition of the taxonomy: compare `Label` members instead."""
    found = label_literals()
    assert not found, "label literals outside harness/models/taxonomy.py (use `Label`): " + ", ".join(found)


def test_the_label_check_catches_a_literal_but_not_a_docstring_or_a_named_exception(tmp_path) -> None:
    root = tmp_path / "harness"
    (root / "data").mkdir(parents=True)
    (root / "data" / "acceptance.py").write_text(
        '"""Says no_grasp in prose: "no_grasp"."""\n'
        "class RejectReason:\n    NO_GRASP = \"no_grasp\"\n    DROPPED = \"void\"\n")
    (root / "data" / "judge.py").write_text(
        "def verdict(held):\n    \"\"\"success\"\"\"\n    return \"success\" if held else f\"{'no_grasp'}\"\n")
    assert label_literals(root) == ["harness/data/acceptance.py:4 'void'", "harness/data/judge.py:3 'success'",
                                    "harness/data/judge.py:3 'no_grasp'"]


def test_every_package_is_named_in_the_architecture_doc_and_every_module_says_its_job() -> None:
    """A newcomer finds each package on the map (docs/architecture.md, short enough to read in five minutes)
    and each module's job in its own docstring, where it stays true beside the code."""
    text = DOC.read_text()
    packages = sorted({path.parent for path in PACKAGE.rglob("__init__.py")} - {PACKAGE})
    unnamed = [str(p.relative_to(PACKAGE)) for p in packages if f"`{p.relative_to(PACKAGE).as_posix()}/`" not in text
               and f"`{p.name}/`" not in text]
    unnamed += [p.name for p in sorted(PACKAGE.glob("*.py")) if p.name != "__init__.py" and f"`{p.name}`" not in text]
    assert not unnamed, f"packages and top-level modules docs/architecture.md does not mention: {unnamed}"
    silent = [str(path.relative_to(REPO)) for path in sorted(PACKAGE.rglob("*.py"))
              if path.name != "__init__.py" and not ast.get_docstring(parsed_python(path))]
    assert not silent, f"modules without a docstring saying what they own: {silent}"


def test_the_types_section_names_the_mypy_exemptions_pyproject_has() -> None:
    """docs/architecture.md's "Types" says which modules mypy lets off what: its count of `warn_return_any`
    exemptions is pyproject's, and it names `ignore_errors` only while a module has it."""
    import tomllib

    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"].get("overrides", [])
    section = DOC.read_text().partition("## Types")[2].partition("\n## ")[0]
    lenient = [m for o in overrides if o.get("warn_return_any") is False for m in o["module"]]
    assert f"{len(lenient)} modules" in section, f"pyproject exempts {len(lenient)} modules from warn_return_any"
    ignored = [m for o in overrides if o.get("ignore_errors") for m in o["module"]]
    assert ("ignore_errors" in section) == bool(ignored), f"modules mypy does not check: {ignored}"
    for module in ignored:
        assert module.removeprefix("harness.") in section, f"{module} is exempt from checking but not named"


def handler_names(root: Path = PACKAGE) -> list[str]:
    """Public functions of `app/` (beside `commands/`, which registers parsers) that take an
    `argparse.Namespace` and are not named as a handler (`X_from_args`) or as what turns the line into the
    command's request or plan (`as_*`, `plan_*`)."""
    found = []
    for path in sorted((root / "app").rglob("*.py")):
        if path.parent.name == "commands":
            continue
        for node in ast.walk(parsed_python(path)):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            takes_args = any(arg.annotation is not None and ast.unparse(arg.annotation).endswith("Namespace")
                             for arg in node.args.args)
            if takes_args and not node.name.endswith("_from_args") and not node.name.startswith(("as_", "plan_")):
                found.append(f"{path.relative_to(root.parent)}:{node.name}")
    return found


def test_command_handlers_are_named_one_way(tmp_path: Path) -> None:
    """A handler that takes the parsed line is `X_from_args(args)`; what runs a command without a command line
    takes its request (`run_X(request)`), so a reader tells the two apart by name."""
    assert handler_names() == []
    (tmp_path / "harness" / "app").mkdir(parents=True)
    (tmp_path / "harness" / "app" / "x_command.py").write_text(
        "import argparse\ndef run_x(args: argparse.Namespace) -> int: ...\n"
        "def x_from_args(args: argparse.Namespace) -> int: ...\n")
    assert handler_names(tmp_path / "harness") == ["harness/app/x_command.py:run_x"]


MAX_CLASS_LINES = 250
# Classes allowed over MAX_CLASS_LINES for now, each with the branch that brings it under: an entry is removed when
# that branch merges, and nothing is added here (a class that grows past the limit is split by what it does).
OVERSIZED_CLASSES: set[str] = set()


def long_classes(root: Path = PACKAGE, limit: int = MAX_CLASS_LINES) -> list[str]:
    """Every class whose definition (docstring, comments and blank lines included) spans more than `limit` lines,
    as `path:Class (N lines)`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        for node in ast.walk(parsed_python(path)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{relative}:{node.name} ({length} lines)")
    return found


def test_no_class_is_over_250_lines() -> None:
    """A class a newcomer cannot read at one sitting holds several ideas: split it by what each part knows (the
    scoresheet's records and comparison, the TUI observer's undo), not by squeezing lines."""
    found = [entry for entry in long_classes() if entry.partition(" (")[0] not in OVERSIZED_CLASSES]
    assert not found, f"classes over {MAX_CLASS_LINES} lines: {found}"
    stale = OVERSIZED_CLASSES - {entry.partition(" (")[0] for entry in long_classes()}
    assert not stale, f"exempt from the class size rule but no longer over it (remove them): {sorted(stale)}"


def test_the_class_size_check_counts_a_class_from_its_line_to_its_last(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    (root / "run").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    (root / "run" / "big.py").write_text(f'"""doc"""\n\n\n@decorated\nclass Big:\n    """doc"""\n\n{body}\n\n\n'
                                         f"class Small:\n    y = 1\n")
    assert long_classes(root, limit=7) == ["harness/run/big.py:Big (8 lines)"]   # the decorator is not counted
    assert long_classes(root, limit=8) == []
