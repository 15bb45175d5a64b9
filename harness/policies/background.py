"""A policy that loads on a thread of its own, so a real arm's run shows its check screen while it loads.

Loading a LeRobot policy is mostly importing torch and LeRobot (10-40 s on a loaded 2-core machine, issue 40):
work that neither reads nor moves the arm. `harness run --robot so101` starts it here, connects the arm and
opens the cameras meanwhile, and shows the check screen before it is done; the engine's first trial waits for
it (`RunEngine`), with the stop key and the abort live, and nothing moves until it is loaded. What had to be
checked once the policy is known (its cameras against the robot's, the scoresheet written only for a policy
that loads) runs as `on_ready` callbacks, once: on the loading thread as soon as it has loaded, while the check
screen waits (not between Enter and the arm's first move: issue 40), and a check that fails is shown there as
the load's error. A policy that does not load leaves no scoresheet behind, as before; nor does a run that ended
while it loaded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from harness.policies.base import EvalPolicy, InferenceStats, TrialContext


class BackgroundPolicy:
    """`load()` run on a daemon thread (it holds no device: a quit during loading need not wait for it); the
    `EvalPolicy` members wait for the loaded policy and re-raise what the load raised."""

    def __init__(self, load: Callable[[], EvalPolicy], name: str,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._load = load
        self._clock = clock
        self._name = name
        self._done = threading.Event()
        self._policy: EvalPolicy | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._ready_checks: list[Callable[[EvalPolicy], object]] = []   # not run yet
        self._checks_lock = threading.Lock()   # each check runs once, on whichever thread comes first
        self._threads_applied: set[int] = set()
        self.started = clock()
        self.load_s: float | None = None   # loading (and the warm-up, when it was handed an observation in time)
        self.warm_up_ms: float | None = None
        self.warmed = False
        self.warm_wanted = False   # the check screen measures the warm-up; plain mode never did
        self._warm_observation: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name="harness-policy-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            policy = self._load()
            with self._lock:   # a close meanwhile waits for the checks: a run that has ended writes nothing
                close_now = self._closed
                self._policy = policy
                observation, self._warm_observation = self._warm_observation, None
                if not close_now:
                    self._run_checks(policy)
            if close_now:   # the run ended while this loaded: nobody will use it
                policy.close()
            elif observation is not None:
                self._warm(policy, observation)
        except BaseException as exc:   # re-raised in whoever waits for it (the engine's first trial)
            self._error = exc
        self.load_s = self._clock() - self.started
        self._done.set()

    def _warm(self, policy: EvalPolicy, observation: dict[str, Any]) -> None:
        warm = getattr(policy, "warm_up", None)
        self.warm_up_ms = warm(observation) if warm is not None else None
        self.warmed = True

    def warm_up_when_loaded(self, observation: dict[str, Any]) -> None:
        """Warm the policy up on its own thread as soon as it has loaded (an observation the check screen
        took; the first calls allocate), so the first trial does not; if it has loaded already, `ready`'s
        caller does it (`warm_up_if_needed`)."""
        with self._lock:
            self.warm_wanted = True
            if self._policy is None and not self._done.is_set():
                self._warm_observation = observation

    # --- loading ----------------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        """Whether loading has ended (loaded, or failed)."""
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the load to end; whether it has."""
        return self._done.wait(timeout_s)

    def on_ready(self, check: Callable[[EvalPolicy], object]) -> None:
        """Run `check(policy)` once the policy is loaded: on the loading thread, or in the first thread that asks
        for the policy (`ready`) when the load ended before this was called."""
        with self._checks_lock:
            self._ready_checks.append(check)

    def _run_checks(self, policy: EvalPolicy) -> None:
        with self._checks_lock:
            checks, self._ready_checks = self._ready_checks, []
            for check in checks:
                check(policy)

    def ready(self) -> EvalPolicy:
        """The loaded policy (waiting for it), its `on_ready` checks run once; the load's error re-raised."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._policy is not None
        if threading.get_ident() not in self._threads_applied:
            # torch's thread count is per thread under OpenMP: set where `make_policy` ran (this loading thread), it
            # must be set again in the thread that runs inference, or that one takes every core from the robot's I/O
            threads = getattr(self._policy, "threads", None)
            if threads is not None:
                threads.apply()
            self._threads_applied.add(threading.get_ident())
        self._run_checks(self._policy)
        return self._policy

    # --- EvalPolicy, once loaded -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        policy = self._policy
        return policy.name if policy is not None else self._name

    @property
    def camera_keys(self) -> tuple[str, ...]:
        return self.ready().camera_keys

    @property
    def image_size(self) -> tuple[int, int] | None:
        return self.ready().image_size

    def warm_up_if_needed(self, observation: Callable[[], dict[str, Any]]) -> float | None:
        """Once loaded: the warm-up the check screen asked for, with `observation()`, unless the loading thread
        already did it; the warm-up's ms."""
        policy = self.ready()
        if self.warm_wanted and not self.warmed:
            self._warm(policy, observation())
        return self.warm_up_ms

    def reset(self, context: TrialContext) -> None:
        self.ready().reset(context)

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        return self.ready().select_action(observation)

    def end_episode(self) -> None:
        if self._policy is not None:
            self._policy.end_episode()

    def inference_stats(self) -> InferenceStats:
        return self.ready().inference_stats()

    def close(self) -> None:
        """Close the policy if it loaded; one still loading is closed by its thread when it finishes."""
        with self._lock:
            self._closed = True
            policy = self._policy
        if policy is not None:
            policy.close()
