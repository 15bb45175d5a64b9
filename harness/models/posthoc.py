"""Scores given after the fact to a recorded dataset (`harness score`): NOT a pre-registered run.

Why a type of its own rather than a scoresheet: a scoresheet's worth is that its protocol, policy and trials were
locked before the first trial ran. A dataset recorded by `lerobot-rollout` or `lerobot-record` had no such lock:
its episodes were chosen, kept or discarded by whoever recorded them, and the starts are not known. Its scores
are useful (which failures, how often) but are never to be read as a protocol run's. So this file is another
kind (`kind: harness.posthoc-scores/1`, `pre_registered: false`), `load_scoresheet` refuses it, and every
report of it says so on its first line (`NOTICE`).

Resumable: each labelled episode is written (atomically, by the one writer the lock admits) before the next is
shown; a later run skips the episodes already labelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import HarnessInputError
from harness.models.anatomy import TrialAnatomy
from harness.models.protocol import Scene
from harness.models.taxonomy import FAILURE_MODES, Label
from harness.stats.estimates import wilson_interval
from harness.storage.atomic import write_text_atomic

KIND: Literal["harness.posthoc-scores/1"] = "harness.posthoc-scores/1"
NOTICE = ("NOT PRE-REGISTERED: scored after the fact from a recorded dataset; nothing was locked before its "
          "episodes ran, so these numbers are not a protocol run's")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetRef(_Frozen):
    """Which dataset was scored, as it was when scoring began (a resume refuses another)."""

    source: str = Field(description="the folder or Hub id given")
    root: str
    robot_type: str
    fps: float
    episodes: int
    info_sha256: str = Field(description="sha256 of meta/info.json when scoring began")
    gripper_load: bool = Field(description="the dataset records the gripper servo's load; without it the anatomy "
                                           "reads holding from the gripper's position alone")
    top_camera: str | None = Field(description="the dataset's top camera feature, if it has one")
    placement_measured: bool = Field(description="placement error measured on each episode's final top frame "
                                                 "(needs a top camera and a bowl calibration)")


class EpisodeScore(_Frozen):
    episode: int
    frames: int
    duration_s: float
    label: Label
    scored_by: Literal["operator", "proposal"]
    proposal: dict[str, object] | None = None
    placement_error_cm: float | None = None
    anatomy: TrialAnatomy | None = None
    note: str | None = None


class PosthocSheet(_Frozen):
    kind: Literal["harness.posthoc-scores/1"] = KIND
    pre_registered: Literal[False] = False
    notice: str = NOTICE
    dataset: DatasetRef
    scene: Scene
    episodes: list[EpisodeScore] = Field(default_factory=list)

    def labelled(self) -> set[int]:
        return {e.episode for e in self.episodes}

    def with_score(self, score: EpisodeScore) -> PosthocSheet:
        return self.model_copy(update={"episodes": [*self.episodes, score]})

    def report_lines(self) -> list[str]:
        """The report; its first line is `NOTICE`, whatever else it says."""
        scored = [e for e in self.episodes if e.label is not Label.VOID]
        k = sum(1 for e in scored if e.label is Label.SUCCESS)
        lines = [NOTICE, f"Dataset     {self.dataset.source} ({self.dataset.robot_type}, {self.dataset.episodes} "
                         f"episodes, {len(self.episodes)} labelled)"]
        if scored:
            low, high = wilson_interval(k, len(scored))
            lines.append(f"Success     {k}/{len(scored)} = {100 * k / len(scored):.1f}%  (95% Wilson "
                         f"{100 * low:.1f}-{100 * high:.1f}%; of the episodes kept in the dataset, not of a "
                         f"pre-registered trial list)")
        else:
            lines.append("Success     no episodes labelled yet")
        modes = ", ".join(f"{mode} {sum(1 for e in scored if e.label == mode)}" for mode in FAILURE_MODES)
        lines.append(f"Failures    {modes}")
        by = {who: sum(1 for e in self.episodes if e.scored_by == who) for who in ("operator", "proposal")}
        lines.append(f"Labels      {by['operator']} by the operator, {by['proposal']} proposals accepted unseen")
        if not self.dataset.gripper_load:
            lines.append("Anatomy     the dataset has no gripper load: holding read from the gripper's position "
                         "alone (the rules that need no load)")
        if not self.dataset.placement_measured:
            why = "no top camera" if self.dataset.top_camera is None else "no --bowl-calibration"
            lines.append(f"Placement   not measured ({why}); proposals read the cube's end from where it was let go")
        for e in self.episodes:
            summary = e.anatomy.summary if e.anatomy is not None else "no anatomy"
            where = f", {e.placement_error_cm:.1f} cm from the bowl centre" if e.placement_error_cm is not None else ""
            lines.append(f"  episode {e.episode:>3}: {e.label.display:<20} ({e.scored_by}{where}) {summary}")
        return lines


def is_posthoc(path: str | Path) -> bool:
    """Whether `path` is a post-hoc score sheet (read cheaply: its `kind` line)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return f"kind: {KIND}" in head


def load_posthoc(path: str | Path) -> PosthocSheet:
    try:
        data = yaml.safe_load(Path(path).read_bytes())
        return PosthocSheet.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise HarnessInputError(path, None, f"cannot read this post-hoc score sheet ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HarnessInputError(path, where or None, first["msg"]) from None


def save_posthoc(path: str | Path, sheet: PosthocSheet) -> None:
    """Atomically: an interrupted write leaves the sheet as it was before this episode."""
    data = sheet.model_dump(mode="json")
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110))
