"""Per-trial evidence on disk: final frames, one MP4 per camera, trajectories, the judge's trace.

Written into a temporary folder and renamed into place when the trial ends, so
a killed run never leaves a half-written trial folder that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pandas as pd
from PIL import Image

FrameSource = Callable[[str, int, int], np.ndarray | None]


class EvidenceRecorder:
    def __init__(self, folder: Path, cameras: list[str], frame_source: FrameSource, control_fps: int,
                 video_fps: float = 10.0, video_size: tuple[int, int] = (320, 240), video: bool = True) -> None:
        self.folder = folder
        self.tmp = folder.with_name(folder.name + ".partial")
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        self.cameras = cameras
        self.frame_source = frame_source
        self.every = max(1, round(control_fps / video_fps)) if video else 0
        self.video_fps = control_fps / self.every if video else 0
        self.size = video_size
        self.rows: list[dict[str, Any]] = []
        self._containers: dict[str, Any] = {}
        self._streams: dict[str, Any] = {}
        self.last_frames: dict[str, np.ndarray | None] = {}

    def wants_frame(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def record_step(self, step: int, t: float, observation: dict[str, Any], action: dict[str, float],
                    timing: dict[str, float]) -> dict[str, np.ndarray | None]:
        """Log one control step; returns any frames captured for the video (for dropout checks)."""
        row = {"step": step, "t": t}
        row.update({f"obs.{k}": float(v) for k, v in observation.items() if k.endswith(".pos")})
        row.update({f"action.{k}": float(v) for k, v in action.items()})
        row.update(timing)
        self.rows.append(row)
        captured: dict[str, np.ndarray | None] = {}
        if self.wants_frame(step):
            for cam in self.cameras:
                frame = self.frame_source(cam, *self.size)
                captured[cam] = frame
                self.last_frames[cam] = frame
                if frame is not None:
                    self._write_video_frame(cam, frame)
        return captured

    def _write_video_frame(self, cam: str, frame: np.ndarray) -> None:
        if cam not in self._containers:
            container = av.open(str(self.tmp / f"{cam}.mp4"), mode="w")
            stream = container.add_stream("libx264", rate=Fraction(self.video_fps).limit_denominator(1000))
            stream.width, stream.height = frame.shape[1], frame.shape[0]
            stream.pix_fmt = "yuv420p"
            stream.options = {"preset": "veryfast", "crf": "28"}
            self._containers[cam], self._streams[cam] = container, stream
        stream = self._streams[cam]
        if frame.shape[1] != stream.width or frame.shape[0] != stream.height:
            frame = np.asarray(Image.fromarray(frame).resize((stream.width, stream.height)))
        for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
            self._containers[cam].mux(packet)

    def finish(self, final_frames: dict[str, np.ndarray | None], judge_trace: dict[str, Any] | None) -> dict[str, str]:
        """Close videos, write frames, trajectory and trace; move the folder into place."""
        for cam, container in self._containers.items():
            for packet in self._streams[cam].encode():
                container.mux(packet)
            container.close()
        self._containers.clear()
        for cam, frame in final_frames.items():
            if frame is not None:
                Image.fromarray(frame).save(self.tmp / f"final_{cam}.png")
        pd.DataFrame(self.rows).to_parquet(self.tmp / "trajectory.parquet", index=False)
        if judge_trace is not None:
            (self.tmp / "judge.json").write_text(json.dumps(judge_trace, indent=2))
        if self.folder.exists():   # left by a run killed before it recorded this attempt: kept, never deleted
            self.folder.rename(_free_name(self.folder, "unrecorded"))
        self.tmp.rename(self.folder)
        return {path.name: str(path) for path in sorted(self.folder.iterdir())}

    def abandon(self) -> None:
        for container in self._containers.values():
            with contextlib.suppress(Exception):
                container.close()
        self._containers.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _free_name(folder: Path, tag: str) -> Path:
    """`<folder>.<tag>-N` with the first N not taken."""
    number = 1
    while (candidate := folder.with_name(f"{folder.name}.{tag}-{number}")).exists():
        number += 1
    return candidate
