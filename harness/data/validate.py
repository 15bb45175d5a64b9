"""`harness dataset validate`: prove a LeRobot v3.0 dataset intact before hours of training.

Metadata, tabular data and every video frame are checked; each problem carries a stable code.
Exit codes: 0 clean, 1 defects found, 2 unreadable (no usable meta/info.json).
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.data.decode import DecodedFile, decode_file
from harness.errors import EXIT_BAD_INPUT, HarnessError

TOLERANCE_S = 1e-4  # LeRobot's default tolerance_s for frame lookups


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    episode: int | None = None
    file: str | None = None
    severity: str = "error"


@dataclass
class Report:
    root: str
    problems: list[Problem] = field(default_factory=list)
    episodes: int = 0
    frames: int = 0
    camera_frames_decoded: int = 0
    seconds: float = 0.0
    unreadable: bool = False

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def exit_code(self) -> int:
        return 2 if self.unreadable else 1 if self.errors else 0

    def to_json(self) -> str:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return json.dumps(data, indent=2)


class Unreadable(HarnessError):
    """The dataset cannot be read at all (as opposed to read with defects): `dataset validate` exits 2."""

    exit_code = EXIT_BAD_INPUT


def _read_parquets(paths: list[Path]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


# A pool's start (a forkserver, then each worker importing the decoders: about a second of wall) costs more than
# decoding a small dataset's frames in this process: 1,524 frames of 640x480 took 1.25 s inline and 1.46 s in two
# processes. Under this many frames in all, they are decoded here.
POOL_MIN_FRAMES = 3000


def validate_dataset(root: Path, processes: int = 2, progress: Any = None,
                     pool_min_frames: int = POOL_MIN_FRAMES) -> Report:
    t0 = time.perf_counter()
    report = Report(str(root))
    try:
        info = json.loads((root / "meta" / "info.json").read_text())
        if not isinstance(info, dict) or not str(info.get("codebase_version", "")).startswith("v3."):
            raise Unreadable(f"codebase_version {info.get('codebase_version')!r} is not v3.x")
        fps = float(info["fps"])
        features = info["features"]
    except (OSError, ValueError, KeyError, Unreadable) as exc:
        report.unreadable = True
        report.problems.append(Problem("META_UNREADABLE", f"meta/info.json: {exc}"))
        return report
    add = report.problems.append
    episodes = _read_parquets(sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")))
    if episodes.empty:
        add(Problem("META_EPISODES_MISSING", "meta/episodes/*/*.parquet holds no episodes"))
        report.unreadable = True
        return report
    episodes = episodes.sort_values("episode_index").reset_index(drop=True)
    report.episodes = len(episodes)
    _check_episodes(info, episodes, add)
    _check_tasks(root, info, add)
    data_files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    data = _read_parquets(data_files)
    report.frames = len(data)
    _check_data(info, fps, episodes, data, features, add)
    video_keys = [k for k, f in features.items() if f.get("dtype") == "video"]
    jobs = []
    for key in video_keys:
        for (chunk, file_index), group in episodes.groupby([f"videos/{key}/chunk_index", f"videos/{key}/file_index"]):
            path = root / info["video_path"].format(video_key=key, chunk_index=int(chunk), file_index=int(file_index))
            if not path.is_file():
                for ep in group["episode_index"]:
                    add(Problem("VIDEO_MISSING", f"{path.relative_to(root)} does not exist", int(ep),
                                str(path.relative_to(root))))
                continue
            jobs.append((key, path, group))
    if progress is not None:
        progress.total = len(jobs)
        progress.refresh()
    frames = sum(int(group["length"].sum()) for _, _, group in jobs)
    decoded = _decode_all([str(p) for _, p, _ in jobs], processes if frames >= pool_min_frames else 1, progress)
    for (key, path, group), result in zip(jobs, decoded, strict=True):
        report.camera_frames_decoded += len(result.pts_s)
        _check_video(root, key, path, group, result, features[key], fps, data, add)
    report.seconds = time.perf_counter() - t0
    return report


def _decode_all(paths: list[str], processes: int, progress: Any) -> Iterator[DecodedFile]:
    if processes <= 1 or len(paths) <= 1:
        results = []
        for p in paths:
            results.append(decode_file(p))
            if progress is not None:
                progress.update(1)
        return iter(results)
    # forkserver, not fork: this process already runs threads (pyarrow, torch, tqdm), and a forked
    # child can inherit a lock some thread held at that instant and deadlock. Windows has neither: spawn.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context(method)) as pool:
        results = []
        for result in pool.map(decode_file, paths):
            results.append(result)
            if progress is not None:
                progress.update(1)
    return iter(results)


def _check_episodes(info: dict, ep: pd.DataFrame, add: Any) -> None:
    indices = ep["episode_index"].astype(int).tolist()
    if indices != list(range(len(indices))):
        add(Problem("EPISODE_INDEX_NOT_CONTIGUOUS",
                    f"episode_index runs {indices[:5]}..., expected 0..{len(indices) - 1}"))
    if info.get("total_episodes") != len(ep):
        add(Problem("META_TOTAL_EPISODES", f"info.json says {info.get('total_episodes')} episodes, "
                                           f"meta/episodes holds {len(ep)}"))
    total = int(ep["length"].sum())
    if info.get("total_frames") != total:
        add(Problem("META_TOTAL_FRAMES", f"info.json says {info.get('total_frames')} frames, episodes sum to {total}"))
    expected_from = 0
    for row in ep.itertuples(index=False):
        e = int(row.episode_index)
        start, stop, length = int(row.dataset_from_index), int(row.dataset_to_index), int(row.length)
        if stop - start != length:
            add(Problem("EPISODE_RANGE_LENGTH", f"index range [{start}, {stop}) does not hold {length} frames", e))
        if start != expected_from:
            add(Problem("EPISODE_RANGE_GAP", f"index range starts at {start}, previous episode ended at "
                                             f"{expected_from}", e))
        expected_from = stop


def _check_tasks(root: Path, info: dict, add: Any) -> None:
    path = root / "meta" / "tasks.parquet"
    if not path.is_file():
        add(Problem("META_TASKS_MISSING", "meta/tasks.parquet does not exist"))
        return
    tasks = pd.read_parquet(path)
    if info.get("total_tasks") != len(tasks):
        add(Problem("META_TOTAL_TASKS",
                    f"info.json says {info.get('total_tasks')} tasks, tasks.parquet has {len(tasks)}"))


def _check_data(info: dict, fps: float, ep: pd.DataFrame, data: pd.DataFrame, features: dict, add: Any) -> None:
    if data.empty:
        add(Problem("DATA_MISSING", "data/*/*.parquet holds no rows"))
        return
    if info.get("total_frames") != len(data):
        add(Problem("META_TOTAL_FRAMES_DATA",
                    f"info.json says {info.get('total_frames')} frames, data has {len(data)}"))
    positions = np.arange(len(data))
    bad_index = np.nonzero(data["index"].to_numpy() != positions)[0]
    if len(bad_index):
        first = int(bad_index[0])
        add(Problem("GLOBAL_INDEX", f"{len(bad_index)} rows whose 'index' is not their row position (first at row "
                                    f"{first}: index {int(data['index'].iloc[first])})",
                    int(data["episode_index"].iloc[first])))
    for name in ("action", "observation.state"):
        if name in data:
            values = np.stack(data[name].to_numpy()).astype(np.float64)
            width = int(np.prod(features[name]["shape"]))
            if values.shape[1] != width:
                add(Problem("TENSOR_WIDTH", f"'{name}' has width {values.shape[1]}, features say {width}"))
            bad = ~np.isfinite(values)
            if bad.any():
                rows = np.nonzero(bad.any(axis=1))[0]
                r = int(rows[0])
                kind = "NaN" if np.isnan(values[bad]).any() else "Inf"
                episode, frame = int(data["episode_index"].iloc[r]), int(data["frame_index"].iloc[r])
                add(Problem("NONFINITE", f"'{name}' has {kind} in {len(rows)} frames (first: episode {episode} "
                                         f"frame {frame})", episode))
    for row in ep.itertuples(index=False):
        e = int(row.episode_index)
        rows = data[data["episode_index"] == e]
        if len(rows) != int(row.length):
            add(Problem("DATA_EPISODE_ROWS", f"{len(rows)} data rows, episode length says {int(row.length)}", e))
        frames = rows["frame_index"].to_numpy()
        if len(frames) and not np.array_equal(frames, np.arange(len(frames))):
            gap = int(np.nonzero(frames != np.arange(len(frames)))[0][0])
            add(Problem("FRAME_INDEX_GAP", f"frame_index breaks at position {gap} (value {int(frames[gap])})", e))
        stamps = rows["timestamp"].to_numpy(dtype=np.float64)
        if len(stamps) and np.max(np.abs(stamps - frames / fps)) > TOLERANCE_S * 10:
            add(Problem("TIMESTAMP_SPACING", f"timestamps deviate from frame_index / fps by up to "
                                             f"{np.max(np.abs(stamps - frames / fps)):.4f} s", e))
        expected = np.arange(int(row.dataset_from_index), int(row.dataset_from_index) + len(rows))
        if not np.array_equal(rows["index"].to_numpy(), expected):
            add(Problem("EPISODE_INDEX_RANGE", "global index differs from dataset_from_index + frame_index", e))


def _check_video(root: Path, key: str, path: Path, group: pd.DataFrame, result: DecodedFile, feature: dict,
                 fps: float, data: pd.DataFrame, add: Any) -> None:
    rel = str(path.relative_to(root))
    if not result.opened:
        add(Problem("VIDEO_UNREADABLE", f"{rel}: {'; '.join(result.exceptions)}", file=rel))
        return
    if result.exceptions:
        add(Problem("VIDEO_DECODE_ERROR", f"{rel}: {len(result.exceptions)} packets failed ({result.exceptions[0]})",
                    file=rel))
    if result.error_log:
        add(Problem("VIDEO_DECODER_LOG", f"{rel}: the decoder reported {len(result.error_log)} errors while concealing "
                                         f"damage ({result.error_log[0]})", file=rel))
    names = feature.get("names") or []
    shape = feature["shape"]
    height, width = (shape[names.index("height")], shape[names.index("width")]) if "height" in names else shape[:2]
    if (result.width, result.height) != (width, height):
        add(Problem("VIDEO_RESOLUTION", f"{rel}: {result.width}x{result.height}, features say {width}x{height}",
                    file=rel))
    if result.average_rate and abs(result.average_rate - fps) > 0.01:
        add(Problem("VIDEO_FPS", f"{rel}: {result.average_rate:.2f} fps, dataset says {fps}", file=rel))
    declared = feature.get("info", {}).get("video.codec")
    if declared and declared not in (result.codec, {"libsvtav1": "av1"}.get(result.codec)) and not (
            declared == "av1" and result.codec in ("libdav1d", "libaom-av1")):
        add(Problem("VIDEO_CODEC", f"{rel}: codec {result.codec}, features say {declared}", file=rel,
                    severity="warning"))
    pts = np.array(sorted(result.pts_s))
    previous_to = None
    for row in group.sort_values(f"videos/{key}/from_timestamp").to_dict("records"):
        e = int(row["episode_index"])
        start, stop = float(row[f"videos/{key}/from_timestamp"]), float(row[f"videos/{key}/to_timestamp"])
        length = int(row["length"])
        if previous_to is not None and start < previous_to - 1e-6:
            add(Problem("VIDEO_WINDOW_OVERLAP", f"{rel}: window [{start:.3f}, {stop:.3f}) overlaps the previous one",
                        e, rel))
        previous_to = stop
        inside = int(np.sum((pts >= start - 1e-6) & (pts < stop - 1e-6)))
        if inside != length:
            add(Problem("VIDEO_WINDOW_FRAMES", f"{rel} [{key}]: {inside} decoded frames in the episode's window, "
                                               f"{length} expected", e, rel))
        stamps = data.loc[data["episode_index"] == e, "timestamp"].to_numpy(dtype=np.float64)
        if len(pts) and len(stamps):
            wanted = start + stamps
            nearest = np.abs(pts[np.clip(np.searchsorted(pts, wanted), 0, len(pts) - 1)] - wanted)
            left = np.abs(pts[np.clip(np.searchsorted(pts, wanted) - 1, 0, len(pts) - 1)] - wanted)
            gap = np.minimum(nearest, left)
            if np.any(gap >= TOLERANCE_S):
                first = int(np.nonzero(gap >= TOLERANCE_S)[0][0])
                add(Problem("VIDEO_TIMESTAMP_UNREACHABLE", f"{rel} [{key}]: {int(np.sum(gap >= TOLERANCE_S))} frames "
                                                           f"have no video frame within {TOLERANCE_S} s (first: "
                                                           f"frame {first}, off by {gap[first]:.4f} s)", e, rel))
