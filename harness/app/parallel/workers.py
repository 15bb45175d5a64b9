"""The workers of a `--workers` run: what one runs (`TrialWorkerImpl`, around a `DetachedSheet`), and the Ray
actors that run it, lent to one run at a time and kept from run to run by a sweep (issue 42). The driver's side
(handing out trials, recording them in order) is `runs`.

A sweep runs its cells one after another, each a `--workers` run. A worker started per cell pays, every cell,
for its process (Python, torch, LeRobot and MuJoCo imported), its scene (the MuJoCo model with both mesh sets)
and its checkpoint, although the cell before had the same scene and often the same checkpoint (one checkpoint
under several protocols or conditions). So a worker is a Ray actor (`TrialWorker`) with its own
`app.worker_cache.WorkerCache`, the same cache the sweep's own process keeps: lent to a run, it builds that run's
engine around the policies and simulators it holds, loading only what it has not loaded yet; given back, it
closes the run and keeps the rest. The kept actors wait in Ray's `ActorPool` between runs.

Every call names its run (`RunSpec`, put in Ray's object store once per run), so an actor that Ray restarted
in the middle of a run (its process died: `max_restarts`) builds the run again on the retried trial, as a
worker started for that run would. A kept worker gives the outcomes a fresh one gives, trial for trial
(tests/e2e/test_sweep.py: the same sweep kept and fresh).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.app.worker_cache import WorkerCache
from harness.models.evidence_audit import evidence_folder_name
from harness.models.locked import LockedInference
from harness.models.protocol import Protocol
from harness.models.run_request import RunRequest, WorkersRequest
from harness.models.run_settings import InferenceEngine, RunSettings
from harness.models.scoresheet import LockedBlock, Scoresheet, run_inference
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Void
from harness.scratch import make as make_scratch

CONTROL_GROUP = "control"   # a worker's concurrency group for the emergency stop
CLOSE_TIMEOUT_S = 10.0   # for the Ray workers to release their arms and remove their folders at the end


class DetachedSheet:
    """What a worker's engine sees instead of the scoresheet: the locked block and settings (read-only), and an
    `add_attempt` that hands the finished attempt back unwritten (the driver numbers and records attempts)."""

    def __init__(self, path: Path, locked_data: dict[str, Any], settings: RunSettings) -> None:
        self.path = path
        self.locked = LockedBlock.model_validate(locked_data)
        self.settings = settings

    @property
    def inference(self) -> LockedInference:
        """As `Scoresheet.inference`: the locked engine, or LeRobot's synchronous one before engines were locked."""
        return run_inference(self.locked)

    @property
    def inference_engine(self) -> InferenceEngine:
        return self.inference.engine

    @property
    def still_blind(self) -> bool:
        """As `Scoresheet.still_blind`, from the locked block alone (a worker does not read the chain): a blind
        comparison's worker withholds its timing; the driver's lines say what the chain allows."""
        return self.locked.blind_comparison

    def add_attempt(self, attempt: Attempt) -> Attempt:
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


def worker_request(request: RunRequest, runs_dir: Path, lanes: int | None = 0) -> RunRequest:
    """The run's own request, with evidence going to the worker's folder, one trial at a time, and the
    evidence drawn inline (`lanes=0`) or by that many writer lanes (None: the serial default)."""
    return request.updated(runs_dir=runs_dir, headless=True, realtime=False, workers=WorkersRequest().model_dump(),
                           dataset={"record": False, "folder": None}, evidence={"lanes": lanes})


class TrialWorkerImpl:
    """A worker's run: one simulator, one policy, one engine, many trials. What a Ray worker builds for each run
    it is lent to (`TrialWorker`, from the policies and simulators it keeps), and the driver's own
    worker (given the policy the driver loaded already, and its `Parts`)."""

    def __init__(self, request: RunRequest, protocol: Protocol, sheet_path: str, locked_data: dict[str, Any],
                 settings: RunSettings, lanes: int | None = 0, parts: Any = None, policy: Any = None) -> None:
        from harness.app.build import FrontEnd, prepare_run

        self.tmp = make_scratch("worker", remove_at_exit=False)   # removed by close, or at the next start
        self.sheet = DetachedSheet(Path(sheet_path), locked_data, settings)
        self.protocol = protocol
        if policy is None and self.sheet.locked.comparison is not None:   # a comparison: every arm, by the schedule
            from harness.app.parts import Parts
            from harness.policies.arms import load_arms

            policy = load_arms(self.sheet.locked, protocol, settings, request.device, (parts or Parts()).policy)
        try:
            # the stand-in has every member of a scoresheet the engine reads
            self.setup = prepare_run(worker_request(request, self.tmp, lanes), protocol,
                                     cast("Scoresheet", self.sheet), FrontEnd.PLAIN,
                                     parts, policy)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def shut_gate(self) -> None:
        """The stop key's first half (no lock, safe in a signal handler): no motion command passes."""
        self.setup.robot.shut_gate()

    def emergency_stop(self) -> None:
        """Called in the actor's `control` concurrency group (or from the driver's stop thread), beside a
        `run_trial` in flight: the trial in flight comes back as an emergency-stop void and this worker
        moves its arm no more."""
        self.setup.robot.emergency_stop()

    def run_trial(self, trial_index: int, attempt_number: int) -> TrialResult:
        started = time.perf_counter()
        trial = self.protocol.trial(trial_index)
        attempt, void = self.setup.engine.attempt(trial, attempt_number)
        folder = self.tmp / self.sheet.path.stem / evidence_folder_name(trial_index, attempt_number)
        files: dict[str, bytes] = {}
        if folder.is_dir():
            files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
            shutil.rmtree(folder, ignore_errors=True)
        return TrialResult(trial_index, attempt, void, folder.name if files else None, files,
                           time.perf_counter() - started)

    def close(self) -> None:
        self.setup.close()
        shutil.rmtree(self.tmp, ignore_errors=True)




@dataclass(frozen=True)
class RunSpec:
    """One run as a worker needs it: what `TrialWorkerImpl` is built from, and the run's own key."""

    request: RunRequest
    protocol: Protocol
    sheet_path: str
    locked_data: dict[str, Any]
    settings: RunSettings
    key: str = field(default_factory=lambda: uuid.uuid4().hex)


class TrialWorker:
    """The body of a Ray actor: the run it is lent to (a `TrialWorkerImpl`) over the policies and simulators it
    keeps (`WorkerCache`)."""

    def __init__(self) -> None:
        self.cache = WorkerCache()
        self.run: TrialWorkerImpl | None = None
        self.run_key: str | None = None

    def open(self, spec: RunSpec) -> int:
        """Ready for `spec`'s trials (a run of its own closed first); returns the process id."""
        if self.run_key != spec.key:
            self.end()
            self.run = TrialWorkerImpl(spec.request, spec.protocol, spec.sheet_path, spec.locked_data, spec.settings,
                                       parts=self.cache.parts())
            self.run_key = spec.key
        return os.getpid()

    def run_trial(self, spec: RunSpec, trial_index: int, attempt_number: int) -> TrialResult:
        self.open(spec)
        assert self.run is not None
        return self.run.run_trial(trial_index, attempt_number)

    def emergency_stop(self) -> None:
        """In the actor's `control` concurrency group, beside a trial in flight (`TrialWorkerImpl.emergency_stop`)."""
        run = self.run
        if run is not None:
            run.emergency_stop()

    def end(self) -> tuple[int, int]:
        """Close the run (its engine, its folder); keep the policies and simulators. Returns `loads()`."""
        run, self.run, self.run_key = self.run, None, None
        if run is not None:
            run.close()
        return self.loads()

    def loads(self) -> tuple[int, int]:
        """(checkpoints loaded, scenes built) since this worker started."""
        return self.cache.policy_loads, self.cache.world_builds

    def close(self) -> None:
        try:
            self.end()
        finally:
            self.cache.close()


_remote_class: Any = None


def remote_worker_class() -> Any:
    """`TrialWorker` as a Ray actor class: one CPU; `control` beside the default group's one thread (the simulator
    and its renderer stay on that thread), so an emergency stop reaches a worker in the middle of a trial; a
    process that dies is restarted and its trial retried."""
    global _remote_class
    if _remote_class is None:
        import ray

        _remote_class = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3,
                                   concurrency_groups={CONTROL_GROUP: 1})(TrialWorker)
    return _remote_class


class WorkerPool:
    """The Ray workers of one `--workers` run (ended with it), or of a sweep (kept between its runs, idle in Ray's
    `ActorPool`, ended by `close`). Ray must be up before `take`."""

    def __init__(self) -> None:
        self._idle: Any = None     # ray.util.ActorPool, made once Ray is up
        self._every: list[Any] = []   # every actor this pool made and has not ended: idle or lent
        self._lock = threading.Lock()

    def take(self, count: int) -> list[Any]:
        """`count` actors for a run: idle ones first, new ones for the rest."""
        from ray.util.actor_pool import ActorPool

        with self._lock:
            if self._idle is None:
                self._idle = ActorPool([])
            taken: list[Any] = []
            while len(taken) < count and (actor := self._idle.pop_idle()) is not None:
                taken.append(actor)
            fresh = [remote_worker_class().remote() for _ in range(count - len(taken))]
            self._every.extend(fresh)
            return taken + fresh

    def give_back(self, actors: list[Any]) -> None:
        """A run's actors, for the next run: each ends the run after whatever it still has queued for it (its
        set-up, a trial in flight), without being waited for, so a worker still starting when a short run ends
        is ready for the next one. Ray runs an actor's calls in the order they were sent, so the next run's
        set-up comes after; an actor that died meanwhile fails that set-up, as a new one that failed would."""
        for actor in actors:
            actor.end.remote()
        with self._lock:
            for actor in actors:
                self._idle.push(actor)

    def loads(self, timeout_s: float = CLOSE_TIMEOUT_S) -> list[tuple[int, int]]:
        """Each worker's (checkpoints loaded, scenes built), for a sweep's closing line (between runs: a lent
        worker answers after its run's calls)."""
        with self._lock:
            every = list(self._every)
        if not every:
            return []
        import ray

        refs = [actor.loads.remote() for actor in every]
        answered, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        return [ray.get(ref) for ref in refs if ref in answered]

    def close(self, closing: list[Any] | None = None, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """End every actor: `closing` (default: every one) closes its run and cache first, all at once and not
        waited for long (a worker that died, or is being restarted, answers never); the others are only ended."""
        with self._lock:
            every, self._every, self._idle = self._every, [], None
        if not every:
            return
        import ray

        closing = every if closing is None else [actor for actor in closing if actor in every]
        refs = [actor.close.remote() for actor in closing]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for actor in every:
            ray.kill(actor)
