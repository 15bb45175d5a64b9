"""Damage a copy of a dataset in one specific way, as real datasets get damaged: what the validator's
tests feed it, one defect class at a time."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pandas as pd

DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
TOP = "videos/observation.images.top/chunk-000/file-000.mp4"
WRIST = "videos/observation.images.wrist/chunk-000/file-000.mp4"


def _edit_parquet(path: Path, change: Callable[[pd.DataFrame], None]) -> None:
    frame = pd.read_parquet(path)
    change(frame)
    frame.to_parquet(path)


def _set_vector(frame: pd.DataFrame, column: str, row: int, value: float) -> None:
    vectors = [np.array(v, dtype=np.float32) for v in frame[column]]
    vectors[row][2] = value
    frame[column] = vectors


def nan_in_actions(root: Path) -> None:
    _edit_parquet(root / DATA, lambda f: _set_vector(f, "action", 30, float("nan")))


def inf_in_states(root: Path) -> None:
    _edit_parquet(root / DATA, lambda f: _set_vector(f, "observation.state", 50, float("inf")))


def frame_index_gap(root: Path) -> None:
    def change(f: pd.DataFrame) -> None:
        f.loc[(f["episode_index"] == 1) & (f["frame_index"] >= 5), "frame_index"] += 1
    _edit_parquet(root / DATA, change)


def wrong_global_index(root: Path) -> None:
    def change(f: pd.DataFrame) -> None:
        f.loc[f["episode_index"] == 2, "dataset_from_index"] += 3
        f.loc[f["episode_index"] == 2, "dataset_to_index"] += 3
    _edit_parquet(root / EPISODES, change)


def wrong_totals(root: Path) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info["total_frames"] += 5
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


def missing_video(root: Path) -> None:
    (root / WRIST).unlink()


def bytes_overwritten(root: Path, seed: int = 1) -> None:
    data = bytearray((root / TOP).read_bytes())
    rng = random.Random(seed)
    for _ in range(20):
        i = rng.randrange(len(data) // 4, len(data) - 16)
        data[i:i + 16] = bytes(rng.randrange(256) for _ in range(16))
    (root / TOP).write_bytes(bytes(data))


def frames_missing_from_window(root: Path) -> None:
    """Episode 1's window in the top video is cut three frames short (its metadata lies)."""
    key = "videos/observation.images.top/to_timestamp"

    def change(f: pd.DataFrame) -> None:
        info = json.loads((root / "meta/info.json").read_text())
        f.loc[f["episode_index"] == 1, key] -= 3 / info["fps"]
    _edit_parquet(root / EPISODES, change)


def frames_dropped_mid_episode(root: Path, drop_at: int = 60) -> None:
    """What LeRobot 0.6.1's streaming encoder does when its queue is full: one frame is never encoded,
    and every later frame is numbered one earlier, so the file ends one frame short."""
    path = root / TOP
    with av.open(str(path)) as source:
        stream = source.streams.video[0]
        rate = stream.average_rate
        images = [frame.to_ndarray(format="rgb24") for frame in source.decode(stream)]
    del images[drop_at]
    with av.open(str(path), "w") as out:
        encoded = out.add_stream("libx264", rate=Fraction(rate))
        encoded.height, encoded.width = images[0].shape[:2]
        encoded.pix_fmt = "yuv420p"
        for i, image in enumerate(images):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = i
            for packet in encoded.encode(frame):
                out.mux(packet)
        for packet in encoded.encode():
            out.mux(packet)


DEFECTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "nan_in_actions": (nan_in_actions, "NONFINITE"),
    "inf_in_states": (inf_in_states, "NONFINITE"),
    "frame_index_gap": (frame_index_gap, "FRAME_INDEX_GAP"),
    "wrong_global_index": (wrong_global_index, "EPISODE_RANGE_GAP"),
    "wrong_totals": (wrong_totals, "META_TOTAL_FRAMES"),
    "missing_video": (missing_video, "VIDEO_MISSING"),
    "bytes_overwritten": (bytes_overwritten, "VIDEO_DECODE_ERROR"),
    "frames_missing_from_window": (frames_missing_from_window, "VIDEO_WINDOW_FRAMES"),
    "frames_dropped_mid_episode": (frames_dropped_mid_episode, "VIDEO_WINDOW_FRAMES"),
}
