"""The shared evidence writer: a separate process that renders, encodes and writes evidence.

Why a process: rendering a simulated frame (llvmpipe) and encoding it cost tens of
milliseconds, which inside the control loop either slowed every simulated trial several fold
or, on a paced loop, missed deadlines. The loop now sends small messages: the simulator state
a frame needs (`FrameRequest`: joint configuration, sensor-noise index, frozen flag) or, on a
real arm, the camera's own frame. The writer draws frames in its own copy of the scene, so a
second core does the work, and they are pixel-equal to frames drawn in the loop.

The queue is bounded. A lock-step simulation has no deadline, so it waits for room (every
frame is kept); a paced loop never waits: a frame that finds the queue full is dropped,
counted, and the trial's folder says so (`evidence_dropped.json`). A trial's scoresheet entry
is written only after `finish` returns, that is after every file of its evidence is in place.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

QUEUE_FRAMES = 16
POLL_S = 0.05


class EvidenceWriterError(RuntimeError):
    """The writer process failed or died; the trial's evidence is incomplete."""


@dataclass(frozen=True)
class _Begin:
    folder: Path
    cameras: list[str]
    video_fps: float
    video_size: tuple[int, int]
    dropout: Any


@dataclass(frozen=True)
class _Frame:
    camera: str
    t: float
    frame: Any  # FrameRequest (simulator) or an RGB array (real camera)


@dataclass(frozen=True)
class _Finish:
    finals: dict[str, Any]
    rows: list[dict[str, Any]]
    judge_trace: dict[str, Any] | None
    dropped: dict[str, int]


@dataclass(frozen=True)
class _Abandon:
    pass


@dataclass(frozen=True)
class _Stop:
    pass


class EvidenceWriter:
    """One writer process per run, reused by every trial.

    `scene` is the `SceneGeometry` of the simulated table (None on a real arm): the writer
    builds its own world from it the first time it is asked to draw a frame.
    """

    def __init__(self, scene: Any | None = None, control_fps: int = 30, queue_frames: int = QUEUE_FRAMES) -> None:
        context = mp.get_context("spawn")  # a fresh interpreter: no inherited GL context or threads
        self._requests = context.Queue(maxsize=queue_frames)
        self._results = context.Queue()
        self._process = context.Process(target=_serve, args=(self._requests, self._results, scene, control_fps),
                                        name="harness-evidence-writer", daemon=True)
        self._process.start()
        self._dropout: str | None = None

    # --- the loop's side ---------------------------------------------------
    def begin(self, folder: Path, cameras: list[str], video_fps: float, video_size: tuple[int, int],
              dropout: Any | None) -> None:
        self._dropout = None
        self._put(_Begin(folder, list(cameras), video_fps, video_size, dropout), block=True)

    def frame(self, camera: str, t: float, frame: Any, block: bool) -> bool:
        """Hand one evidence frame on; False when it was dropped because the queue was full."""
        return self._put(_Frame(camera, t, frame), block)

    def dropout(self) -> str | None:
        """What the writer's camera watch found so far in this trial's frames (never waits)."""
        self._drain()
        return self._dropout

    def finish(self, finals: dict[str, Any], rows: list[dict[str, Any]], judge_trace: dict[str, Any] | None,
               dropped: dict[str, int]) -> dict[str, str]:
        """Wait until the trial's folder is complete and in place; returns its files."""
        self._put(_Finish(finals, rows, judge_trace, dict(dropped)), block=True)
        while True:
            kind, value = self._next_result()
            if kind == "dropout":
                self._dropout = value
            elif kind == "done":
                return value
            else:
                raise EvidenceWriterError(value)

    def abandon(self) -> None:
        """Discard the trial in flight (its partial folder is removed by the writer)."""
        if self._process.is_alive():
            self._put(_Abandon(), block=True)

    def close(self, timeout_s: float = 10.0) -> None:
        if self._process.is_alive():
            with contextlib.suppress(queue.Full):
                self._requests.put(_Stop(), timeout=timeout_s)
            self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(1.0)
        self._requests.close()
        self._results.close()

    # --- plumbing ----------------------------------------------------------
    def _put(self, message: Any, block: bool) -> bool:
        if not block:
            try:
                self._requests.put_nowait(message)
            except queue.Full:
                return False
            return True
        while True:
            self._check_alive()
            try:
                self._requests.put(message, timeout=POLL_S)
                return True
            except queue.Full:
                continue

    def _next_result(self) -> tuple[str, Any]:
        while True:
            try:
                return self._results.get(timeout=POLL_S)
            except queue.Empty:
                self._check_alive()

    def _drain(self) -> None:
        while True:
            try:
                kind, value = self._results.get_nowait()
            except queue.Empty:
                return
            if kind == "dropout":
                self._dropout = value
            elif kind == "error":
                raise EvidenceWriterError(value)

    def _check_alive(self) -> None:
        if not self._process.is_alive():
            raise EvidenceWriterError(f"the evidence writer process exited (code {self._process.exitcode})")


def _serve(requests: Any, results: Any, scene: Any | None, control_fps: int) -> None:
    """The writer process: one trial at a time, in the order the loop sent its messages."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle; it tells us to stop
    from harness.run.camera_watch import CameraWatch
    from harness.run.evidence import EvidenceFiles

    world = None
    files: EvidenceFiles | None = None
    watch: CameraWatch | None = None
    reported = False
    parent = mp.parent_process()
    while True:
        try:
            message = requests.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():  # the run was killed: nothing more will come
                break
            continue
        if isinstance(message, _Stop):
            break
        try:
            if isinstance(message, _Begin):
                if files is not None:
                    files.abandon()
                files = EvidenceFiles(message.folder, message.video_fps, message.video_size)
                watch = CameraWatch(message.cameras, message.dropout)
                reported = False
            elif isinstance(message, _Abandon):
                if files is not None:
                    files.abandon()
                files = None
            elif isinstance(message, _Frame) and files is not None:
                frame = message.frame
                if not isinstance(frame, np.ndarray):
                    world = world or _world(scene, control_fps)
                    frame = world.render_request(frame)
                    watch.see(message.camera, frame, message.t)
                    reason = watch.dropout(message.t)
                    if reason and not reported:
                        results.put(("dropout", reason))
                        reported = True
                files.add_video_frame(message.camera, frame)
            elif isinstance(message, _Finish) and files is None:
                results.put(("error", "this trial's evidence was already lost (see the error before)"))
            elif isinstance(message, _Finish):
                finals = {}
                for cam, final in message.finals.items():
                    if final is not None and not isinstance(final, np.ndarray):
                        world = world or _world(scene, control_fps)
                        final = world.render_request(final)
                    finals[cam] = final
                artifacts = files.finish(finals, message.rows, message.judge_trace, message.dropped)
                files = None
                results.put(("done", artifacts))
        except Exception as exc:  # reported to the loop, which voids nothing silently
            if files is not None:
                files.abandon()
                files = None
            results.put(("error", f"{type(exc).__name__}: {exc}"))
    if files is not None:
        files.abandon()
    if world is not None:
        world.close()


def _world(scene: Any | None, control_fps: int) -> Any:
    import harness.sim  # noqa: F401  (selects the headless GL backend before mujoco loads)
    from harness.sim.world import SimWorld

    return SimWorld(scene, control_fps=control_fps)
