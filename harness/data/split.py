"""Held-out episodes: every tenth index, not the last tenth.

LeRobot's `--dataset.eval_split` holds out the last episodes of each task; recordings made in one
session get tired operators and drifting light towards the end, so "last" confounds those with
generalisation. Every tenth index spreads the held-out set across the session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.errors import HarnessInputError
from harness.storage.atomic import write_text_atomic


def episode_indices(root: Path) -> list[int]:
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise HarnessInputError(root, "meta/episodes", "no episode metadata: is this a LeRobot v3.0 dataset?")
    return sorted(int(i) for f in files for i in pd.read_parquet(f, columns=["episode_index"])["episode_index"])


def every_nth_split(indices: list[int], every: int = 10, offset: int = 0) -> dict[str, list[int]]:
    val = [i for i in indices if i % every == offset % every]
    return {"train": [i for i in indices if i not in set(val)], "val": val}


def write_split(root: Path, output: Path, every: int = 10) -> dict[str, list[int]]:
    split = every_nth_split(episode_indices(root), every)
    write_text_atomic(output, json.dumps(split, indent=2) + "\n")
    return split
