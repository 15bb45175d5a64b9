"""A blind comparison as its scoresheet has recorded it so far: the locked schedule, each declared comparison's
test replayed over the complete blocks, and what the test decides on.

Derived, never stored: the sheet locks the comparison (`models.locked.LockedComparison`) and records attempts;
everything here is recomputed from those two, so a report, a resume and the stopping rule read one answer.
A sheet hands out its own (`Scoresheet.comparison`); for a single policy's sheet the schedule and the traces are
empty.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.models.comparison import Slot, block_outcomes, build_schedule, decision_text, replay, run_finished
from harness.models.graded import PrimaryOutcome
from harness.models.locked import LockedBlock
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Label
from harness.stats import betting
from harness.stats.sequential import ComparisonTrace, SequentialDesign


class SheetComparison:
    """A comparison's schedule and tests over a sheet's counted attempts (`final_attempt`: the sheet's, per trial,
    read at each call, so the answers follow the records as they are appended or re-scored)."""

    def __init__(self, locked: LockedBlock, final_attempt: Callable[[int], Attempt | None]) -> None:
        self.locked = locked
        self.final_attempt = final_attempt

    def schedule(self) -> list[Slot]:
        """The schedule, slot number = trial index (empty for any other run)."""
        comparison = self.locked.comparison
        if comparison is None:
            return []
        return build_schedule(*comparison.schedule_args())

    def traces(self) -> list[ComparisonTrace]:
        """Each declared comparison replayed over the complete blocks recorded so far."""
        comparison = self.locked.comparison
        if comparison is None:
            return []

        def success_of(number: int) -> bool | None:
            attempt = self.final_attempt(number)
            return None if attempt is None else attempt.label is Label.SUCCESS

        design = SequentialDesign(**comparison.design.model_dump(exclude={"fixed_sample_pairs"}))
        if comparison.graded is not None:   # a graded primary outcome: the paired betting test
            return betting.replay_comparisons(self.betting_design(), tuple(comparison.comparisons),
                                              block_outcomes(self.schedule(), self.graded_score))
        return replay(design, tuple(comparison.comparisons), block_outcomes(self.schedule(), success_of))

    def outcome(self) -> PrimaryOutcome:
        """What the test decides on, as locked (success for a sheet without a graded block)."""
        comparison = self.locked.comparison
        return comparison.graded.outcome.kind if comparison and comparison.graded else PrimaryOutcome.SUCCESS

    def decided(self) -> str | None:
        """Why the tests ended the run (every declared comparison decided), or None: still running."""
        traces = self.traces()
        return decision_text(traces, self.outcome()) if traces and traces[0].states and run_finished(traces) else None

    def betting_design(self) -> betting.BettingDesign:
        """A graded comparison's test, from the locked design and bet (`harness.stats.betting`)."""
        comparison = self.locked.require_comparison()
        if comparison.graded is None:
            raise ValueError("a comparison on success has no betting design")
        d = comparison.design
        return betting.BettingDesign(d.alpha, d.power, d.min_difference, d.comparisons, d.cap,
                                     tuple(comparison.graded.bets))

    def graded_score(self, trial_index: int) -> float | None:
        """The locked graded outcome of a trial's final attempt on [0, 1] (None: not scored yet)."""
        attempt = self.final_attempt(trial_index)
        graded = self.locked.require_comparison().graded
        if attempt is None or graded is None:
            return None
        episode = attempt.loop.episode_s if attempt.loop.episode_s is not None else attempt.duration_s
        return graded.outcome.score(attempt.label, attempt.judge, attempt.anatomy, episode)
