"""`harness run --workers N`: the trials of one simulated run on N workers, recorded in trial order by
one writer, so the scoresheet, the evidence and the report are those of a serial run.

The first worker is the driver itself: it builds what a serial run builds and starts trials at once,
on a thread of its own, while Ray and the other N-1 workers start in the background; each of those
joins as soon as it is ready. A trial goes to whichever worker is free next (the next trial not yet
started), so Ray's start-up and each worker's set-up are hidden behind trials the driver runs anyway,
and a run that ends before they are ready is simply a serial run.

Each worker builds exactly what a serial `harness run` builds (`prepare_run`: its own simulator,
policy and engine) around a `DetachedSheet`, a stand-in that numbers attempts as the driver says and
hands each finished attempt back instead of writing it. A Ray worker builds it for the run it is lent to,
from the policies and simulators it keeps (`workers`: a sweep keeps its Ray workers from cell to cell).
A worker draws its evidence inline (no writer lane processes: it has one core, and the other cores are the
other workers'). Evidence is written in the worker's own temporary folder and shipped back as bytes, so
workers on other machines of a Ray cluster need no shared disk. The driver's main thread is the only writer
of the scoresheet and the runs folder, and it runs a serial run's own trial sequence (`run.sequencing`): the
workers only run trials ahead of it, so attempts are appended in the order, and the run stops or pauses where,
a serial run's would be.

Faults: a worker process that dies is restarted by Ray and its trial retried (nothing was recorded
for it); a void that would pause a serial run pauses this one at the same place, and the results of
later trials are discarded unrecorded (they are run again on resume).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from harness.app.parallel.workers import (
    CONTROL_GROUP,
    RunSpec,
    TrialResult,
    TrialWorkerImpl,
    WorkerPool,
)
from harness.app.parts import RayWorkerPool
from harness.app.sheet import trials_to_run
from harness.errors import EXIT_PAUSED, HarnessError, HarnessInputError, RunPaused, no_room
from harness.models.evidence_audit import mark_recorded
from harness.models.protocol import Protocol, Trial
from harness.models.run_request import RunRequest
from harness.models.run_settings import RobotKind
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Void, VoidKind
from harness.run.disk_room import TrialRoom
from harness.run.sequencing import TrialSequence
from harness.scratch import SYSTEM_ROOT, socket_root
from harness.scratch import make as make_scratch
from harness.scratch import remove as remove_scratch

log = logging.getLogger(__name__)

STOP_KEY_POLL_S = 0.05


class WorkerFailed(HarnessError):
    """A Ray worker kept failing on one trial; nothing was recorded for it, so the run stays resumable."""

    exit_code = EXIT_PAUSED


def store_evidence(result: TrialResult, runs_dir: Path, stem: str) -> Attempt:
    """Write a worker's evidence where a serial run would have, durably, and point the attempt at it."""
    from harness.storage.atomic import fsync_folder

    attempt = result.attempt
    if result.folder_name is None:
        return attempt
    folder = runs_dir / stem / result.folder_name
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name, data in result.files.items():
            with (partial / name).open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:   # a full disk, say: no half-written folder stays behind
        shutil.rmtree(partial, ignore_errors=True)
        raise
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


def check_workers(request: RunRequest, robot: RobotKind) -> None:
    """`--workers` is for the simulated arm, plain mode, no dataset recording: refused before any lock (the
    count's range is the request's own check)."""
    workers = request.workers
    if not workers.parallel:
        return
    if workers.address:
        check_address(workers.address)
    if not RobotKind(robot).simulated:
        raise HarnessInputError(None, "--workers", "parallel trials need the simulated arm (--robot sim)")
    if request.dataset.record:
        raise HarnessInputError(None, "--record-dataset", "not with --workers (one dataset writer per run): "
                                                          "record with a serial run")
    if request.inject_dropout:
        raise HarnessInputError(None, "--inject-dropout", "not with --workers")


LOOPBACK = "127.0.0.1"
ADDRESS_TIMEOUT_S = 5.0
OBJECT_STORE_BYTES = 100 * 1024 * 1024   # Ray's floor is 75 MiB; its default, 30 % of memory, is never used here
# The longest Unix socket path Ray makes below its temporary folder (a 7-digit pid): what the folder must leave room for
RAY_LONGEST_SOCKET = "/session_2026-12-07_07-00-42_107956_4194304/sockets/plasma_store"
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
    the machine's external address and its servers listen on every interface). A task Ray will retry prints no
    line: a run that ends before a Ray worker is set up ends that worker (`ray.kill`), and Ray printed
    "(raylet) Task TrialWorker.open failed. There are 3 retries remaining, so the task will be retried. Error:
    The actor is dead because it was killed by `ray.kill`" at every such clean exit; a trial retried on a
    restarted worker records nothing twice anyway, and a task that fails for good is still reported."""
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_enable_output_error_log_if_still_retry": "0"}
    if local:
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"   # Ray's switch for "this node is the whole cluster"
        env["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE", "disabled")   # nothing but loopback can reach it
    return env


PROXY_SINK = "http://127.0.0.1:9"   # a loopback port: a request sent there never leaves the machine
LOOPBACK_NAMES = "127.0.0.1,localhost,::1"


def no_egress_environment(current: dict[str, str]) -> dict[str, str]:
    """The proxy settings a local Ray runtime is started with, so that none of its processes reaches past
    loopback over HTTP. Why: Ray 2.60's API-server process (started even without a dashboard, to load its
    usage-statistics module) asks the cloud metadata services who hosts the machine (169.254.169.254 and
    a DNS lookup of metadata.google.internal) whether or not usage statistics are enabled, and Ray has no
    switch for it; `requests` honours these variables, so the probes go to a closed loopback port and fail
    at once. gRPC reads the same variables: `grpc_proxy` keeps what the user had for it ("" means none), so
    a policy server the user names is reached exactly as before."""
    grpc = current.get("grpc_proxy", current.get("https_proxy", current.get("http_proxy", "")))
    return {"http_proxy": PROXY_SINK, "https_proxy": PROXY_SINK, "HTTP_PROXY": PROXY_SINK,
            "HTTPS_PROXY": PROXY_SINK, "no_proxy": LOOPBACK_NAMES, "NO_PROXY": LOOPBACK_NAMES, "grpc_proxy": grpc}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment while Ray starts its processes (they inherit it), and the
    previous values back afterwards, so the driver's own connections are the user's."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_ray(address: str | None, workers: int, dashboard: bool = False) -> None:
    """A local Ray runtime sized to the workers and the machine (CPUs only: no GPU, a small object store,
    since a trial's result is a few hundred kB), reachable on loopback only, or the cluster at `address`.

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
        from harness.app.parallel.ray_reaper import start

        _reaper = start()
    # CPUs for every worker, and at least the machine's: a runtime that outlives this run (a sweep's next cell, a
    # test's next run) must still fit the actors it asks for, and a killed actor's restart must find a CPU
    root = socket_root("ray", len(RAY_LONGEST_SOCKET))
    if root is None:
        raise HarnessInputError(None, "TMPDIR", f"{SYSTEM_ROOT} is too long a path for Ray's sockets (Unix socket "
                                "paths stop at 107 characters) and /tmp is not writable: set TMPDIR to a short folder")
    folder = make_scratch("ray", remove_at_exit=False, root=root)   # its sockets and logs: this run's, removed with it
    try:
        with environment(no_egress_environment(dict(os.environ))):
            # "local": a runtime of this run's own, always. Without it Ray first obeys a RAY_ADDRESS in the user's
            # environment (a shell set up for a cluster: the run then failed, "When connecting to an existing
            # cluster, num_cpus and num_gpus must not be provided") and reads every process's command line looking
            # for a GCS server to join; a cluster is what --address is for
            ray.init(address="local", num_cpus=max(workers, local_cores()), num_gpus=0,
                     object_store_memory=OBJECT_STORE_BYTES,
                     _node_ip_address=LOOPBACK, include_dashboard=dashboard, dashboard_host=LOOPBACK,
                     _temp_dir=str(folder), **quiet)
    except BaseException:   # a runtime that failed to start leaves neither processes nor its folder
        _end_ray(folder)
        raise
    atexit.register(_end_ray, folder)   # registered after Ray's own exit handler, so it runs before that one
    node = ray.util.get_node_ip_address()
    if node != LOOPBACK:   # Ray was imported before the environment above was set
        ray.shutdown()
        raise HarnessError(f"the local Ray runtime came up on {node}, not on loopback; refusing to run on it")


def _end_ray(folder: Path) -> None:
    """At exit: Ray shut down, then its folder removed. The other order (the folder's removal registered when
    it was made, before `ray.init` registered Ray's shutdown, so run after it) left the folder behind after
    every run: Ray's shutdown writes into its session folder again (its spilled objects' store)."""
    import ray

    ray.shutdown()
    remove_scratch(folder)


class LocalWorker:
    """The driver's own worker: the serial run's engine, started before Ray, its trials on one thread so the
    driver's main thread stays free to record attempts and to take the stop key."""

    name = "driver"

    def __init__(self, worker: TrialWorkerImpl) -> None:
        self.worker = worker
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="harness-driver-trials")
        self._running: Future[TrialResult] | None = None

    def submit(self, index: int, attempt: int) -> Future[TrialResult]:
        self._running = self._thread.submit(self.worker.run_trial, index, attempt)
        return self._running

    def close(self) -> None:
        """A trial still running (the run ended elsewhere, or a second Ctrl+C) is stopped, not waited out."""
        if self._running is not None and not self._running.done():
            self.worker.shut_gate()
            self.worker.emergency_stop()
        self._thread.shutdown(wait=True)
        self.worker.close()


class RayWorker:
    """A Ray actor (`workers.TrialWorker`) set up for this run."""

    def __init__(self, actor: Any, number: int, spec: Any) -> None:
        self.actor = actor
        self.name = f"ray-{number}"
        self.spec = spec   # the run's `RunSpec`, in Ray's object store

    def submit(self, index: int, attempt: int) -> Future[TrialResult]:
        return self.actor.run_trial.remote(self.spec, index, attempt).future()


class RayWorkers:
    """Ray and `count` actors, started (or taken from a sweep's `pool`, where they were kept from its earlier
    runs) on a thread of their own while the driver runs trials: each actor is handed over (`ready`) once it is
    set up for this run and connected; a failure is handed over as the exception."""

    def __init__(self, request: RunRequest, protocol: Protocol, sheet: Scoresheet, count: int,
                 clock: Any = time.perf_counter, pool: RayWorkerPool | None = None) -> None:
        self.request = request
        self.protocol = protocol
        self.sheet = sheet
        self.count = count
        self.clock = clock
        self.started = clock()
        self.ready_after_s: list[float] = []
        self.ray_up_after_s: float | None = None
        self.kept = pool is not None   # the pool outlives this run: its actors are given back, not ended
        self.pool: RayWorkerPool = pool if pool is not None else WorkerPool()
        self._ready: queue.Queue[RayWorker | BaseException] = queue.Queue()
        self._actors: list[Any] = []
        self._built: list[Any] = []   # actors whose set-up finished: the ones with an arm to stop and a close
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._start, name="harness-ray-start", daemon=True)
        if count > 0:
            self._thread.start()

    def _start(self) -> None:
        try:
            RayHost.run(start_ray, self.request.workers.address, self.count, self.request.workers.ray_dashboard)
            self.ray_up_after_s = self.clock() - self.started
            log.info("Ray up after %.1f s", self.ray_up_after_s)
            if self._cancelled.is_set():
                return
            import ray

            spec = ray.put(RunSpec(self.request, self.protocol, str(self.sheet.path), self.sheet.locked_data,
                                   self.sheet.settings))
            with self._lock:
                self._actors = self.pool.take(self.count)
                setting_up = {actor.open.remote(spec): actor for actor in self._actors}
            while setting_up and not self._cancelled.is_set():
                built, _ = ray.wait(list(setting_up), num_returns=1, timeout=STOP_KEY_POLL_S)
                for ref in built:
                    actor = setting_up.pop(ref)
                    ray.get(ref)   # set up and connected, or raises here
                    with self._lock:
                        self._built.append(actor)
                    self.ready_after_s.append(self.clock() - self.started)
                    self._ready.put(RayWorker(actor, len(self.ready_after_s), spec))
                    log.info("Ray worker %d ready after %.1f s", len(self.ready_after_s), self.ready_after_s[-1])
        except BaseException as exc:   # handed to the driver's main thread, which ends the run with it
            self._ready.put(exc)

    def newly_ready(self, wait_s: float = 0.0) -> list[RayWorker]:
        """Workers ready since the last call (waiting up to `wait_s` for one); raises what stopped Ray or a
        worker from starting."""
        ready: list[RayWorker] = []
        while True:
            try:
                item = self._ready.get(timeout=wait_s) if wait_s > 0 and not ready else self._ready.get_nowait()
            except queue.Empty:
                return ready
            if isinstance(item, BaseException):
                if isinstance(item, HarnessError):
                    raise item
                raise WorkerFailed(f"Ray or a Ray worker failed to start ({type(item).__name__}: {item}); "
                                   "nothing was recorded for it: run again with --resume") from item
            ready.append(item)

    def emergency_stop(self, timeout_s: float = 10.0) -> None:
        """Stop every actor's arm (those still starting have none moving)."""
        with self._lock:
            actors = list(self._built)
        if not actors:
            return
        import ray

        stops = [actor.emergency_stop.options(concurrency_group=CONTROL_GROUP).remote() for actor in actors]
        ray.wait(stops, num_returns=len(stops), timeout=timeout_s)

    def close(self) -> None:
        """End this run on the actors: a sweep's are given back to its pool, the others ended (one still in
        its set-up only ended); a start-up still under way is cancelled (after `ray.init`, which cannot be)."""
        self._cancelled.set()
        if self._thread.is_alive():
            self._thread.join()
        actors, built, self._actors, self._built = self._actors, self._built, [], []
        if self.kept:
            self.pool.give_back(actors)
        else:
            self.pool.close(built)


class RayHost:
    """The one thread that starts the local Ray runtime, parked for the life of the process.

    Why a thread of its own that never ends: Ray ties the processes it starts (GCS server, raylet, agents)
    to the *thread* that started them (`PR_SET_PDEATHSIG` fires when that thread ends, not the process), so
    a start-up thread that finished would take the runtime with it. Started on this thread, the runtime
    lives until the process ends, for every run of a sweep, while the driver's main thread goes on.
    """

    _instance: RayHost | None = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Any, tuple[Any, ...], Future[Any]]] = queue.Queue()
        threading.Thread(target=self._serve, name="harness-ray-host", daemon=True).start()

    @classmethod
    def run(cls, function: Any, *args: Any) -> Any:
        """`function(*args)` on the host thread; waits for it and returns its result or raises its error."""
        with cls._guard:
            if cls._instance is None:
                cls._instance = RayHost()
            host = cls._instance
        future: Future[Any] = Future()
        host._jobs.put((function, args, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            function, args, future = self._jobs.get()
            try:
                with quiet_ray_init():
                    future.set_result(function(*args))
            except BaseException as exc:
                future.set_exception(exc)


@contextlib.contextmanager
def quiet_ray_init() -> Iterator[None]:
    """`ray.init` off the main thread warns that it set no SIGTERM handler: the harness keeps its own there
    (SIGTERM ends a run as Ctrl+C does), so the warning says nothing to act on."""
    ray_worker_log = logging.getLogger("ray._private.worker")
    level = ray_worker_log.level
    ray_worker_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        ray_worker_log.setLevel(level)


@dataclass
class ParallelRun:
    """The driver's own worker and the Ray workers over the pending trials of one locked scoresheet.

    `run` is a serial run's `TrialSequence`, with this as its `AttemptMaker`: asked for a trial's attempt, it
    hands the pending trials to whichever worker is free next (the one asked for first, later ones ahead of the
    sequence while `--max-trials` leaves room), waits for the one asked for and records it (its evidence, then
    its attempt). So which trial is next, what pauses the run and what is recorded are decided where a serial
    run decides them; the results of later trials wait their turn, and are dropped unrecorded where the
    sequence stops (they are run again on resume)."""

    protocol: Protocol
    sheet: Scoresheet
    observer: Any
    local: LocalWorker | None   # None: `--no-driver-worker`
    ray_workers: RayWorkers
    runs_dir: Path
    max_attempts: int | None = None
    worker_busy_s: float = 0.0
    record_busy_s: float = 0.0   # the driver's own time writing evidence and appending attempts
    recorded: int = 0
    ran_by: dict[str, int] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    _in_flight: dict[Future[TrialResult], tuple[int, Any]] = field(default_factory=dict)
    _done: dict[int, Future[TrialResult]] = field(default_factory=dict)   # finished, not yet recorded
    _idle: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._idle = [self.local] if self.local is not None else []

    def shut_gate(self) -> None:
        """The stop key was pressed (any thread, a signal handler included): no trial is submitted again, and
        the driver's own arm takes no further command."""
        self.stopping.set()
        if self.local is not None:
            self.local.worker.shut_gate()

    def emergency_stop(self) -> None:
        """Stop every worker's arm; each trial in flight comes back as an emergency-stop void."""
        self.stopping.set()
        if self.local is not None:
            self.local.worker.emergency_stop()
        self.ray_workers.emergency_stop()

    def run(self) -> int:
        """Run every pending trial; returns how many attempts were recorded. Raises `RunPaused` where a
        serial run would have paused, and on the stop key once the trials it voided are recorded."""
        room = TrialRoom(self.runs_dir / self.sheet.path.stem, self.sheet.path)
        return TrialSequence(self.protocol, self.sheet, self.observer, self, room, self.max_attempts).run()

    def emergency_stopped(self) -> bool:
        """The stop key was pressed, and no worker has or will have an attempt at the next trial to record."""
        if not self.stopping.is_set():
            return False
        pending = self.sheet.pending_trials()
        return not pending or not self._coming(pending[0])

    def abort(self) -> NoReturn:
        """An operator's abort pauses the run (a `--workers` run's arms are simulated: none to move home)."""
        raise RunPaused(Void(VoidKind.OPERATOR_ABORT))

    def attempt(self, trial: Trial, number: int) -> tuple[Attempt, Void | None]:
        """Attempt `number` at `trial`, run by a worker (perhaps already) and recorded here."""
        order = self.sheet.pending_trials()   # `trial` first
        while trial.index not in self._done:
            self._idle.extend(self.ray_workers.newly_ready(wait_s=0 if self._in_flight else STOP_KEY_POLL_S))
            self._hand_out(order)
            if self.stopping.is_set() and not self._coming(trial.index):   # the stop key came before it started
                raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
            self._collect()
            self._hand_out(order)   # a freed worker starts its next trial before this thread records the last one
        result = self._result(self._done.pop(trial.index), trial.index)
        return self._record(result), result.void

    def _coming(self, index: int) -> bool:
        """A worker runs, or ran, trial `index` for an attempt not yet recorded."""
        return index in self._done or any(running == index for running, _ in self._in_flight.values())

    def _hand_out(self, order: list[int]) -> None:
        """Idle workers take the pending trials not yet started, in trial order (the driver's own first: its
        evidence needs no shipping); none once the stop key was pressed. Beyond `order[0]`, the trial the
        sequence waits for, no more are started than `--max-trials` leaves attempts to record."""
        for index in order:
            if not self._idle or self.stopping.is_set():
                return
            if self._coming(index):
                continue
            ahead = len(self._in_flight) + len(self._done)
            if index != order[0] and self.max_attempts is not None and self.recorded + ahead >= self.max_attempts:
                return
            worker = self._idle.pop(0)
            self._in_flight[worker.submit(index, self.sheet.next_attempt_number(index))] = (index, worker)

    def _collect(self) -> None:
        """The trials finished within a short wait: the stop key's signal handler runs only when this thread is
        back in Python, and a Ray worker that became ready is given a trial within one."""
        finished, _ = wait(list(self._in_flight), timeout=STOP_KEY_POLL_S, return_when=FIRST_COMPLETED)
        for future in finished:
            index, worker = self._in_flight.pop(future)
            if worker is self.local:
                self._idle.insert(0, worker)
            else:
                self._idle.append(worker)
            self._done[index] = future
            self.ran_by[worker.name] = self.ran_by.get(worker.name, 0) + 1

    def _result(self, future: Future[TrialResult], index: int) -> TrialResult:
        """A finished trial's result; a worker's write refused for want of room is raised as it is (the
        sequence pauses the run on it), a Ray worker that kept failing as `WorkerFailed`."""
        exception = future.exception()
        if exception is None:
            return future.result()
        if no_room(exception) is not None:
            raise exception
        import ray

        if isinstance(exception, ray.exceptions.RayError):
            raise WorkerFailed(f"a Ray worker failed on trial {index} and was retried without success "
                               f"({type(exception).__name__}); nothing was recorded for it: run again with --resume"
                               ) from None
        raise exception

    def _record(self, result: TrialResult) -> Attempt:
        """The worker's evidence stored where a serial run writes it, then its attempt appended."""
        started = time.perf_counter()
        attempt = store_evidence(result, self.runs_dir, self.sheet.path.stem)
        recorded = self.sheet.add_attempt(attempt)
        if result.folder_name is not None:   # the folder now proves the record existed
            mark_recorded(self.runs_dir / self.sheet.path.stem / result.folder_name, recorded)
        self.record_busy_s += time.perf_counter() - started
        self.recorded += 1
        self.worker_busy_s += result.worker_s
        return recorded


def local_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def run_parallel(request: RunRequest, protocol: Protocol, sheet: Scoresheet, created: bool,
                 observer: Any = None, parts: Any = None, policy: Any = None) -> int:
    """The parallel counterpart of the engine's run: build the driver's own worker (with `policy`, loaded
    already, which it then owns), write the new sheet, start Ray and the other workers in the background,
    and record every pending trial in order (told to `observer`, by default one line per trial). Returns the
    attempts recorded."""
    from harness.run.terminal import StopKey, TerminalObserver

    workers = request.workers.count
    assert isinstance(workers, int), "--workers auto is resolved before the run starts"
    address = request.workers.address
    local: LocalWorker | None = None
    if not request.workers.driver_worker:
        if policy is not None:
            policy.close()   # loaded to check it; each Ray worker loads its own
    else:   # keeps the serial run's writer lanes only where the other workers leave this machine cores free
        lanes = None if address or workers < local_cores() else 0
        local = LocalWorker(TrialWorkerImpl(request, protocol, str(sheet.path), sheet.locked_data, sheet.settings,
                                            lanes=lanes, parts=parts, policy=policy))
    on_ray = workers - (local is not None)
    observer = observer or TerminalObserver(operator_scores=False, timing_withheld=sheet.still_blind)
    ray_workers: RayWorkers | None = None
    started = time.perf_counter()
    try:
        if address:   # a cluster that refuses is bad input: found out before the sheet is written
            RayHost.run(start_ray, address, workers)
        if created:
            sheet.create()
        here = "this process at once, " if local is not None else ""
        print(f"{sheet.path}: {trials_to_run(sheet, request.max_trials)} "
              f"({sheet.locked.policy.ref} on {sheet.locked.robot}, {workers} worker{'s' if workers > 1 else ''}: "
              f"{here}{on_ray} on Ray as they start)", flush=True)
        ray_workers = RayWorkers(request, protocol, sheet, on_ray,
                                 pool=parts.ray_workers if parts is not None else None)
        run = ParallelRun(protocol, sheet, observer, local, ray_workers, request.runs_dir,
                          request.max_trials)
        try:
            with StopKey(run, lambda: False):
                return run.run()
        finally:
            wall = time.perf_counter() - started
            if run.recorded:
                up = (f"; Ray up after {ray_workers.ray_up_after_s:.1f} s"
                      if ray_workers.ray_up_after_s is not None else "")
                joined = up + (f", Ray workers ready after {', '.join(f'{s:.1f}' for s in ray_workers.ready_after_s)} s"
                               if ray_workers.ready_after_s else ", no Ray worker was ready before the end")
                shares = ", ".join(f"{n} by {name}" for name, n in sorted(run.ran_by.items()))
                print(f"{run.recorded} attempts in {wall:.1f} s on {workers} workers ({shares}; "
                      f"{run.worker_busy_s / run.recorded:.2f} s of worker time each, recording "
                      f"{run.record_busy_s / run.recorded:.3f} s each{joined})", file=sys.stderr, flush=True)
    finally:
        try:
            if local is not None:
                local.close()
        finally:
            if ray_workers is not None:
                ray_workers.close()
