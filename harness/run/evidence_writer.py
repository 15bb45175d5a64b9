"""The shared evidence writer: separate processes that render, encode and write evidence.

Why processes: rendering a simulated frame (llvmpipe) and encoding it cost tens of
milliseconds, which inside the control loop either slowed every simulated trial several fold
or, on a paced loop, missed deadlines. The loop now sends small messages: the simulator state
a frame needs (`FrameRequest`: joint configuration, sensor-noise index, frozen flag) or, on a
real arm, the camera's own frame. The writer draws frames in its own copy of the scene, and
they are pixel-equal to frames drawn in the loop.

Why lanes: drawing the frames is most of a trial's work (two cameras, 85 frames each, 12-25 ms
a frame however small), more than the loop's own. The writer therefore runs one process per lane
(one per core, at most two) and gives each camera of a trial to one lane, which draws, watches,
encodes and writes that camera's files; the last lane (the simulator's wrist camera, cheaper to
draw than the top view) also writes the trajectory and the judge's trace. All lanes write into
the trial's one `.partial` folder, which this side creates and, once every lane has reported its
part done, renames into place. On a machine with one core there is one lane. A process that shares its
cores with others doing the same work (a worker of a parallel run) asks for none (`lanes=0`): it draws
and writes inline, and starts no process.

Each lane's queue is bounded. A lock-step simulation has no deadline, so it waits for room (every
frame is kept); a paced loop never waits: a frame that finds the queue full is dropped,
counted, and the trial's folder says so (`evidence_dropped.json`). A trial's scoresheet entry
is written only after `finish` returns, that is after every file of its evidence is in place.
Every message carries its trial's sequence number, so nothing a lane says about an abandoned
trial is taken for the next one.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import EXIT_SCRIPT_REIMPORTED, SCRIPT_REIMPORTED_ADVICE, HarnessError
from harness.lifeline import exit_with_multiprocessing_parent
from harness.models.verdict import JudgeVerdict
from harness.run.evidence import complete_folder, fresh_partial, partial_folder

QUEUE_FRAMES = 16
POLL_S = 0.05
ABANDON_WAIT_S = 10.0
MAX_LANES = 2


class EvidenceWriterError(HarnessError, RuntimeError):
    """The writer process failed or died; the trial's evidence is incomplete. `errno` is the failed write's
    (`harness.errors.no_room` tells a full disk by it, as by an `OSError`'s), None when it was no OS error."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        self.errno = errno
        super().__init__(message)


@dataclass(frozen=True)
class _Begin:
    seq: int
    folder: Path
    cameras: list[str]      # this lane's cameras
    video_fps: float
    video_size: tuple[int, int]
    dropout: Any


@dataclass(frozen=True)
class _Frame:
    seq: int
    camera: str
    t: float
    frame: Any  # FrameRequest (simulator) or an RGB array (real camera)
    encode: bool = True   # False: a dropout-watch frame, looked at and never written


@dataclass(frozen=True)
class _Finish:
    seq: int
    finals: dict[str, Any]
    rows: list[dict[str, Any]] | None   # given to the trial's last lane only
    judge_trace: JudgeVerdict | None
    trajectory: dict[str, Any] | None = None   # the simulator's state trajectory (last lane only)


@dataclass(frozen=True)
class _Videos:
    """Draw and encode this lane's cameras' videos from recorded requests, after the trial ran (a failure
    under `--video failures`)."""

    seq: int
    requests: dict[str, list[tuple[float, Any]]]
    video_fps: float
    video_size: tuple[int, int]


@dataclass(frozen=True)
class _Abandon:
    seq: int


@dataclass(frozen=True)
class _Stop:
    pass


_Request = _Begin | _Frame | _Finish | _Videos | _Abandon   # what the loop sends about one trial


# --- what a lane answers, on the one results queue ------------------------------------------------

@dataclass(frozen=True)
class _Result:
    seq: int    # the trial it is about
    lane: int   # the lane that sends it


@dataclass(frozen=True)
class _Abandoned(_Result):
    """The lane dropped the trial's remaining frames and closed its files."""


@dataclass(frozen=True)
class _Dropout(_Result):
    """The lane's camera watch found a camera frozen or missing in the frames it drew."""

    reason: str


@dataclass(frozen=True)
class _Failed(_Result):
    """The lane could not write the trial's evidence."""

    error: str
    errno: int | None = None   # the OS error's number, when the write failed on one (a full disk: ENOSPC)


@dataclass(frozen=True)
class _Written(_Result):
    """The lane wrote its part of the trial: frames per camera."""

    frames: dict[str, int]


@dataclass(frozen=True)
class _PartWritten(_Written):
    """... its videos closed, its final frames (and on the last lane the tables) in the `.partial` folder."""


@dataclass(frozen=True)
class _VideosWritten(_Written):
    """... the videos a `_Videos` asked for, drawn after the trial."""


def default_lanes() -> int:
    """One lane per core this process may use, at most `MAX_LANES` (a simulated arm has two cameras)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_LANES, cores))


class _Lane:
    """One writer process and its bounded request queue."""

    def __init__(self, context: Any, index: int, results: Any, abandoned: Any, scene: Any | None,
                 control_fps: int, queue_frames: int) -> None:
        self.index = index
        self.requests = context.Queue(maxsize=queue_frames)
        self.process = context.Process(target=_serve,
                                       args=(index, self.requests, results, abandoned, scene, control_fps),
                                       name=f"harness-evidence-writer-{index}", daemon=True)
        self.process.start()

    @property
    def pid(self) -> int:
        """The lane's process id (it was started with the lane, so it has one)."""
        return int(self.process.pid)

    def alive(self) -> bool:
        return self.process.is_alive()

    def why_gone(self) -> str:
        if self.process.exitcode == EXIT_SCRIPT_REIMPORTED:
            return f"evidence writer process {self.index} exited: {SCRIPT_REIMPORTED_ADVICE}"
        return f"evidence writer process {self.index} exited (code {self.process.exitcode})"

    def put(self, message: Any, timeout: float | None) -> None:
        """Queue a message (raises `queue.Full` once `timeout` has passed; None: never waits)."""
        if timeout is None:
            self.requests.put_nowait(message)
        else:
            self.requests.put(message, timeout=timeout)

    def stop(self, timeout_s: float) -> None:
        if self.process.is_alive():
            with contextlib.suppress(queue.Full):
                self.requests.put(_Stop(), timeout=timeout_s)
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(1.0)
        # The lane is gone, so nothing will read what is still buffered for it: without this, the queue's feeder
        # thread, blocked on a full pipe (a frame is far bigger than the pipe's buffer), is joined at interpreter
        # exit and the caller's process hangs after its error was said (a lane that died importing the script).
        self.requests.cancel_join_thread()
        self.requests.close()


class _InlineLane:
    """A lane in the caller's own process (`lanes=0`): each message handled as it is handed on, so a frame is
    drawn and written before `put` returns. For a process that already shares its cores with others doing
    the same work (a parallel run's Ray worker), where lane processes would add start-up and copies but no
    speed."""

    index = 0

    def __init__(self, results: Any, abandoned: Any, scene: Any | None, control_fps: int) -> None:
        self.work = _LaneWork(self.index, results, abandoned, scene, control_fps)

    @property
    def pid(self) -> int:
        return os.getpid()

    def alive(self) -> bool:
        return True

    def why_gone(self) -> str:
        return "the inline evidence lane is closed"

    def put(self, message: Any, timeout: float | None) -> None:
        self.work.handle(message)

    def stop(self, timeout_s: float) -> None:
        self.work.close()


class _Flag:
    """The abandoned-trial mark of an inline lane (a lane process shares a `multiprocessing.Value`)."""

    value = 0


class EvidenceWriter:
    """The writer's lanes, reused by every trial of a run.

    `scene` is the `SceneGeometry` of the simulated table (None on a real arm): each lane
    builds its own world from it the first time it is asked to draw a frame. `lanes`: how many
    processes (default: one per core, at most two); 0: no process, the caller draws and writes inline.
    """

    def __init__(self, scene: Any | None = None, control_fps: int = 30, queue_frames: int = QUEUE_FRAMES,
                 lanes: int | None = None) -> None:
        self._lanes: list[_Lane | _InlineLane]
        if lanes == 0:
            self._results: Any = queue.Queue()
            self._abandoned: Any = _Flag()
            self._lanes = [_InlineLane(self._results, self._abandoned, scene, control_fps)]
        else:
            context = mp.get_context("spawn")  # a fresh interpreter: no inherited GL context or threads
            self._results = context.Queue()
            self._abandoned = context.Value("q", 0, lock=False)  # lanes skip frames of trials up to this one
            self._lanes = [_Lane(context, index, self._results, self._abandoned, scene, control_fps, queue_frames)
                           for index in range(lanes or default_lanes())]
        self._seq = 0
        self._folder: Path | None = None
        self._route: dict[str, _Lane | _InlineLane] = {}
        self._active: list[_Lane | _InlineLane] = []
        self._dropout: str | None = None
        self._written: dict[str, int] = {}

    @property
    def pids(self) -> list[int]:
        return [lane.pid for lane in self._lanes]

    # --- the loop's side ---------------------------------------------------
    def begin(self, folder: Path, cameras: list[str], video_fps: float, video_size: tuple[int, int],
              dropout: Any | None) -> None:
        self._seq += 1
        self._dropout = None
        self._written = {}
        self._folder = folder
        fresh_partial(folder)
        self._route = {cam: self._lanes[i % len(self._lanes)] for i, cam in enumerate(cameras)}
        self._active = [lane for lane in self._lanes if lane in self._route.values()] or self._lanes[:1]
        for lane in self._active:
            mine = [cam for cam in cameras if self._route[cam] is lane]
            self._put(lane, _Begin(self._seq, folder, mine, video_fps, video_size, dropout), block=True)

    def frame(self, camera: str, t: float, frame: Any, block: bool) -> bool:
        """Hand one evidence frame on; False when it was dropped because the queue was full."""
        return self._put(self._route[camera], _Frame(self._seq, camera, t, frame), block)

    def watch(self, camera: str, t: float, request: Any, block: bool) -> bool:
        """Hand on a frame to draw and inspect for dropouts only (never written); False when dropped."""
        return self._put(self._route[camera], _Frame(self._seq, camera, t, request, encode=False), block)

    def dropout(self) -> str | None:
        """What the lanes' camera watches found so far in this trial's frames (never waits)."""
        self._drain()
        return self._dropout

    def finish(self, finals: dict[str, Any], rows: list[dict[str, Any]], judge_trace: JudgeVerdict | None,
               dropped: dict[str, int], trajectory: dict[str, Any] | None = None) -> dict[str, str]:
        """`write`, then `complete`: wait until the trial's folder is complete and in place; returns its files."""
        self.write(finals, rows, judge_trace, trajectory)
        return self.complete(dropped)

    def write(self, finals: dict[str, Any], rows: list[dict[str, Any]], judge_trace: JudgeVerdict | None,
              trajectory: dict[str, Any] | None = None) -> None:
        """Wait until every lane has written its part (videos closed, final frames, and on the last lane the
        tables, the judge's trace and the state trajectory) into the `.partial` folder."""
        last = self._active[-1]
        for lane in self._active:
            mine = {cam: final for cam, final in finals.items() if self._route.get(cam, last) is lane}
            self._put(lane, _Finish(self._seq, mine, rows if lane is last else None,
                                    judge_trace if lane is last else None,
                                    trajectory if lane is last else None), block=True)
        self._written = self._wait_for(_PartWritten, {lane.index for lane in self._active})

    def videos(self, requests: dict[str, list[tuple[float, Any]]], video_fps: float,
               video_size: tuple[int, int]) -> None:
        """Draw and encode videos from recorded frame requests into the `.partial` folder, each camera on its
        lane (both lanes draw at once); returns once they are written."""
        lanes = {self._route[cam] for cam in requests}
        for lane in lanes:
            mine = {cam: reqs for cam, reqs in requests.items() if self._route[cam] is lane}
            self._put(lane, _Videos(self._seq, mine, video_fps, video_size), block=True)
        self._written.update(self._wait_for(_VideosWritten, {lane.index for lane in lanes}))

    def complete(self, dropped: dict[str, int]) -> dict[str, str]:
        """Move the trial's written folder into place; returns its files."""
        assert self._folder is not None
        artifacts = complete_folder(self._folder, dict(dropped), self._written)
        self._active = []
        return artifacts

    def _wait_for(self, wanted: type[_Written], waiting: set[int]) -> dict[str, int]:
        written: dict[str, int] = {}
        while waiting:
            result = self._next_result()
            if isinstance(result, wanted):
                written.update(result.frames)
                waiting.discard(result.lane)
        return written

    def abandon(self) -> None:
        """Discard the trial in flight: the lanes skip its remaining frames and close their files, then its
        partial folder is removed. Never raises: it runs while another error is on its way out."""
        self._abandoned.value = self._seq
        alive = [lane for lane in self._active if lane.alive()]
        for lane in alive:
            with contextlib.suppress(queue.Full, ValueError, OSError):
                lane.put(_Abandon(self._seq), timeout=10.0)
        waiting = {lane.index for lane in alive}
        idle_polls = round(ABANDON_WAIT_S / POLL_S)   # a hung lane must not hold up the run's way out
        while waiting and idle_polls > 0:
            try:
                result = self._results.get(timeout=POLL_S)
            except queue.Empty:
                idle_polls -= 1
                waiting = {index for index in waiting if self._lanes[index].alive()}
                continue
            if isinstance(result, _Abandoned) and result.seq == self._seq:
                waiting.discard(result.lane)
        if self._folder is not None:
            shutil.rmtree(partial_folder(self._folder), ignore_errors=True)
        self._active = []

    def close(self, timeout_s: float = 10.0) -> None:
        for lane in self._lanes:
            lane.stop(timeout_s)
        if not isinstance(self._results, queue.Queue):   # a lane process's queue has a feeder thread to end
            self._results.close()

    # --- plumbing ----------------------------------------------------------
    def _put(self, lane: _Lane | _InlineLane, message: Any, block: bool) -> bool:
        if not block:
            try:
                lane.put(message, timeout=None)
            except queue.Full:
                return False
            return True
        while True:
            self._check_alive()
            try:
                lane.put(message, timeout=POLL_S)
                return True
            except queue.Full:
                continue

    def _next_result(self) -> _Result:
        """The next message about this trial (a dropout is kept, an error raised); older trials' are skipped."""
        while True:
            try:
                result = self._results.get(timeout=POLL_S)
            except queue.Empty:
                self._check_alive()
                continue
            if self._is_result(result):
                return result

    def _drain(self) -> None:
        while True:
            try:
                result = self._results.get_nowait()
            except queue.Empty:
                return
            self._is_result(result)

    def _is_result(self, result: _Result) -> bool:
        """Whether a message is a result of this trial; a dropout is kept and an error raised on the way."""
        if result.seq != self._seq:
            return False
        if isinstance(result, _Dropout):
            self._dropout = self._dropout or result.reason
            return False
        if isinstance(result, _Failed):
            raise EvidenceWriterError(result.error, result.errno)
        return True

    def _check_alive(self) -> None:
        for lane in self._active or self._lanes:
            if not lane.alive():
                raise EvidenceWriterError(lane.why_gone())


class _LaneWork:
    """What one lane does with the loop's messages: its cameras of one trial at a time, in the order the loop
    sent them. Runs in the lane's process, or in the caller's own (`lanes=0`)."""

    def __init__(self, index: int, results: Any, abandoned: Any, scene: Any | None, control_fps: int) -> None:
        self.index = index
        self.results = results
        self.abandoned = abandoned
        self.scene = scene
        self.control_fps = control_fps
        self.world: Any = None
        self.files: Any = None
        self.watch: Any = None
        self.folder: Path | None = None
        self.seq = 0
        self.reported = False

    def handle(self, message: Any) -> None:
        try:
            self._handle(message)
        except Exception as exc:  # reported to the loop, which voids nothing silently
            if self.files is not None:
                self.files.abandon(remove=False)
                self.files = None
            self.results.put(_Failed(message.seq if isinstance(message, _Request) else self.seq, self.index,
                                      f"{type(exc).__name__}: {exc}", exc.errno if isinstance(exc, OSError) else None))

    def _handle(self, message: Any) -> None:
        from harness.run.camera_watch import CameraWatch
        from harness.run.evidence import EvidenceFiles

        index, results = self.index, self.results
        if isinstance(message, _Begin):
            if self.files is not None:
                self.files.abandon(remove=False)
            self.seq = message.seq
            self.folder = message.folder
            self.files = EvidenceFiles(message.folder, message.video_fps, message.video_size, fresh=False)
            self.watch = CameraWatch(message.cameras, message.dropout)
            self.reported = False
        elif isinstance(message, _Abandon):
            if self.files is not None:
                self.files.abandon(remove=False)
            self.files = None
            results.put(_Abandoned(message.seq, index))
        elif isinstance(message, _Frame):
            if self.files is None or message.seq != self.seq or message.seq <= self.abandoned.value:
                return
            frame = message.frame
            if not isinstance(frame, np.ndarray):
                frame = self._draw(frame)
                self.watch.see(message.camera, frame, message.t)
                reason = self.watch.dropout(message.t)
                if reason and not self.reported:
                    results.put(_Dropout(self.seq, index, reason))
                    self.reported = True
            if message.encode:
                self.files.add_video_frame(message.camera, frame)
        elif isinstance(message, _Finish) and (self.files is None or message.seq != self.seq):
            results.put(_Failed(message.seq, index, "this trial's evidence was already lost (see the error before)"))
        elif isinstance(message, _Finish):
            finals = {cam: self._draw(final) if final is not None and not isinstance(final, np.ndarray) else final
                      for cam, final in message.finals.items()}
            written = self.files.write_part(finals, message.rows, message.judge_trace, message.trajectory)
            self.files = None
            results.put(_PartWritten(self.seq, index, written))
        elif isinstance(message, _Videos):
            if message.seq != self.seq or message.seq <= self.abandoned.value or self.folder is None:
                return
            self.files = EvidenceFiles(self.folder, message.video_fps, message.video_size, fresh=False)
            for camera, camera_requests in message.requests.items():
                for _, request in camera_requests:
                    self.files.add_video_frame(camera, self._draw(request))
            written = self.files.write_part({}, None, None)
            self.files = None
            results.put(_VideosWritten(self.seq, index, written))

    def _draw(self, request: Any) -> Any:
        self.world = self.world or _world(self.scene, self.control_fps)
        return self.world.render_request(request)

    def close(self) -> None:
        if self.files is not None:
            self.files.abandon(remove=False)
            self.files = None
        if self.world is not None:
            self.world.close()
            self.world = None


def _serve(index: int, requests: Any, results: Any, abandoned: Any, scene: Any | None, control_fps: int) -> None:
    """One lane's process: its messages handled in order until told to stop or the run is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle; it tells us to stop
    exit_with_multiprocessing_parent()   # a killed run: gone at once, whatever it is drawing or waiting on
    work = _LaneWork(index, results, abandoned, scene, control_fps)
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
        work.handle(message)
    work.close()


def _world(scene: Any | None, control_fps: int) -> Any:
    import harness.sim  # noqa: F401  (selects the headless GL backend before mujoco loads)
    from harness.sim.world import SimWorld

    return SimWorld(scene, control_fps=control_fps)
