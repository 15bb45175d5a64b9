"""Per-trial evidence on disk: final frames, MP4s, trajectories (tables and the simulator's exact
state), the judge's trace.

Written into a temporary folder and renamed into place when the trial ends, so
a killed run never leaves a half-written trial folder that looks complete.

`EvidenceFiles` writes the files; `EvidenceRecorder` is what the control loop talks to. With an
`EvidenceWriter` (harness/run/evidence_writer.py) the recorder only logs the step and hands each
evidence frame on (on the simulator: the state the frame needs, rendered in the writer's
process), so neither rendering nor encoding runs inside the loop. Without one, it renders and
writes in the loop, as the reference the writer's output is tested against.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.models.verdict import JudgeVerdict
from harness.sim.trajectory import TRAJECTORY_FILE, TrajectoryLog, save_trajectory

FrameSource = Callable[[str, int, int], np.ndarray | None]


class TrialWriter(Protocol):
    """What the recorder hands a trial's evidence to off the loop: `run.evidence_writer.EvidenceWriter`, which
    imports this module's folder helpers, so the recorder names only this surface (no import back)."""

    def begin(self, folder: Path, cameras: list[str], video_fps: float, video_size: tuple[int, int],
              dropout: Any | None) -> None: ...

    def frame(self, camera: str, t: float, frame: Any, block: bool) -> bool: ...

    def watch(self, camera: str, t: float, request: Any, block: bool) -> bool: ...

    def dropout(self) -> str | None: ...

    def write(self, finals: dict[str, Any], rows: list[dict[str, Any]], judge_trace: JudgeVerdict | None,
              trajectory: dict[str, Any] | None = None) -> None: ...

    def videos(self, requests: dict[str, list[tuple[float, Any]]], video_fps: float,
               video_size: tuple[int, int]) -> None: ...

    def complete(self, dropped: dict[str, int]) -> dict[str, str]: ...

    def abandon(self) -> None: ...
PNG_COMPRESS_LEVEL = 1  # 4x faster than PIL's default (6) for ~10 % more bytes; the pixels are the same


class VideoEncoder:
    """One evidence MP4 (H.264, yuv420p): the encoder path of every evidence video, replays included."""

    def __init__(self, path: Path, fps: float, width: int, height: int) -> None:
        import av

        self.container = av.open(str(path), mode="w", format="mp4")
        self.stream = self.container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
        self.stream.width, self.stream.height = width, height
        self.stream.pix_fmt = "yuv420p"
        # one encoder thread: x264's frame threads cost 40 % more CPU on these small frames, and the
        # writer already encodes each camera in its own process
        self.stream.options = {"preset": "veryfast", "crf": "28", "threads": "1"}

    def add(self, frame: np.ndarray) -> None:
        import av
        from PIL import Image

        if frame.shape[1] != self.stream.width or frame.shape[0] != self.stream.height:
            frame = np.asarray(Image.fromarray(frame).resize((self.stream.width, self.stream.height)))
        for packet in self.stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


class EvidenceFiles:
    """The files of one trial's evidence folder."""

    def __init__(self, folder: Path, video_fps: float, video_size: tuple[int, int], fresh: bool = True) -> None:
        """`fresh`: start an empty `.partial` folder; False: write into the one the caller prepared (the
        evidence writer's lanes share one folder per trial, made by the writer before any lane writes)."""
        self.folder = folder
        self.tmp = fresh_partial(folder) if fresh else partial_folder(folder)
        self.video_fps = video_fps
        self.size = video_size
        self._encoders: dict[str, VideoEncoder] = {}
        self.frames_written: dict[str, int] = {}

    def add_video_frame(self, cam: str, frame: np.ndarray) -> None:
        if cam not in self._encoders:
            self._encoders[cam] = VideoEncoder(self.tmp / f"{cam}.mp4", self.video_fps, frame.shape[1], frame.shape[0])
        self._encoders[cam].add(frame)
        self.frames_written[cam] = self.frames_written.get(cam, 0) + 1

    def finish(self, final_frames: dict[str, np.ndarray | None], rows: list[dict[str, Any]],
               judge_trace: JudgeVerdict | None, dropped: dict[str, int] | None = None,
               trajectory: dict[str, np.ndarray] | None = None) -> dict[str, str]:
        """Close videos, write frames, trajectory and trace; move the folder into place."""
        self.write_part(final_frames, rows, judge_trace, trajectory)
        return complete_folder(self.folder, dropped, self.frames_written)

    def write_part(self, final_frames: dict[str, np.ndarray | None], rows: list[dict[str, Any]] | None,
                   judge_trace: JudgeVerdict | None,
                   trajectory: dict[str, np.ndarray] | None = None) -> dict[str, int]:
        """Close this writer's videos and write its final frames (and, given `rows`, the trajectory and
        the judge's trace; given `trajectory`, the simulator's state trajectory) into the `.partial`
        folder; returns the video frames written per camera."""
        from PIL import Image

        for encoder in self._encoders.values():
            encoder.close()
        self._encoders.clear()
        for cam, frame in final_frames.items():
            if frame is not None:
                Image.fromarray(frame).save(self.tmp / f"final_{cam}.png", compress_level=PNG_COMPRESS_LEVEL)
        if rows is not None:
            import pandas as pd

            pd.DataFrame(rows).to_parquet(self.tmp / "trajectory.parquet", index=False)
            if judge_trace is not None:
                (self.tmp / "judge.json").write_text(json.dumps(judge_trace.to_json(), indent=2))
        if trajectory is not None:
            save_trajectory(self.tmp / TRAJECTORY_FILE, trajectory)
        return dict(self.frames_written)

    def abandon(self, remove: bool = True) -> None:
        """Close what is open; `remove` deletes the `.partial` folder (a lane leaves that to the writer)."""
        for encoder in self._encoders.values():
            with contextlib.suppress(Exception):
                encoder.container.close()
        self._encoders.clear()
        if remove:
            shutil.rmtree(self.tmp, ignore_errors=True)


def partial_folder(folder: Path) -> Path:
    """Where a trial's evidence is written until it is complete."""
    return folder.with_name(folder.name + ".partial")


def fresh_partial(folder: Path) -> Path:
    """An empty `.partial` folder for `folder` (one left by a killed run is removed first)."""
    tmp = partial_folder(folder)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def complete_folder(folder: Path, dropped: dict[str, int] | None, written: dict[str, int]) -> dict[str, str]:
    """Say in the folder what was dropped, then move the `.partial` folder into place; returns its files."""
    tmp = partial_folder(folder)
    if dropped and any(dropped.values()):  # said in the folder itself, beside the shortened videos
        (tmp / "evidence_dropped.json").write_text(json.dumps(
            {"dropped_frames": dropped, "written_frames": written}, indent=2))
    if folder.exists():   # left by a run killed before it recorded this attempt: kept, never deleted
        folder.rename(_free_name(folder, "unrecorded"))
    tmp.rename(folder)
    return {path.name: str(path) for path in sorted(folder.iterdir())}


class VideoMode(StrEnum):
    """Which attempts get evidence videos (`harness run --video`).

    On the simulator every attempt keeps its exact state trajectory (`sim_state.npz`), from which any
    video can be drawn later (`harness replay`); `failures` draws the videos of failed and voided
    attempts when they are recorded, `all` of every attempt (while it runs), `none` of no attempt.
    On a real arm frames come from cameras: `all` records them, `none` keeps final frames only.
    """

    ALL = "all"
    FAILURES = "failures"
    NONE = "none"

    @classmethod
    def of(cls, value: VideoMode | bool) -> VideoMode:
        """`True`/`False` (the engine's older boolean option) are `all`/`none`."""
        if isinstance(value, VideoMode):
            return value
        return cls.ALL if value else cls.NONE


class EvidenceRecorder:
    """The control loop's side of a trial's evidence.

    `world` (the simulator) lets a writer render frames from recorded state, and makes every attempt
    keep its state trajectory; `frame_source` gives frames that already exist (a real arm's last
    observation) or renders in the loop when there is no writer.

    The folder is written in two steps: `write` (final frames, tables, trajectory: into the `.partial`
    folder) and `complete(videos=...)` (draws the videos a lazy mode still owes, then renames the
    folder into place), so the engine can decide about videos once it knows the attempt's label.
    """

    def __init__(self, folder: Path, cameras: list[str], frame_source: FrameSource, control_fps: int,
                 video_fps: float = 10.0, video_size: tuple[int, int] = (320, 240), video: VideoMode | bool = True,
                 writer: TrialWriter | None = None, world: Any | None = None, block: bool = True,
                 dropout: Any | None = None, eager: bool | None = None) -> None:
        self.folder = folder
        self.cameras = cameras
        self.frame_source = frame_source
        self.mode = VideoMode.of(video)
        self.sim = world
        # eager: frames drawn while the trial runs (a real arm's cameras; `all`; a simulated trial without a
        # writer, or one whose camera watch needs its frames: the caller says so)
        if eager is None:
            lazy_possible = world is not None and writer is not None
            eager = self.mode is VideoMode.ALL or (self.mode is VideoMode.FAILURES and not lazy_possible)
        self.eager = eager and self.mode is not VideoMode.NONE
        ticks = self.eager or world is not None   # a simulated attempt logs its video ticks in every mode
        self.every = max(1, round(control_fps / video_fps)) if ticks else 0
        self.control_fps = control_fps
        self._next_tick = 0
        self.video_fps = control_fps / self.every if ticks else 0
        self.size = video_size
        self.rows: list[dict[str, Any]] = []
        self.last_frames: dict[str, np.ndarray | None] = {}
        self.writer = writer
        self.world = world if writer is not None else None
        self.block = block
        self.dropped: dict[str, int] = dict.fromkeys(cameras, 0)
        self.log = TrajectoryLog(cameras, self.video_fps, video_size) if world is not None else None
        self._videos_drawn = self.eager
        self._completed = False
        if writer is None:
            self._files: EvidenceFiles | None = EvidenceFiles(folder, self.video_fps, video_size)
        else:
            self._files = None
            writer.begin(folder, cameras, self.video_fps, video_size, dropout)

    def wants_frame(self, t: float) -> bool:
        """The first step at or after each video frame's time (in lock-step: every `every`-th step;
        under a latency model a step can span several control periods)."""
        if self.every == 0:
            return False
        tick = round(t * self.control_fps)
        if tick < self._next_tick:
            return False
        self._next_tick = (tick // self.every + 1) * self.every
        return True

    def record_step(self, step: int, t: float, observation: dict[str, Any], action: dict[str, float],
                    timing: dict[str, float], read_at_s: float | None = None) -> dict[str, np.ndarray | None]:
        """Log one control step; returns the frames captured in the loop (for the dropout watch).

        `t` is the step's episode time (the simulator's clock, or a real arm's schedule); `read_at_s`, where
        it differs, when the observation was really read: a real arm waits out each synchronous inference
        (ACT's chunk took 0.8 s on a loaded machine), and the trajectory's times, which failure anatomy dates
        events by, must say so (a first motion at 0.07 s on the schedule was 0.8 s on the desk).

        On the simulator the step's state is logged, and each video tick's frame requests (the sensor
        noise advances exactly as if the frames were drawn, so a frame drawn later is the frame an eager
        run shows); with a writer nothing is rendered here: the writer's own watch reports a frozen camera
        through `dropout()`.
        """
        row = {"step": step, "t": t if read_at_s is None else read_at_s}
        row.update({f"obs.{k}": float(v) for k, v in observation.items() if k.endswith((".pos", ".load"))})
        row.update({f"action.{k}": float(v) for k, v in action.items()})
        row.update(timing)
        self.rows.append(row)
        captured: dict[str, np.ndarray | None] = {}
        requests: dict[str, Any] = {}
        if self.log is not None:
            self.log.step(self.sim, step, t)
        if not self.wants_frame(t):
            return captured
        if self.log is not None and self.sim is not None:   # (a log is kept exactly when there is a simulator)
            requests = {cam: self.sim.frame_request(cam, *self.size) for cam in self.cameras}
            self.log.frame_tick(requests)
            if not self.eager:
                return captured
        for cam in self.cameras:
            if self.world is not None and self.writer is not None:   # (a world is kept only with a writer)
                if not self.writer.frame(cam, t, requests[cam], self.block):
                    self.dropped[cam] += 1
                continue
            frame = (self.sim.render_request(requests[cam]) if requests and self.sim is not None
                     else self.frame_source(cam, *self.size))
            captured[cam] = frame
            self.last_frames[cam] = frame
            if frame is None:
                continue
            if self._files is not None:
                self._files.add_video_frame(cam, frame)
            elif self.writer is not None and not self.writer.frame(cam, t, frame, self.block):
                self.dropped[cam] += 1
        return captured

    def watch(self, camera: str, t: float, width: int, height: int) -> bool:
        """Hand a dropout-watch frame of a simulated camera that nothing else looks at (no video, and the
        policy does not read it) to the writer, which draws and inspects it and reports through
        `dropout()`; False when there is no writer to do that, and the caller must look itself."""
        if self.world is None or self.writer is None:
            return False
        self.writer.watch(camera, t, self.world.frame_request(camera, width, height), self.block)
        return True

    def dropout(self) -> str | None:
        """A camera the writer found frozen, black or missing in the evidence frames, if any."""
        return self.writer.dropout() if self.writer is not None else None

    def final_frames(self, width: int, height: int) -> dict[str, Any]:
        """The final frames, or (on the simulator with a writer) what the writer needs to draw them."""
        if self.sim is not None:
            requests = {cam: self.sim.frame_request(cam, width, height) for cam in self.cameras}
            if self.log is not None:
                self.log.final(requests)
            if self.world is not None:
                return requests
            return {cam: self.sim.render_request(request) for cam, request in requests.items()}
        return {cam: self.frame_source(cam, width, height) for cam in self.cameras}

    def finish(self, final_frames: dict[str, Any], judge_trace: JudgeVerdict | None) -> dict[str, str]:
        """`write`, then `complete` with the videos this mode draws without a label (`all`)."""
        self.write(final_frames, judge_trace)
        return self.complete(videos=False)

    def write(self, final_frames: dict[str, Any], judge_trace: JudgeVerdict | None) -> None:
        """Final frames, the step table, the judge's trace and the state trajectory into the `.partial`
        folder; with a writer, wait until its lanes have written them (off the loop)."""
        trajectory = self.log.arrays(self.sim) if self.log is not None else None
        if self._files is not None:
            self._files.write_part(final_frames, self.rows, judge_trace, trajectory)
        elif self.writer is not None:   # (exactly one of the two is set)
            self.writer.write(final_frames, self.rows, judge_trace, trajectory)

    def draw_videos(self) -> None:
        """Draw the videos `--video failures` owes a failed or voided attempt (the writer's lanes, from the
        logged requests); nothing in another mode, or when they were drawn while it ran."""
        if self.mode is not VideoMode.FAILURES or self._videos_drawn or self.log is None or self.writer is None:
            return
        self.writer.videos({cam: self.log.requests(cam) for cam in self.cameras}, self.video_fps, self.size)
        self._videos_drawn = True

    def complete(self, videos: bool) -> dict[str, str]:
        """`videos`: this attempt wants its videos (a failure or a void under `--video failures`): drawn now
        if they were not drawn while it ran. Then the folder goes into place; returns its files."""
        if videos:
            self.draw_videos()
        if self._files is not None:
            artifacts = complete_folder(self.folder, self.dropped, self._files.frames_written)
        elif self.writer is not None:
            artifacts = self.writer.complete(self.dropped)
        self._completed = True
        return artifacts

    def abandon(self) -> None:
        if self._completed:
            return
        if self._files is not None:
            self._files.abandon()
        elif self.writer is not None:
            self.writer.abandon()


def _free_name(folder: Path, tag: str) -> Path:
    """`<folder>.<tag>-N` with the first N not taken."""
    number = 1
    while (candidate := folder.with_name(f"{folder.name}.{tag}-{number}")).exists():
        number += 1
    return candidate
