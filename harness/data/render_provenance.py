"""Which render profile a policy's training frames were drawn with, from its checkpoint and dataset.

A LeRobot checkpoint's `train_config.json` names its dataset's root; a dataset `harness collect` made
records its profile in `meta/provenance.json` (`recording.render_profile`). A harness dataset from before
profiles existed was drawn with the legacy profile; a dataset that is not the harness's, or not on this
machine, is unknown.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.models.render_profile import LEGACY_PROFILE, RenderProfile


def dataset_render_profile(root: Path) -> RenderProfile | None:
    try:
        provenance = json.loads((root / "meta" / "provenance.json").read_text())
        recorded = provenance.get("recording", {}).get("render_profile")
    except (OSError, ValueError, AttributeError):
        return None
    if recorded is None:
        return LEGACY_PROFILE
    try:
        return RenderProfile(recorded)
    except ValueError:
        return None


def training_render_profile(checkpoint: str | Path) -> tuple[RenderProfile | None, str | None]:
    """(the profile, the dataset root) a checkpoint was trained on; (None, root or None) when unknown."""
    try:
        config = json.loads((Path(checkpoint) / "train_config.json").read_text())
        root = config["dataset"]["root"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    if not isinstance(root, str):
        return None, None
    return dataset_render_profile(Path(root)), root


def checkpoint_image_size(checkpoint: str | Path) -> tuple[int, int] | None:
    """(width, height) of the first image input in a checkpoint's config.json, without loading it."""
    try:
        features = json.loads((Path(checkpoint) / "config.json").read_text())["input_features"]
        shapes = [f["shape"] for key, f in features.items() if key.startswith("observation.images.")]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not shapes or len(shapes[0]) != 3:
        return None
    return int(shapes[0][2]), int(shapes[0][1])


def profile_statement(run_profile: RenderProfile, checkpoint: str | Path) -> str | None:
    """One line when this run draws the policy's frames otherwise than its training data were drawn: what was
    trained on, what the run draws, and where the two were compared. None when they agree, or when the frames
    are the same either way at this size."""
    trained, root = training_render_profile(checkpoint)
    width_height = checkpoint_image_size(checkpoint)
    if trained is None or trained is run_profile:
        return None
    if width_height is not None and trained.detail_for(*width_height) is run_profile.detail_for(*width_height):
        return None
    size = f" at {width_height[0]}x{width_height[1]}" if width_height else ""
    return (f"render profile: this policy's training data ({root}) were drawn with {trained.value}, this run "
            f"draws{size} with {run_profile.value}; validated in docs/benchmarks.md (issue 42). Pass "
            f"--render-profile {trained.value} to draw exactly what it was trained on")
