"""`harness replay`: a simulated attempt's video drawn from its state trajectory, from any viewpoint.

Why: a simulated trial keeps its exact state (`sim_state.npz`), not its pixels, unless it failed
(`harness run --video failures`). Any video can be drawn afterwards: with the recorded camera, size
and rate it is the video an eager run would have drawn, frame for frame (the same frame requests,
sensor noise included, drawn by `SimWorld.render_request`, encoded by the evidence writer's
`VideoEncoder`); with `--view` a MuJoCo free camera follows the gripper and cube from any angle.

`--failures RUN_FOLDER` draws the videos the run's failed and voided attempts lack (recorded with
`--video none`, or before lazy videos existed), into their evidence folders, under the run folder's
writer lock.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import HarnessInputError
from harness.models.evidence_audit import evidence_folder_name
from harness.models.taxonomy import Label
from harness.run.evidence import VideoEncoder
from harness.sim.trajectory import TRAJECTORY_FILE, Trajectory, load_trajectory
from harness.sim.world import NOISE_PATTERNS, FrameRequest, SimWorld


@dataclass(frozen=True)
class ReplaySettings:
    camera: str | None = None                      # a mounted camera (default top, unless `view`)
    view: tuple[float, float, float] | None = None  # a free camera: azimuth, elevation (deg), distance (m)
    size: tuple[int, int] | None = None             # default: the recorded video's
    fps: float | None = None                        # default: the recorded video's


def trajectory_of(folder: Path) -> Trajectory:
    """The trial folder's trajectory, checked against this installation's model files."""
    path = folder / TRAJECTORY_FILE
    if not folder.is_dir():
        raise HarnessInputError(folder, None, "no such trial folder")
    if not path.is_file():
        raise HarnessInputError(folder, TRAJECTORY_FILE, "missing: a real arm's trial, or one recorded before "
                                                         "simulated trials kept their state")
    trajectory = load_trajectory(path)
    trajectory.check_model()
    return trajectory


def frames(trajectory: Trajectory, settings: ReplaySettings) -> Iterator[np.ndarray]:
    """The replay's frames, in order."""
    camera = settings.camera or ("top" if settings.view is None else None)
    if camera is not None and camera not in trajectory.cameras:
        raise HarnessInputError(None, "--camera", f"{camera}: this trial recorded {', '.join(trajectory.cameras)}")
    width, height = settings.size or trajectory.video_size
    fps = settings.fps or float(trajectory.meta["video_fps"])
    world = SimWorld(trajectory.geometry, control_fps=int(trajectory.meta["control_fps"]))
    try:
        recorded = (settings.view is None and (width, height) == trajectory.video_size
                    and abs(fps - float(trajectory.meta["video_fps"])) < 1e-9)
        drawn = camera or "top"   # the camera drawn without a free view (then `camera` is always set)
        if recorded:   # the recorded frames exactly: same requests, same noise
            for _, request in trajectory.frame_requests(drawn):
                yield world.render_request(request)
            return
        for i, row in enumerate(trajectory.rows_at(fps)):
            qpos = trajectory.posed_qpos[row]
            if settings.view is not None:
                yield world.render_view(qpos, settings.view, width, height)
            else:
                yield world.render_request(FrameRequest(drawn, width, height, qpos, i % NOISE_PATTERNS, False))
    finally:
        world.close()


def replay(folder: Path, settings: ReplaySettings, out: Path) -> int:
    """Draw the replay into `out`: an .mp4, or else a folder of PNG frames (lossless). Returns the frames
    written; written under a `.partial` name and renamed, so a killed replay leaves no half video."""
    trajectory = trajectory_of(folder)
    fps = settings.fps or float(trajectory.meta["video_fps"])
    partial = out.with_name(out.name + ".partial")
    count = 0
    drawn = _progress(frames(trajectory, settings), f"{folder.name}", len(trajectory.rows_at(fps)))
    if out.suffix.lower() == ".mp4":
        encoder: VideoEncoder | None = None
        for frame in drawn:
            if encoder is None:
                encoder = VideoEncoder(partial, fps, frame.shape[1], frame.shape[0])
            encoder.add(frame)
            count += 1
        if encoder is not None:
            encoder.close()
            partial.replace(out)
        return count
    from PIL import Image

    partial.mkdir(parents=True, exist_ok=True)
    for frame in drawn:
        Image.fromarray(frame).save(partial / f"frame-{count:04d}.png")
        count += 1
    if out.exists():
        raise HarnessInputError(out, "-o", "exists: name a new folder (or an .mp4)")
    partial.rename(out)
    return count


def find_scoresheet(run_folder: Path) -> Path:
    """The scoresheet of a run folder (`runs[/...]/<sheet>`): `<sheet>.yaml` in a `scoresheets` folder (or one below
    it, `--scoresheet scoresheets/final/x.yaml` runs) here or beside the runs root, whose attempts name this run's
    evidence folders. One clear error when none or more than one does."""
    name = run_folder.name
    roots = [Path.cwd(), *list(run_folder.resolve().parents)[:3]]
    found: list[Path] = []
    for root in roots:
        folder = root / "scoresheets"
        if folder.is_dir():
            found += [p.resolve() for p in [folder / f"{name}.yaml", *folder.glob(f"*/{name}.yaml")] if p.is_file()]
    found = list(dict.fromkeys(found))
    mine = [p for p in found if _names_run(p, run_folder)]
    if len(mine) == 1 or (len(found) == 1 and not mine):
        return (mine or found)[0]
    if not found:
        raise HarnessInputError(run_folder, "--scoresheet", f"no scoresheets/{name}.yaml here or beside the runs "
                                                            "folder: name the run's scoresheet")
    raise HarnessInputError(run_folder, "--scoresheet", f"{len(mine or found)} scoresheets could be this run's ("
                            + ", ".join(str(p) for p in (mine or found)) + "): name one")


def _names_run(sheet: Path, run_folder: Path) -> bool:
    """Whether the sheet's records name an evidence folder of this run (`<run>/trial-...`)."""
    try:
        text = sheet.read_text(errors="replace")
    except OSError:
        return False
    return f"{run_folder.name}/trial-" in text


def replay_failures(run_folder: Path, sheet_path: Path) -> list[Path]:
    """Draw every recorded camera's video that a failed or voided attempt's folder lacks; returns the videos
    written."""
    from harness.models.scoresheet import load_scoresheet
    from harness.storage.lock import WriterLock

    if not run_folder.is_dir():
        raise HarnessInputError(run_folder, None, "no such run folder")
    if not sheet_path.is_file():
        raise HarnessInputError(sheet_path, "--scoresheet", "not found: name the run's scoresheet")
    sheet = load_scoresheet(sheet_path)
    written: list[Path] = []
    with WriterLock(run_folder, "harness replay --failures", folder=True):
        for attempt in sheet.attempts:
            if attempt.label is Label.SUCCESS:
                continue
            folder = run_folder / evidence_folder_name(attempt.trial_index, attempt.attempt)
            if not (folder / TRAJECTORY_FILE).is_file():
                continue
            trajectory = trajectory_of(folder)
            for camera in trajectory.cameras:
                video = folder / f"{camera}.mp4"
                if not video.exists():
                    replay(folder, ReplaySettings(camera=camera), video)
                    written.append(video)
    return written


def _progress(items: Iterator[np.ndarray], name: str, total: int) -> Iterator[np.ndarray]:
    """A progress bar on stderr when it is a terminal (rendering is seconds per video)."""
    from tqdm import tqdm

    yield from tqdm(items, desc=name, total=total, unit="frame", disable=not sys.stderr.isatty(), leave=False)
