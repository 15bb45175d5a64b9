"""`pip install` of the harness wheel into an environment that already holds LeRobot keeps what is there.

A user arrives with LeRobot installed (often with a CUDA build of PyTorch). The environment here is a fresh
virtual environment that sees LeRobot at the tested version and everything it pulls in (its extras
included: PyTorch, transformers, datasets, ...) and nothing else: those distributions are linked from the
development environment into one folder that a `.pth` file puts on the new environment's path (fast and
offline for the big ones; what the harness adds comes from the package index). The harness wheel and its two
LeRobot plugins are installed without constraints.txt, and pip's own report (`--report`) must name nothing
the environment already had; then the installed `harness` runs two simulated trials.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.models.scoresheet import load_scoresheet
from tests.helpers import REPO, small_protocol_copy

LEROBOT = "lerobot[feetech,dataset,training,async,smolvla]"
PLUGINS = ("lerobot_robot_harness_sim", "lerobot_camera_harness_sim", "lerobot_env_harness_sim")


def requirement_closure(root: str) -> dict[str, md.Distribution]:
    """Every installed distribution `root` needs, with its extras (LeRobot's name other extras of LeRobot:
    `lerobot[transformers-dep]`), by canonical name."""
    found: dict[str, md.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(root)]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        try:
            dist = found.get(name) or md.distribution(requirement.name)
        except md.PackageNotFoundError:
            continue   # an optional platform's dependency, not installed here
        found[name] = dist
        extras = requirement.extras or {""}
        for text in dist.requires or []:
            nested = Requirement(text)
            if nested.marker is None or any(nested.marker.evaluate({"extra": extra}) for extra in extras):
                pending.append(nested)
    return found


def link_distributions(dists: dict[str, md.Distribution], folder: Path) -> None:
    """A site folder holding exactly these distributions: each one's top-level files and its metadata."""
    folder.mkdir()
    for dist in dists.values():
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            target, link = base / top, folder / top
            if target.exists() and not link.exists() and not top.endswith(".pth"):
                link.symlink_to(target)


@pytest.mark.slow
def test_the_wheel_installs_beside_lerobot_replacing_nothing_and_runs_two_trials(tmp_path: Path) -> None:
    source = tmp_path / "source"   # built from a copy: the build leaves nothing in the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv", ".git", "runs", "scoresheets", "tests",
                                                                "__pycache__", "*.egg-info", "build", "docs"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels,
                    source, *(source / "plugins" / p for p in PLUGINS)], check=True, capture_output=True, timeout=300)
    built = sorted(wheels.glob("*.whl"))
    assert len(built) == 1 + len(PLUGINS)

    lerobot_env = requirement_closure(LEROBOT)
    assert "torch" in lerobot_env and "harness" not in lerobot_env and "ray" not in lerobot_env
    link_distributions(lerobot_env, tmp_path / "lerobot-site")
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", venv], check=True, timeout=300)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    (site / "existing-lerobot.pth").write_text(f"{tmp_path / 'lerobot-site'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_CONSTRAINT", "VIRTUAL_ENV"))}
    check = subprocess.run([venv / "bin" / "python", "-c", "import lerobot, torch; print(lerobot.__file__)"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and "lerobot-site" in check.stdout, check.stderr[-1500:]

    report = tmp_path / "report.json"
    # --no-compile: what the resolution installs is the question, not its bytecode (Ray's ~2,600 modules alone take
    # about 5 CPU s to compile; the two trials below compile what they import)
    install = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
                              "--no-compile", "--report", report, *built],
                             env=env, capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-3000:]
    installed = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                 for item in json.loads(report.read_text())["install"]}
    replaced = {name: (lerobot_env[name].version, version) for name, version in installed.items()
                if name in lerobot_env}
    assert replaced == {}, f"pip replaced what the LeRobot environment had: {replaced}"
    assert {"harness", "so101-nexus", *(canonicalize_name(p) for p in PLUGINS)} <= set(installed)

    work = tmp_path / "work"
    (work / "protocols").mkdir(parents=True)
    protocol = small_protocol_copy(work / "protocols")
    run = subprocess.run([venv / "bin" / "harness", "run", protocol, "--policy", "expert", "--robot", "sim",
                          "--headless", "--no-video", "--max-trials", "2"], cwd=work,
                         env={**env, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    sheet = load_scoresheet(next((work / "scoresheets").glob("*.yaml")))
    assert [a.trial_index for a in sheet.scored_attempts()] == [1, 2]

    plugins = subprocess.run(
        [venv / "bin" / "python", "-c",
         "from lerobot.utils.import_utils import register_third_party_plugins as r; r()\n"
         "from lerobot.robots import RobotConfig; from lerobot.cameras import CameraConfig\n"
         "from lerobot.envs.configs import EnvConfig\n"
         "print(sorted(RobotConfig.get_known_choices()), sorted(CameraConfig.get_known_choices()),"
         " sorted(EnvConfig.get_known_choices()))"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert plugins.returncode == 0, plugins.stderr[-2000:]
    assert "harness_so101_sim" in plugins.stdout and "'harness_sim'" in plugins.stdout
    assert "'harness_so101'" in plugins.stdout
