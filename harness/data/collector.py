"""`harness collect`: demonstrations on the simulated arm, filtered by the judge, kept as a
LeRobot v3.0 dataset, resumable after a kill.

Attempts cycle through a protocol's start positions (attempt n uses trial (n-1) mod T, with its own
seed), so a scattered protocol gives scattered demonstrations and a fixed one gives the
one-spot data the coverage question is about. Only accepted attempts reach the dataset; every
attempt, kept or not, is in the journal with its reason. The robot, policy and dataset writer are
passed in (the app layer builds them), so this module runs the same under tests and the CLI.
"""

from __future__ import annotations

import math
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.data.acceptance import AcceptMode, decide
from harness.data.collect_journal import Journal, drop_old_snapshots, roll_back, state_dir, take_snapshot
from harness.errors import HarnessInputError
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial
from harness.models.render_profile import LEGACY_PROFILE, RenderProfile
from harness.policies.base import EvalPolicy, TrialContext

SUPPORTED_FPS = (30, 60)


class EpisodeSink(Protocol):
    """What collection needs from a dataset writer (`harness.run.dataset_sink.DatasetSink`)."""

    cameras: list[str]
    size: tuple[int, int]

    def add(self, observation: dict[str, Any], action: dict[str, float],
            frames: dict[str, np.ndarray | None]) -> None: ...
    def end_episode(self) -> int | None: ...
    def discard_episode(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class CollectSettings:
    """What a collection is locked to (the journal's header). `episodes` and `max_attempts` are
    not: a finished collection may be extended by rerunning with a larger `--episodes`."""

    protocol_name: str
    protocol_sha256: str
    policy_ref: str
    policy_fingerprint: str
    accept: AcceptMode
    fps: int
    cameras: tuple[str, ...]
    image_size: tuple[int, int]
    seed: int = 0
    after_verdict_s: float = 1.5
    checkpoint_every: int = 10
    render_profile: RenderProfile = LEGACY_PROFILE   # how the recorded frames are drawn (issue 42)

    def locked(self) -> dict[str, Any]:
        data = asdict(self)
        data["accept"] = self.accept.value
        data["cameras"] = list(self.cameras)
        data["image_size"] = list(self.image_size)
        data.pop("checkpoint_every")
        data["render_profile"] = self.render_profile.value
        if self.render_profile is LEGACY_PROFILE:   # a journal from before profiles: the same header, resumable
            data.pop("render_profile")
        return data


@dataclass
class CollectResult:
    accepted: int
    attempts: int
    rejected: Counter = field(default_factory=Counter)
    complete: bool = False
    wall_s: float = 0.0


def check_fps(fps: int, physics_dt: float) -> None:
    """The action is held for a whole number of physics steps, so the physics rate is the same
    at every control rate (300 steps/s at dt 1/300: 10 per action at 30 Hz, 5 at 60 Hz)."""
    substeps = 1.0 / (fps * physics_dt)
    if fps not in SUPPORTED_FPS or abs(substeps - round(substeps)) > 1e-9:
        raise HarnessInputError(None, "--fps", f"{fps} Hz: choose one of {list(SUPPORTED_FPS)}")


def trial_for_attempt(protocol: EvalProtocol, attempt: int) -> Trial:
    return protocol.trials[(attempt - 1) % len(protocol.trials)]


def attempt_seed(settings: CollectSettings, attempt: int) -> int:
    return settings.seed * 1_000_003 + attempt


class Collector:
    """Runs attempts until `episodes` are accepted (or `max_attempts` are spent)."""

    def __init__(self, protocol: EvalProtocol, settings: CollectSettings, root: Path, robot: Any,
                 policy: EvalPolicy, open_sink: Callable[[], EpisodeSink],
                 progress: Callable[[str], None] = print, clock: Callable[[], float] = time.perf_counter) -> None:
        if protocol.fps != settings.fps:
            raise ValueError("the protocol's fps must be the collection's control rate")
        self.protocol = protocol
        self.settings = settings
        self.root = root
        self.robot = robot
        self.world = robot.world
        self.policy = policy
        self.open_sink = open_sink
        self.progress = progress
        self.clock = clock
        self.journal = Journal.open(state_dir(root) / "journal.jsonl")
        self.sink: EpisodeSink | None = None

    # --- resume ------------------------------------------------------------
    def prepare(self) -> int:
        """Check the journal against these settings, undo anything after the last checkpoint,
        open the dataset; returns the number of committed episodes."""
        header = self.journal.header
        if header is None:
            if self.root.exists():
                raise HarnessInputError(self.root, None, "exists but was not made by harness collect "
                                                         "(no journal beside it): choose another --output")
            self.journal.append({"kind": "header", "settings": self.settings.locked(), "started": _now()})
        else:
            self._check_header(header["settings"])
        checkpoint = self.journal.last_checkpoint
        committed = checkpoint["episodes"] if checkpoint else 0
        pending = [a for a in self.journal.attempts()
                   if a["accepted"] and a["episode_index"] is not None and a["episode_index"] >= committed
                   and a["attempt"] not in self.journal.lost_attempts()]
        dirty = checkpoint is not None and (bool(pending) or self._dirty(committed))
        if checkpoint is None:
            shutil.rmtree(self.root, ignore_errors=True)
        elif dirty:
            roll_back(self.root, checkpoint["snapshot"])
        if dirty or (checkpoint is None and self.journal.attempts()):
            self.journal.append({"kind": "rollback", "to_episodes": committed,
                                 "lost_attempts": [a["attempt"] for a in pending], "at": _now()})
            if pending:
                self.progress(f"resumed: {len(pending)} accepted attempt(s) after the last checkpoint were "
                              f"not finalized and will be redone; {committed} episodes kept")
        self.sink = self.open_sink()
        return committed

    def _check_header(self, locked: dict[str, Any]) -> None:
        now = self.settings.locked()
        for key, value in now.items():
            if locked.get(key) != value:
                raise HarnessInputError(state_dir(self.root) / "journal.jsonl", key,
                                        f"this collection was started with {locked.get(key)!r}, not {value!r}; "
                                        "use another --output for different settings")

    def _dirty(self, committed: int) -> bool:
        import json

        info = self.root / "meta" / "info.json"
        if not info.is_file():
            return True
        try:
            return json.loads(info.read_text())["total_episodes"] != committed or (self.root / "images").exists()
        except (ValueError, KeyError):
            return True

    # --- the loop ----------------------------------------------------------
    def committed_episodes(self) -> int:
        checkpoint = self.journal.last_checkpoint
        return checkpoint["episodes"] if checkpoint else 0

    def run(self, episodes: int, max_attempts: int | None = None) -> CollectResult:
        committed = self.prepare()
        t0 = self.clock()
        accepted = committed
        attempts_run = 0
        try:
            while accepted < episodes:
                number = self.journal.next_attempt_number()
                if max_attempts is not None and number > max_attempts:
                    break
                record = self.attempt(number)
                attempts_run += 1
                self.journal.append(record)
                if record["accepted"]:
                    accepted += 1
                    if accepted - self.committed_episodes() >= self.settings.checkpoint_every:
                        self.checkpoint(accepted)
                where = f"dx {record['dx_cm']:+.1f} dy {record['dy_cm']:+.1f} cm"
                verdict = (f"kept as episode {record['episode_index']}" if record["accepted"]
                           else f"rejected: {record['reason']}")
                self.progress(f"[{accepted:>4}/{episodes}] attempt {number:>4} ({where}): {verdict}"
                              f"{time_left(self.clock() - t0, accepted - committed, episodes - accepted)}")
            if accepted > self.committed_episodes():
                self.checkpoint(accepted)
        finally:
            if self.sink is not None:
                self.sink.close()
                self.sink = None
        summary = self.summary()
        return CollectResult(accepted=accepted, attempts=summary["attempts_total"],
                             rejected=Counter(summary["rejected_by_reason"]), complete=accepted >= episodes,
                             wall_s=self.clock() - t0)

    def checkpoint(self, episodes: int) -> None:
        """Finalize (LeRobot writes the parquet footers), snapshot, reopen for more."""
        assert self.sink is not None
        self.sink.close()
        snapshot = take_snapshot(self.root, episodes)
        self.journal.append({"kind": "checkpoint", "episodes": episodes, "snapshot": snapshot, "at": _now()})
        drop_old_snapshots(self.root, snapshot)
        self.sink = self.open_sink()

    def attempt(self, number: int) -> dict[str, Any]:
        """One attempt from the protocol's start pose; the episode is kept only if accepted."""
        assert self.sink is not None
        trial = trial_for_attempt(self.protocol, number)
        seed = attempt_seed(self.settings, number)
        scene = self.protocol.scene
        cube_xy = ((scene.trained_cube_xy_cm[0] + trial.dx_cm) / 100, (scene.trained_cube_xy_cm[1] + trial.dy_cm) / 100)
        self.world.reset(cube_xy, math.radians(trial.yaw_deg), self.protocol.start_pose, seed=seed)
        self.policy.reset(TrialContext(self.protocol, trial, self.world))
        physics_t0 = self.world.time
        t0 = self.clock()
        frames = self._episode()
        verdict = self.world.judge.verdict(self.world.data)
        decision = decide(verdict, self.settings.accept)
        episode_index = self.sink.end_episode() if decision.accepted else None
        if not decision.accepted:
            self.sink.discard_episode()
        physics_steps = round((self.world.time - physics_t0) / self.world.model.opt.timestep)
        return {
            "kind": "attempt", "attempt": number, "trial_index": trial.index, "seed": seed,
            "dx_cm": trial.dx_cm, "dy_cm": trial.dy_cm, "yaw_deg": trial.yaw_deg,
            "accepted": decision.accepted, "reason": decision.reason.value if decision.reason else None,
            "episode_index": episode_index, "label": verdict.label.value, "clean_release": verdict.clean_release,
            "events": [e.event.value for e in verdict.events],
            "placement_error_cm": verdict.true_placement_error_cm,
            "frames": frames, "physics_steps": physics_steps,
            "physics_steps_per_s": round(physics_steps / (frames / self.protocol.fps), 3) if frames else None,
            "wall_s": round(self.clock() - t0, 3), "at": _now(),
        }

    def _episode(self) -> int:
        sink = self.sink
        assert sink is not None
        width, height = sink.size
        max_steps = round(self.protocol.episode_time_limit_s * self.protocol.fps)
        after = round(self.settings.after_verdict_s * self.protocol.fps)
        finish_at: int | None = None
        steps = 0
        for step in range(max_steps):
            observation = self.robot.get_observation()
            frames = {}
            for cam in sink.cameras:
                image = observation.get(cam)
                ok = isinstance(image, np.ndarray) and image.shape[:2] == (height, width)
                frames[cam] = image if ok else self.world.render(cam, width, height)
            action = self.policy.select_action(observation)
            sent = self.robot.send_action(action)
            sink.add(observation, sent, frames)
            steps += 1
            if finish_at is None and self.world.judge.finished:
                finish_at = step + after
            if finish_at is not None and step >= finish_at:
                break
        return steps

    # --- what the dataset's meta files say ---------------------------------
    def summary(self) -> dict[str, Any]:
        """Accepted ids (committed episodes only), rejected ids with reasons, attempt totals."""
        lost = self.journal.lost_attempts()
        committed = self.committed_episodes()
        accepted, rejected, interrupted = [], [], []
        for a in self.journal.attempts():
            if a["attempt"] in lost or (a["accepted"] and a["episode_index"] >= committed):
                interrupted.append(a["attempt"])
            elif a["accepted"]:
                accepted.append(a)
            else:
                rejected.append(a)
        return {
            "accepted": accepted,
            "rejected": rejected,
            "interrupted_attempts": interrupted,
            "attempts_total": len(self.journal.attempts()),
            "rejected_by_reason": dict(Counter(a["reason"] for a in rejected)),
        }


def _now() -> str:
    from harness.models.scoresheet import now_iso

    return now_iso()


def time_left(elapsed_s: float, kept: int, still_needed: int) -> str:
    """`; about 3 min 10 s left` at this session's pace per kept episode (its rejections included)."""
    if still_needed <= 0 or kept <= 0:
        return ""
    seconds = round(elapsed_s / kept * still_needed)
    return f"; about {seconds // 60} min {seconds % 60:02d} s left"
