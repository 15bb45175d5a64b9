"""The locked block of a scoresheet as a typed, frozen model: what was decided before trial 1.

The lock hashes are computed over the block exactly as written to disk (`Scoresheet` keeps
those raw fields); this model is the typed view everyone reads, so no caller indexes a dict by
field name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.models.comparison import CodeRule, PositionRule, SealedMapping
from harness.models.graded import GradedOutcome
from harness.models.protocol import StoppingRule, Trial
from harness.models.reality_gap import RealityGap
from harness.models.render_profile import RenderProfile
from harness.models.run_settings import InferenceEngine, Latency, RobotKind
from harness.stats.sequential import EfficacyRule, FutilityRule


class LockedPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ref: str                      # a built-in name or a checkpoint folder
    fingerprint: str              # builtin:<name> or sha256 over every file of the checkpoint


class LockedInference(BaseModel):
    """Which of LeRobot's inference engines picked the actions: what the arm experiences depends on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    engine: InferenceEngine
    # async: LeRobot's policy server and the client's queue settings (absent for the other engines)
    server: str | None = None                   # HOST:PORT
    actions_per_chunk: int | None = None
    chunk_size_threshold: float | None = None   # send an observation when the queue is at or below this of a chunk
    aggregate_fn: str | None = None             # a name in LeRobot's async_inference AGGREGATE_FUNCTIONS
    # rtc: LeRobot's Real-Time Chunking settings (absent for the other engines and for a policy without chunks)
    execution_horizon: int | None = None        # steps of the previous chunk a new one is inpainted against
    max_guidance_weight: float | None = None
    attention_schedule: Literal["ZEROS", "ONES", "LINEAR", "EXP"] | None = None
    queue_threshold: int | None = None          # start an inference at this many queued actions or fewer


class LockedRehearsal(BaseModel):
    """A sheet recorded on the emulated arm (`harness rehearse`), not a real one, with the reality gap it was
    given (`models.reality_gap`; the knobs left at the twin's value are not written)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gap: RealityGap = RealityGap()


class LockedTwin(BaseModel):
    """A twin sheet (`harness twin`): the real sheet it mirrors, by path and by the lock hash it had, so a
    resume against another sheet at that path is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    real_sheet: str
    real_lock_sha256: str


class LockedJournal(BaseModel):
    """How the sheet is written, locked with it: a format-2 sheet is never read as format 1, and the random id
    gives each sheet a lock hash of its own (the key of its progress witness, `harness.storage.progress`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: int
    id: str


class LockedBlock(BaseModel):
    """Fields in the order `harness.models.scoresheet.LOCKED_FIELDS` lists them, then the optional ones
    (`OPTIONAL_LOCKED_FIELDS`), which sheets locked before they existed lack."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task: str
    success_definition: str
    taxonomy: list[str]
    trial_count: int
    trials: list[Trial]
    protocol_file: str
    protocol_sha256: str
    policy: LockedPolicy
    robot: RobotKind
    stopping_rule: StoppingRule
    latency_ms: Latency = None   # None: lock-step (or a sheet older than the field)
    inference: LockedInference | None = None
    comparison: LockedComparison | None = None   # a blind comparison of two or more policies
    render_profile: RenderProfile | None = None   # None: a real arm, or a sheet older than the field (legacy)
    rehearsal: LockedRehearsal | None = None   # recorded on the emulated arm (`harness rehearse`)
    twin_of: LockedTwin | None = None          # the simulated twin of another sheet (`harness twin`)
    journal: LockedJournal | None = None       # the journal format and the sheet's own id (None: locked before)

    @property
    def blind_comparison(self) -> bool:
        """A blind comparison: while it is open, nothing shows timing per arm (a slower policy would name itself)."""
        return self.comparison is not None and self.comparison.blind

    def require_comparison(self) -> LockedComparison:
        """The comparison block, for code reached only with a comparison's sheet (its callers check
        `comparison is not None` first): a single policy's sheet here is a bug, not bad input."""
        if self.comparison is None:
            raise ValueError("a single policy's locked block has no comparison")
        return self.comparison


class LockedDesign(BaseModel):
    """The sequential test's numbers, as calibrated at the lock (`harness.stats.sequential.SequentialDesign`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    alpha: float
    power: float
    min_difference: float
    comparisons: int
    cap: int                      # pairs per comparison: trials per arm at most
    log_efficacy_bound: float
    fixed_sample_pairs: int       # McNemar's fixed-sample design at the same alpha and power, per arm
    # which statistic closes a direction for futility; absent: a sheet locked before paired betting existed
    futility: FutilityRule = FutilityRule.DISCORDANT_SPRT
    futility_bet: float | None = None   # paired betting's fraction lambda, as calibrated at the lock
    # which statistic names a winner; absent: a sheet locked before the anytime-valid mixture
    efficacy: EfficacyRule = EfficacyRule.CALIBRATED_SPRT
    prior_a: float | None = None        # the mixture's Beta prior on the discordant odds
    prior_b: float | None = None
    # paired-betting-mixture's fractions, averaged with equal weights; absent: a sheet locked before it
    futility_bets: list[float] | None = None


class LockedGraded(BaseModel):
    """A graded comparison's outcome as locked (definition, source, the scene it reads) and its test's mixture of
    bets (`harness.stats.betting`); the test's error rates, difference and cap are the comparison's `design`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    outcome: GradedOutcome
    bets: list[float]


class LockedComparison(BaseModel):
    """A blind comparison: the arms by code, the schedule's seed, the declared comparisons, the test and
    the sealed mapping (its commitment proves the mapping was fixed before trial 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arms: list[str]                          # codes, A, B, ...
    seed: int
    positions: list[int]                     # the protocol's trial indices a block's position is drawn from
    blocks: int
    comparisons: list[tuple[str, str]]
    design: LockedDesign
    sealed: SealedMapping
    blind: bool = True
    # how codes and positions were drawn; absent: a sheet locked before the draws (flag order, cycling positions)
    codes: CodeRule = CodeRule.FLAG_ORDER
    position_rule: PositionRule = PositionRule.CYCLE
    graded: LockedGraded | None = None       # a graded primary outcome (progress, time to success); None: success

    def schedule_args(self) -> tuple[int, tuple[str, ...], list[int], int, PositionRule]:
        """`build_schedule`'s arguments, as locked."""
        return self.seed, tuple(self.arms), self.positions, self.blocks, self.position_rule


LockedBlock.model_rebuild()
