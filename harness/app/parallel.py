"""`harness run --workers N`: the trials of one simulated run on Ray workers, recorded in trial order
by one writer, so the scoresheet, the evidence and the report are those of a serial run.

Each worker is a Ray actor that builds exactly what a serial `harness run` builds (`prepare_run`:
its own simulator, renderer, policy and engine) around a `DetachedSheet`, a stand-in that numbers
attempts as the driver says and hands each finished attempt back instead of writing it. Evidence is
written in the worker's own temporary folder and shipped back as bytes, so workers on other
machines of a Ray cluster need no shared disk. The driver (this process) is the only writer of the
scoresheet and the runs folder; it appends attempts strictly in the order a serial run would have.

Faults: a worker process that dies is restarted by Ray and its trial retried (nothing was recorded
for it); a void that would pause a serial run pauses this one at the same place, and the results of
later trials are discarded unrecorded (they are run again on resume).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import EXIT_PAUSED, HarnessError, HarnessInputError, RunPaused
from harness.models.locked import LockedInference
from harness.models.protocol import Protocol
from harness.models.run_settings import InferenceEngine, RobotKind, RunSettings
from harness.models.scoresheet import Attempt, LockedBlock, Scoresheet, run_inference
from harness.models.taxonomy import Void, VoidKind

log = logging.getLogger(__name__)

MAX_WORKERS = 256
CONTROL_GROUP = "control"   # a worker's concurrency group for the emergency stop
STOP_KEY_POLL_S = 0.05


class WorkerFailed(HarnessError):
    """A Ray worker kept failing on one trial; nothing was recorded for it, so the run stays resumable."""

    exit_code = EXIT_PAUSED


class DetachedSheet:
    """What a worker's engine sees instead of the scoresheet: the locked block and settings (read-only),
    the attempt number the driver chose, and a slot that receives the finished attempt unwritten."""

    def __init__(self, path: Path, locked_data: dict[str, Any], settings: RunSettings) -> None:
        self.path = path
        self.locked = LockedBlock.model_validate(locked_data)
        self.settings = settings
        self._next_attempt = 1
        self.finished: Attempt | None = None

    @property
    def inference(self) -> LockedInference:
        """As `Scoresheet.inference`: the locked engine, or LeRobot's synchronous one before engines were locked."""
        return run_inference(self.locked)

    @property
    def inference_engine(self) -> InferenceEngine:
        return self.inference.engine

    def expect_attempt(self, number: int) -> None:
        self._next_attempt = number
        self.finished = None

    def next_attempt_number(self, trial_index: int) -> int:
        return self._next_attempt

    def add_attempt(self, attempt: Attempt) -> Attempt:
        self.finished = attempt
        return attempt


@dataclass
class TrialResult:
    """One attempt as a worker finished it: the attempt, its void (None when scored), its evidence."""

    trial_index: int
    attempt: Attempt
    void: Void | None
    folder_name: str | None
    files: dict[str, bytes] = field(default_factory=dict)
    worker_s: float = 0.0


def worker_arguments(args: argparse.Namespace, runs_dir: Path) -> argparse.Namespace:
    """The run's own arguments, with evidence going to the worker's folder and one process per trial."""
    values = dict(vars(args))
    values.update(runs_dir=str(runs_dir), workers=1, headless=True, record_dataset=None, realtime=False)
    return argparse.Namespace(**values)


class TrialWorkerImpl:
    """The body of a Ray actor: one simulator, one policy, one engine, many trials."""

    def __init__(self, args: argparse.Namespace, protocol: Protocol, sheet_path: str, locked_data: dict[str, Any],
                 settings: RunSettings) -> None:
        from harness.app.build import FrontEnd, prepare_run

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.tmp = Path(tempfile.mkdtemp(prefix="harness-worker-"))
        self.sheet = DetachedSheet(Path(sheet_path), locked_data, settings)
        self.protocol = protocol
        self.setup = prepare_run(worker_arguments(args, self.tmp), protocol, self.sheet, FrontEnd.PLAIN)

    def pid(self) -> int:
        return os.getpid()

    def emergency_stop(self) -> None:
        """Called in the actor's `control` concurrency group, beside a `run_trial` in flight: the trial
        in flight comes back as an emergency-stop void and this worker moves its arm no more."""
        self.setup.robot.emergency_stop()

    def run_trial(self, trial_index: int, attempt_number: int) -> TrialResult:
        started = time.perf_counter()
        self.sheet.expect_attempt(attempt_number)
        trial = self.protocol.trial(trial_index)
        attempt, void = self.setup.engine.attempt_trial(trial)
        folder = self.tmp / self.sheet.path.stem / f"trial-{trial_index:03d}-a{attempt_number}"
        files: dict[str, bytes] = {}
        if folder.is_dir():
            files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
            shutil.rmtree(folder, ignore_errors=True)
        return TrialResult(trial_index, attempt, void, folder.name if files else None, files,
                           time.perf_counter() - started)

    def close(self) -> None:
        self.setup.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def store_evidence(result: TrialResult, runs_dir: Path, stem: str) -> Attempt:
    """Write a worker's evidence where a serial run would have, durably, and point the attempt at it."""
    from harness.models.atomic import fsync_folder

    attempt = result.attempt
    if result.folder_name is None:
        return attempt
    folder = runs_dir / stem / result.folder_name
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name, data in result.files.items():
        with (partial / name).open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    if folder.exists():   # left by a killed run that never recorded it: kept, never deleted
        number = 1
        while (aside := folder.with_name(f"{folder.name}.unrecorded-{number}")).exists():
            number += 1
        folder.rename(aside)
    partial.rename(folder)
    fsync_folder(folder.parent)
    artifacts = dict(attempt.artifacts or {})
    for key, value in list(artifacts.items()):
        name = Path(str(value)).name
        if name in result.files:
            artifacts[key] = str(folder / name)
    return attempt.model_copy(update={"artifacts": artifacts})


def check_workers(args: argparse.Namespace, robot: RobotKind) -> None:
    """`--workers` is for the simulated arm, plain mode, no dataset recording: refused before any lock."""
    workers = getattr(args, "workers", 1)
    if not 1 <= workers <= MAX_WORKERS:
        raise HarnessInputError(None, "--workers", f"{workers}: must be within 1..{MAX_WORKERS}")
    if workers == 1 and not getattr(args, "address", None):
        return
    if getattr(args, "address", None):
        check_address(args.address)
    if not RobotKind(robot).simulated:
        raise HarnessInputError(None, "--workers", "parallel trials need the simulated arm (--robot sim)")
    if args.record_dataset is not None:
        raise HarnessInputError(None, "--record-dataset", "not with --workers (one dataset writer per run): "
                                                          "record with a serial run")
    if args.inject_dropout:
        raise HarnessInputError(None, "--inject-dropout", "not with --workers")


LOOPBACK = "127.0.0.1"
ADDRESS_TIMEOUT_S = 5.0
_reaper: Any = None


def check_address(address: str, timeout_s: float = ADDRESS_TIMEOUT_S) -> tuple[str, int]:
    """`--address HOST:PORT` (or `ray://HOST:PORT`) must name something that answers, checked before any
    lock is taken: Ray's own connect retries for minutes and leaves lock files behind."""
    text = address.removeprefix("ray://")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise HarnessInputError(None, "--address", f"{address!r}: expected HOST:PORT of a Ray cluster's head")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise HarnessInputError(None, "--address", f"nothing answers at {host}:{port_text} within "
                                                   f"{timeout_s:g} s ({why})") from None
    return host, int(port_text)


def ray_environment(local: bool) -> dict[str, str]:
    """The environment Ray reads at import and hands its processes: no usage statistics (whose collector
    probes cloud metadata endpoints), and for a local runtime a node address on loopback, which is what
    makes the GCS server, raylet, agents and workers listen on 127.0.0.1 only (with the default, Ray picks
    the machine's external address and its servers listen on every interface)."""
    env = {"RAY_USAGE_STATS_ENABLED": "0"}
    if local:
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"   # Ray's switch for "this node is the whole cluster"
        env["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE", "disabled")   # nothing but loopback can reach it
    return env


def start_ray(address: str | None, workers: int, dashboard: bool = False) -> None:
    """A local Ray runtime sized to the workers, reachable on loopback only, or the cluster at `address`.

    The dashboard is off unless asked for (then on 127.0.0.1). A watchman process (`ray_reaper`) ends
    this run's Ray processes if the driver is killed, since some of Ray's agents outlive it by a minute.
    """
    global _reaper
    os.environ.update(ray_environment(local=not address))
    import ray

    if ray.is_initialized():
        return
    quiet: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address:
        check_address(address)
        try:
            ray.init(address=address, include_dashboard=False, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise HarnessInputError(None, "--address", f"cannot join the Ray cluster at {address}: {exc}") from None
        return
    if _reaper is None or _reaper.poll() is not None:
        from harness.app.ray_reaper import start

        _reaper = start()
    ray.init(num_cpus=max(workers, 1), _node_ip_address=LOOPBACK, include_dashboard=dashboard,
             dashboard_host=LOOPBACK, **quiet)
    node = ray.util.get_node_ip_address()
    if node != LOOPBACK:   # Ray was imported before the environment above was set
        ray.shutdown()
        raise HarnessError(f"the local Ray runtime came up on {node}, not on loopback; refusing to run on it")


@dataclass
class ParallelRun:
    """Drives N workers over the pending trials of one locked scoresheet."""

    args: argparse.Namespace
    protocol: Protocol
    sheet: Scoresheet
    observer: Any
    workers: int
    runs_dir: Path
    max_attempts: int | None = None
    worker_busy_s: float = 0.0
    recorded: int = 0
    _actors: list[Any] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        import ray

        # `control` runs beside the default group's one thread (the simulator and its renderer stay on it),
        # so an emergency stop reaches a worker in the middle of a trial
        remote = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3,
                            concurrency_groups={CONTROL_GROUP: 1})(TrialWorkerImpl)
        self._actors = [remote.remote(self.args, self.protocol, str(self.sheet.path), self.sheet.locked_data,
                                      self.sheet.settings) for _ in range(self.workers)]
        ray.get([actor.pid.remote() for actor in self._actors])   # built and connected, or raises here

    def close(self) -> None:
        import ray

        for actor in self._actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception as exc:   # best effort: a dead worker has nothing left to close
                log.debug("worker close failed: %s", exc)
            ray.kill(actor)
        self._actors = []

    def shut_gate(self) -> None:
        """The stop key was pressed (any thread, a signal handler included): no trial is submitted again."""
        self.stopping.set()

    def emergency_stop(self) -> None:
        """Stop every worker's arm; each trial in flight comes back as an emergency-stop void."""
        import ray

        self.stopping.set()
        stops = [actor.emergency_stop.options(concurrency_group=CONTROL_GROUP).remote() for actor in self._actors]
        ray.wait(stops, num_returns=len(stops), timeout=10)

    def run(self) -> int:
        """Run every pending trial; returns how many attempts were recorded. Raises `RunPaused` where a
        serial run would have paused, and on the stop key once the trials in flight are recorded."""
        import ray

        total = self.sheet.locked.trial_count
        order: deque[int] = deque(self.sheet.pending_trials())
        to_submit: deque[int] = deque(order)
        attempt_of: dict[int, int] = {}
        done: dict[int, TrialResult] = {}
        in_flight: dict[Any, tuple[int, Any]] = {}
        idle = list(self._actors)

        def submit(index: int) -> None:
            actor = idle.pop()
            attempt_of[index] = self.sheet.next_attempt_number(index)
            in_flight[actor.run_trial.remote(index, attempt_of[index])] = (index, actor)

        while order:
            if self.stopping.is_set() and not in_flight:   # stopped between trials: nothing in flight to void
                raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
            while idle and to_submit and not self.stopping.is_set():
                submit(to_submit.popleft())
            # short waits: the stop key's signal handler runs only when this thread is back in Python
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=STOP_KEY_POLL_S)
            if not ready:
                continue
            index, actor = in_flight.pop(ready[0])
            idle.append(actor)
            try:
                done[index] = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                raise WorkerFailed(f"a Ray worker failed on trial {index} and was retried without success "
                                   f"({type(exc).__name__}); nothing was recorded for it: run again with --resume"
                                   ) from None
            while order and order[0] in done:
                head = order[0]
                result = done.pop(head)
                self._record(result, total)
                if self.max_attempts is not None and self.recorded >= self.max_attempts:
                    return self.recorded
                if result.void is None:
                    order.popleft()
                    continue
                if result.void.kind.pauses_run:
                    log.info("run paused: %s", result.void.reason)
                    raise RunPaused(result.void)
                to_submit.appendleft(head)   # a void that does not pause: try the trial again, in its place
        return self.recorded

    def _record(self, result: TrialResult, total: int) -> None:
        trial = self.protocol.trial(result.trial_index)
        done_before = total - len(self.sheet.pending_trials())
        self.observer.trial_started(trial, result.attempt.attempt, done_before, total)
        attempt = store_evidence(result, self.runs_dir, self.sheet.path.stem)
        recorded = self.sheet.add_attempt(attempt)
        self.recorded += 1
        self.worker_busy_s += result.worker_s
        self.observer.trial_scored(recorded)


def run_parallel(args: argparse.Namespace, protocol: Protocol, sheet: Scoresheet, created: bool,
                 observer: Any = None) -> int:
    """The parallel counterpart of the engine's run: build workers, write the new sheet once they are up,
    record every pending trial in order (told to `observer`, by default one line per trial). Returns the
    attempts recorded."""
    from harness.run.terminal import StopKey, TerminalObserver

    workers = args.workers
    observer = observer or TerminalObserver(operator_scores=False)
    print(f"{sheet.path}: {len(sheet.pending_trials())} of {sheet.locked.trial_count} trials to run "
          f"({sheet.locked.policy.ref} on {sheet.locked.robot}, {workers} Ray worker{'s' if workers > 1 else ''})",
          flush=True)
    start_ray(getattr(args, "address", None), workers, getattr(args, "ray_dashboard", False))
    run = ParallelRun(args, protocol, sheet, observer, workers,
                      Path(args.runs_dir), args.max_trials)
    started = time.perf_counter()
    try:
        run.start()
        if created:
            sheet.create()
        with StopKey(run, lambda: False):
            return run.run()
    finally:
        run.close()
        wall = time.perf_counter() - started
        if run.recorded:
            print(f"{run.recorded} attempts in {wall:.1f} s on {workers} workers "
                  f"({run.worker_busy_s / run.recorded:.2f} s of worker time each)", file=sys.stderr, flush=True)
