"""The records a scoresheet's chains hold: attempts (with their loop statistics), placement measurements and
unblindings, and which of an attempt's records counts once the operator has re-scored it.

Records are pure data: `harness.models.scoresheet` chains, hashes and stores them. A record's JSON form is what a
sheet holds and hashes, so a field added later is left out when it is unset (each model's `_omit_*` serializer):
sheets recorded before it existed load and verify unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from harness.errors import HarnessInputError
from harness.models.anatomy import TrialAnatomy
from harness.models.taxonomy import ALL_LABELS, FAILURE_MODES, Label, Outcome
from harness.models.verdict import JudgeVerdict


class LoopStats(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = 0
    target_fps: float = 0.0
    achieved_fps: float = 0.0
    policy_latency_ms_p50: float = 0.0
    policy_latency_ms_p95: float = 0.0
    policy_latency_ms_max: float = 0.0
    robot_io_ms_p50: float = 0.0
    robot_io_ms_p95: float = 0.0
    missed_deadlines: int = 0
    # What the arm experienced (absent in sheets recorded before they existed, and omitted when unknown):
    obs_to_action_ms_p50: float | None = None   # from the observation a step read to its action landing
    obs_to_action_ms_p95: float | None = None
    obs_to_action_ms_max: float | None = None
    obs_to_action_clock: Literal["simulated", "wall"] | None = None
    queue_underruns: int | None = None   # steps whose action landed more than a control period late
    chunk_switches: int | None = None    # new action chunks the policy started (None: not a chunked policy)
    rtc_delay_steps_max: int | None = None   # RTC: most steps of a chunk's inpainting horizon spent on latency
    rtc_delay_steps_p50: int | None = None   # RTC: the median chunk's (the delay it was told, in control steps)
    inference_ms_p50: float | None = None    # the policy's own time per inference (a chunk, or a single action)
    realtime: bool | None = None         # a paced (real-arm) loop: ran under SCHED_FIFO or not (None: not paced)
    # the episode's length on the arm's clock (simulated, or a real arm's wall time): with `steps`, the rate the arm
    # got its commands at, stalls included (`achieved_fps` is the rate the loop's work alone would allow)
    episode_s: float | None = None

    @model_serializer(mode="wrap")
    def _omit_unmeasured(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Loop stats without the arm's experience store, and hash, exactly as before those fields existed."""
        data: dict[str, Any] = handler(self)
        for name in EXPERIENCE_FIELDS:
            if data.get(name) is None:
                data.pop(name, None)
        return data


EXPERIENCE_FIELDS = ("obs_to_action_ms_p50", "obs_to_action_ms_p95", "obs_to_action_ms_max", "obs_to_action_clock",
                     "queue_underruns", "chunk_switches", "realtime", "rtc_delay_steps_max", "rtc_delay_steps_p50",
                     "inference_ms_p50", "episode_s")


class Attempt(BaseModel):
    """One try at one trial. A voided attempt stays in the record; the trial is tried again."""

    model_config = ConfigDict(extra="forbid")
    trial_index: int
    attempt: int
    outcome: Outcome
    failure_mode: Label | None = None   # one of `FAILURE_LABELS`, exactly when the outcome is a failure
    void_reason: str | None = None
    placement_error_cm: float | None = None
    scored_by: Literal["judge", "operator"] = "operator"
    judge: JudgeVerdict | None = None
    started_at: str
    ended_at: str
    duration_s: float
    loop: LoopStats = Field(default_factory=LoopStats)
    note: str | None = None
    artifacts: dict[str, str] = Field(default_factory=dict)
    chain_sha256: str = ""
    measured_start: dict[str, Any] | None = None   # real arm: where the top camera saw the cube at the start
    proposal: dict[str, Any] | None = None         # real arm: the label proposed from evidence, with reasons
    anatomy: TrialAnatomy | None = None            # what the joint trace says: first motion, grasp point, phases
    # A re-score (the operator's undo): the chain hash of the record of this same attempt that this one replaces.
    # The replaced record stays in the sheet; summaries, reports and resume count this one.
    supersedes: str | None = None
    rescored_at: str | None = None                 # when the operator re-scored it (the original keeps its times)

    @model_serializer(mode="wrap")
    def _omit_unmeasured(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An attempt without a measured start, a proposal, an anatomy or a re-score stores, and hashes, exactly
        as before they existed."""
        data: dict[str, Any] = handler(self)
        for name in ("measured_start", "proposal", "anatomy", "supersedes", "rescored_at"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _failure_mode_with_failure(self) -> Attempt:
        if self.outcome is Outcome.FAILURE and (self.failure_mode is None or not self.failure_mode.is_failure):
            raise ValueError(f"a failure needs a failure_mode, one of {list(FAILURE_MODES)}")
        if self.outcome is not Outcome.FAILURE and self.failure_mode is not None:
            raise ValueError(f"failure_mode is only for a failure, not for {self.outcome.value}")
        return self

    @property
    def label(self) -> Label:
        """The taxonomy label: success, a failure mode, or void."""
        return self.failure_mode if self.failure_mode is not None else Label(self.outcome.value)


class Unblinding(BaseModel):
    """A blind comparison's arms revealed while the run was still open (`harness report --unblind`): a record in
    the sheet's own chain, so deleting it breaks the chain and the witness, and every later report names it."""

    model_config = ConfigDict(extra="forbid")
    at: str
    scored_trials: int
    note: str
    chain_sha256: str = ""


class PlacementMeasurement(BaseModel):
    """Placement error measured from pixels after the attempt was recorded (`harness measure`).

    Kept apart from the attempt so the attempt's own record and hash never change; a later
    measurement of the same attempt supersedes an earlier one.
    """

    model_config = ConfigDict(extra="forbid")
    trial_index: int
    attempt: int
    placement_error_cm: float
    inside_bowl: bool
    method: str
    image: str
    measured_at: str
    chain_sha256: str = ""
    uncertainty_cm: float | None = None   # half-width of the measurement's 95 % interval (pixels: from the fit)

    @model_serializer(mode="wrap")
    def _omit_unknown_uncertainty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A measurement without an uncertainty stores, and hashes, exactly as before the field existed."""
        data: dict[str, Any] = handler(self)
        if data.get("uncertainty_cm") is None:
            data.pop("uncertainty_cm", None)
        return data


def attempt_from_label(label: Label, **fields: Any) -> Attempt:
    """Build an attempt from a taxonomy label, the way operators and judges speak."""
    if label not in ALL_LABELS:
        raise HarnessInputError(None, "label", f"'{label}' is not in the taxonomy {list(ALL_LABELS)}")
    label = Label(label)
    if label is Label.VOID and not fields.get("void_reason"):
        raise HarnessInputError(None, "void_reason", "a void needs a reason")
    return Attempt(outcome=label.outcome, failure_mode=label if label.is_failure else None, **fields)



def rescored(original: Attempt, label: Label, note: str | None, void_reason: str | None, at: str) -> Attempt:
    """A new record of `original` with a new label (the operator's undo, at `at`), naming the record it replaces
    by its chain hash; what was measured of the attempt (its judge, anatomy, loop, placement) is carried over."""
    fields = original.model_dump(exclude={"chain_sha256", "outcome", "failure_mode", "void_reason", "note",
                                          "scored_by", "placement_error_cm", "supersedes", "rescored_at"})
    fields["judge"] = original.judge
    fields["anatomy"] = original.anatomy
    fields["loop"] = original.loop
    if label is Label.SUCCESS and original.judge is not None:
        fields["placement_error_cm"] = original.judge.true_placement_error_cm
    elif label is not Label.VOID:
        fields["placement_error_cm"] = original.placement_error_cm
    judged = original.judge is not None and original.judge.label is label
    return attempt_from_label(label, **fields, void_reason=void_reason, note=note,
                              scored_by="judge" if judged else "operator", supersedes=original.chain_sha256,
                              rescored_at=at)


class AttemptChain:
    """A sheet's attempt records in the order the chain holds them, and which of them count.

    `records` is the chain as written (append-only, every re-scored original kept); `attempts` is what counts:
    each attempt's latest record, in the place of its first one, so summaries, reports and resume see a
    re-scored attempt once, with its new label; `superseded` holds the records a re-score replaced. A trial's
    final attempt is its first counted one that is not a void.
    """

    def __init__(self) -> None:
        self.records: list[Attempt] = []
        self.attempts: list[Attempt] = []
        self.superseded: list[Attempt] = []
        self._final: dict[int, Attempt] = {}
        self._tries: dict[int, int] = {}
        self._highest: dict[int, int] = {}   # each trial's highest attempt number
        self._position: dict[tuple[int, int], int] = {}   # (trial, attempt) -> its place in `attempts`

    def problem(self, attempt: Attempt) -> str | None:
        """Why `attempt` cannot come next in the chain (None: it can)."""
        key = (attempt.trial_index, attempt.attempt)
        if attempt.supersedes is None:
            return None
        current = self.attempts[self._position[key]] if key in self._position else None
        if current is None or current.chain_sha256 != attempt.supersedes:
            return (f"re-scores trial {key[0]} attempt {key[1]}, but that attempt's latest record is not the one "
                    f"it names ({attempt.supersedes[:12]})")
        if self._highest.get(key[0], 0) > key[1]:
            return f"re-scores trial {key[0]} attempt {key[1]} after the trial was tried again"
        return None

    def add(self, attempt: Attempt) -> None:
        """Take the next record of the chain (one `problem` has passed)."""
        self.records.append(attempt)
        key = (attempt.trial_index, attempt.attempt)
        if attempt.supersedes is not None:
            old = self.attempts[self._position[key]]
            self.superseded.append(old)
            self.attempts[self._position[key]] = attempt
            if self._final.get(attempt.trial_index) is old:
                del self._final[attempt.trial_index]
        else:
            self._position[key] = len(self.attempts)
            self.attempts.append(attempt)
            self._tries[attempt.trial_index] = self._tries.get(attempt.trial_index, 0) + 1
            self._highest[attempt.trial_index] = max(attempt.attempt, self._highest.get(attempt.trial_index, 0))
        if attempt.label is not Label.VOID and attempt.trial_index not in self._final:
            self._final[attempt.trial_index] = attempt

    def final(self, trial_index: int) -> Attempt | None:
        """The trial's scored (non-void) attempt, as it counts now; None while it has none."""
        return self._final.get(trial_index)

    def tries(self, trial_index: int) -> int:
        """How many attempts of the trial are recorded (a re-score is not a new one)."""
        return self._tries.get(trial_index, 0)
