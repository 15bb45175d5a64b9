"""The README is a front page that stays true: its two commands first, every doc linked, every link and
picture there, and the commands a desk types parse as written (the ones that need no arm run here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from tests.helpers import REPO

README = (REPO / "README.md").read_text()


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|console)?\n(.*?)```", text, re.S)


def _commands(block: str) -> list[str]:
    return [line.split("   #")[0].split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_it_starts_with_the_two_commands_and_stays_a_front_page() -> None:
    first = README.split("```bash\n", 1)
    assert first[0].strip() == "# harness", "the README starts with its two commands, right under the title"
    assert _commands(_blocks(README)[0]) == ["bash scripts/demo", "bash scripts/test"]
    assert len(README.splitlines()) <= 110
    for script in ("demo", "test", "setup"):
        assert (REPO / "scripts" / script).is_file()


def test_every_doc_and_picture_is_linked_and_every_link_is_there() -> None:
    targets = set(re.findall(r"\]\(([^)#\s]+)", README)) | set(re.findall(r'src="([^"]+)"', README))
    missing = sorted(t for t in targets if not t.startswith("http") and not (REPO / t).exists())
    assert not missing, f"README links to what is not there: {missing}"
    docs = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert not docs - targets, f"docs the README does not link: {sorted(docs - targets)}"
    assert {"docs/images/tui_mid_trial.png", "docs/images/report_grasps.png"} <= targets


def _desk_lines() -> list[list[str]]:
    block = next(b for b in _blocks(README) if "harness protocol new" in b)
    return [shlex.split(line) for line in _commands(block)]


def _desk() -> list[list[str]]:
    """The desk block's `harness` commands, without the program name (LeRobot's own commands are checked apart)."""
    return [argv[1:] for argv in _desk_lines() if argv[0] == "harness"]


def test_the_desk_block_names_only_harness_and_lerobot_eval_on_the_registered_env() -> None:
    from harness.app.lerobot_env import ENV_TYPE

    others = [argv for argv in _desk_lines() if argv[0] != "harness"]
    assert all(argv[0] == "lerobot-eval" for argv in others), others
    assert all(f"--env.type={ENV_TYPE}" in argv for argv in others), others


def test_the_desk_commands_are_commands_with_these_flags() -> None:
    parser = build_parser()
    desk = _desk()
    assert len(desk) >= 8
    for argv in desk:
        assert parser.parse_args(argv).command == argv[0]   # a renamed command or flag exits 2 here


@pytest.mark.parametrize("command", ["protocol", "plan"])
def test_the_desk_commands_that_need_no_arm_run_as_written(workdir: Path, command: str, capsys) -> None:
    for argv in [a for a in _desk() if a[0] == command]:
        assert main(argv) == 0, capsys.readouterr().err
    if command == "protocol":
        assert (workdir / "protocols" / "mine.yaml").is_file()
