"""A LeRobot checkpoint named by what identifies it: the training run and the step.

`lerobot-train` writes `<output_dir>/checkpoints/<step, 6 digits>/pretrained_model/` and a `last`
link to the newest step, so the folder a user passes is named `pretrained_model` for every
checkpoint of every run. Scoresheet names, report headings and offline-eval tables use this name
instead, so two checkpoints of one run never share a scoresheet or a table row label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.models.run_settings import BuiltinPolicy

PRETRAINED_DIR = "pretrained_model"     # lerobot.utils.constants.PRETRAINED_MODEL_DIR
CHECKPOINTS_DIR = "checkpoints"         # lerobot.utils.constants.CHECKPOINTS_DIR
# A Hugging Face Hub model id (user or organisation, a name) and an optional revision: branch, tag or commit.
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95})(?:@(?P<revision>[\w./-]{1,200}))?$")


@dataclass(frozen=True)
class HubRef:
    """A policy named on the Hub (`ORG/NAME[@REVISION]`); `harness.policies.hub` resolves it to a folder."""

    repo_id: str
    revision: str | None   # None: the repository's default branch

    @property
    def download_command(self) -> str:
        """What a user types to fill the cache (huggingface_hub's own CLI)."""
        return f"hf download {self.repo_id}" + (f" --revision {self.revision}" if self.revision else "")


def hub_ref(ref: str) -> HubRef | None:
    """The Hub id a policy reference names, or None: a built-in, an existing path, or not an id's shape.
    A path that exists wins over a Hub id spelled the same (`outputs/act` is a folder when there is one)."""
    if BuiltinPolicy.named(ref) is not None or Path(ref).exists():
        return None
    match = _HUB_ID.match(ref)
    if match is None or ".." in ref:
        return None
    return HubRef(match["repo"], match["revision"])


@dataclass(frozen=True)
class CheckpointName:
    run: str                 # the training run's output folder name, or the policy folder's own name
    step: int | None         # the training step, when the folder says

    @property
    def label(self) -> str:
        """`act_demos-step300`; a folder that is not a training checkpoint keeps its own name."""
        return f"{self.run}-step{self.step}" if self.step is not None else self.run


def checkpoint_name(path: str | Path) -> CheckpointName:
    """Name a policy folder. `runs/act/checkpoints/000300/pretrained_model` -> act, step 300; the
    `last` link resolves to its step; elsewhere the step comes from training_state/training_step.json
    when there is one."""
    hub = hub_ref(str(path))
    if hub is not None:   # a Hub id: its name, and a revision when one is named
        name = hub.repo_id.split("/")[1]
        return CheckpointName(f"{name}@{hub.revision}" if hub.revision else name, None)
    path = Path(str(path).rstrip("/"))
    folder = path.parent if path.name == PRETRAINED_DIR else path
    if folder.parent.name == CHECKPOINTS_DIR:
        run = folder.parent.parent.name or folder.parent.parent.resolve().name
        step_dir = folder.resolve() if folder.is_symlink() else folder
        if step_dir.name.isdigit():
            return CheckpointName(run, int(step_dir.name))
        return CheckpointName(run, _recorded_step(folder))
    own = folder.name if path.name == PRETRAINED_DIR else path.name
    return CheckpointName(own or path.resolve().name, _recorded_step(folder))


def _recorded_step(folder: Path) -> int | None:
    try:
        return int(json.loads((folder / "training_state" / "training_step.json").read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_labels(paths: Sequence[str | Path]) -> list[str]:
    """Labels for several folders, told apart by their parent folders where the names collide."""
    labels = [checkpoint_name(p).label for p in paths]
    for label in set(labels):
        clashing = [i for i, x in enumerate(labels) if x == label]
        if len(clashing) > 1:
            for i in clashing:
                labels[i] = f"{label} ({Path(paths[i])})"
    return labels
