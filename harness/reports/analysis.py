"""Every number a report shows, computed once, as models: the HTML and Markdown reports render them and
`harness report --json` prints them, so a notebook or a CI job reads exactly what a person reads.

`analyze_run` is one scoresheet; `analyze_report` adds what only several runs say (the paired or
independent comparison, success against latency). Figures are drawn from the same rows
(`reports.trials.TrialRow`) by `reports.document`.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import Field

from harness.models.anatomy import ANATOMY_RULES, TrackingFit, tracking_fit
from harness.models.run_settings import ChunkLatency, InferenceEngine, RobotKind, latency_text
from harness.models.scoresheet import Scoresheet, run_latency
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import TAXONOMY, Label
from harness.reports.comparison import BlindComparisonJson
from harness.reports.fidelity import FidelityReport, fidelity_report
from harness.reports.summary import REPORT_SCHEMA, RunSummary, _Frozen, summarize
from harness.reports.timing import Culprit, time_split
from harness.reports.trials import TrialRow, trial_rows
from harness.stats.estimates import (
    fisher_exact,
    mcnemar_exact,
    minimum_detectable_effect,
    newcombe_paired,
    newcombe_unpaired,
    percentile,
    wilson_interval,
)
from harness.stats.logistic import LogisticFit, fit_logistic

DISTANCE_BINS = ((0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, math.inf))
ONE_SPOT_CM = 0.5       # trial offsets all within this of each other: a fixed-position protocol
FAR_FROM_TRAINING_CM = 2.0


class TrialLoop(_Frozen):
    steps: int | None
    policy_ms_p50: float | None
    policy_ms_p95: float | None
    robot_io_ms_p50: float | None
    robot_io_ms_p95: float | None
    missed_deadlines: int | None
    obs_to_action_ms_p50: float | None = None
    obs_to_action_ms_p95: float | None = None
    obs_to_action_ms_max: float | None = None
    obs_to_action_clock: str | None = Field(None, description="simulated or wall")
    queue_underruns: int | None = None
    chunk_switches: int | None = None
    rtc_delay_steps_p50: int | None = Field(None, description="RTC: the median chunk's inference delay, in steps")
    rtc_delay_steps_max: int | None = Field(None, description="RTC: the largest, in steps")


class TrialResult(_Frozen):
    trial: int
    dx_cm: float = Field(description="planned offset from the trained position, away from the robot")
    dy_cm: float = Field(description="planned offset, to the robot's left")
    measured_dxy_cm: tuple[float, float] | None = Field(description="real arm: where the top camera saw the start")
    distance_cm: float = Field(description="offset used for success against distance (measured when measured)")
    label: str = Field(description="final label: success, a failure mode, or pending")
    voids: int = Field(description="voided attempts before the final one")
    placement_error_cm: float | None
    placement_uncertainty_cm: float | None = Field(description="95 % half-width when measured from pixels")
    proposed_label: str | None = Field(description="real arm: the label proposed from evidence")
    loop: TrialLoop


class DistanceBin(_Frozen):
    low_cm: float
    high_cm: float | None = Field(description="null: no upper bound")
    k: int
    n: int
    wilson95: tuple[float, float]


class LogisticCurve(_Frozen):
    intercept: float
    slope: float = Field(description="logit P(success) per cm of offset")
    distance_at_50_cm: float | None = Field(description="where the fitted probability falls to 50 %, if it does")


class SuccessByDistance(_Frozen):
    one_spot: bool = Field(description="every trial at one spot: the run cannot say whether success depends on it")
    bins: list[DistanceBin]
    fit: LogisticCurve | None
    trials_far_from_training: int | None = Field(
        None, description=f"trials more than {FAR_FROM_TRAINING_CM:g} cm from every training start (given starts)")


class MeasuredStarts(_Frozen):
    n: int
    median_gap_cm: float = Field(description="measured start to planned start, median")
    max_gap_cm: float


class ProposalRow(_Frozen):
    proposed: str
    trials: int
    agreed: int
    instead: dict[str, int] = Field(description="labels the operator chose instead, with counts")


class ProposalAgreement(_Frozen):
    rows: list[ProposalRow]
    agreed: int
    total: int


class PlacementUncertainty(_Frozen):
    n: int = Field(description="successes measured from pixels")
    min_cm: float
    median_cm: float
    max_cm: float


class LoopTiming(_Frozen):
    budget_ms: float
    policy_ms_p50: float = Field(description="median over trials of each trial's p50")
    policy_ms_p95: float = Field(description="the worst trial's p95")
    robot_io_ms_p50: float
    robot_io_ms_p95: float
    busy_ms_mean: float | None
    wall_ms_per_step: float | None
    missed_deadlines: int
    steps: int
    lock_step: bool
    culprit: str = Field(description="what missed deadlines are blamed on: " + ", ".join(c.value for c in Culprit))


class Latency(_Frozen):
    model: str = Field(description="lock-step, measured, or a fixed latency in ms")
    engine: str = Field(description="sync, rtc or async")
    locked: bool
    server: str | None = None
    actions_per_chunk: int | None = None
    chunk_size_threshold: float | None = None
    aggregate_fn: str | None = None
    execution_horizon: int | None = Field(
        default=None, description="rtc: steps of the previous chunk inpainted against")
    max_guidance_weight: float | None = None
    attention_schedule: str | None = None
    queue_threshold: int | None = Field(
        default=None, description="rtc: an inference starts at this many queued or fewer")


class ArmExperience(_Frozen):
    """What the arm saw over a run's scored trials with chunks beside the loop (RTC, async) or a latency model:
    the figures the report states in words."""

    trials: int = Field(description="scored trials that recorded it")
    clock: str | None = Field(description="simulated or wall: whose time the latencies are in")
    obs_to_action_ms_p50: float | None = Field(description="median over trials of each trial's median")
    obs_to_action_ms_max: float | None = Field(description="the largest any trial saw")
    chunk_switches_per_trial: float | None
    underruns: int | None = Field(description="steps with no action ready (the arm held), over all trials")
    steps: int
    rtc_delay_steps_p50: int | None = Field(None, description="RTC: median over trials of the median delay told")
    rtc_delay_steps_max: int | None = Field(None, description="RTC: the largest delay told, in control steps")
    inference_ms_p50: float | None = Field(None, description="the policy's own time per inference (a chunk), "
                                                             "median over trials; null for a policy server")


class Fingerprints(_Frozen):
    protocol_file: str
    protocol_sha256: str
    policy_ref: str
    policy_fingerprint: str
    lock_sha256: str
    locked_at: str


class FailureAnatomy(_Frozen):
    trial: int
    label: str
    ended_in: str = Field(description="the last phase the trace reached")
    summary: str
    grasp_offset_cm: tuple[float, float] | None = Field(description="where the gripper closed, from the cube's start")
    cube_to_bowl_cm: float | None = Field(description="where the cube came to rest, from the bowl centre")
    videos: list[str] = Field(default_factory=list, description="the attempt's evidence videos (`harness replay "
                                                                "--failures` draws missing ones)")
    evidence_folder: str | None = Field(None, description="the attempt's evidence folder")


class FirstMotion(_Frozen):
    n: int
    median_s: float
    p95_s: float
    max_s: float
    stall_limit_s: float
    stalled_trials: list[int]


class RunAnatomy(_Frozen):
    """What the joint traces say over the run (trials recorded with an anatomy)."""

    tracking: TrackingFit | None = Field(description="grasp point on cube offset; null under 3 grasps or one spot")
    first_motion: FirstMotion | None
    failures_by_phase: dict[str, int] = Field(description="failures per phase they ended in")
    failures: list[FailureAnatomy]
    rules: dict[str, int] = Field(default_factory=dict, description="attempts per anatomy rules version that "
                                  "computed them (`1`: before the gripper's load, blind to a learned policy's grasp)")

    def lines(self) -> list[str]:
        """The plain report's few lines: tracking slope, first motion, the phases failures ended in."""
        out = []
        fit = self.tracking
        if fit is not None:
            out.append(f"Tracking    slope {fit.slope:.2f} (95% {fit.slope95[0]:.2f} to {fit.slope95[1]:.2f}) over "
                       f"{fit.n} grasp points: 1 follows the cube, 0 goes to one place")
        first = self.first_motion
        if first is not None:
            stalled = f", {len(first.stalled_trials)} stalled" if first.stalled_trials else ""
            out.append(f"First move  median {first.median_s:.2f} s, p95 {first.p95_s:.2f} s, max {first.max_s:.2f} s"
                       f"{stalled}")
        if self.failures_by_phase:
            out.append("Failed in   " + ", ".join(f"{phase} {n}" for phase, n in
                                                 sorted(self.failures_by_phase.items(), key=lambda kv: -kv[1])))
        versions = ", ".join(f"rules {v}: {n}" for v, n in sorted(self.rules.items()))
        old = ""
        if "1" in self.rules:
            old = " (rules 1 cannot see a learned policy's grasp: harness report --reanalyze)"
        elif any(int(v) < ANATOMY_RULES for v in self.rules):
            old = f" (older rules: harness report --reanalyze recomputes with rules {ANATOMY_RULES})"
        out.append(f"Anatomy     {versions}{old}")
        return out


class RunAnalysis(RunSummary):
    policy_label: str = Field(description="a checkpoint by training run and step; a built-in policy by name")
    trials: list[TrialResult] = Field(default_factory=list)
    by_distance: SuccessByDistance | None = None
    measured_starts: MeasuredStarts | None = None
    proposals: ProposalAgreement | None = None
    placement_uncertainty_cm: PlacementUncertainty | None = None
    loop_timing: LoopTiming | None = None
    latency: Latency | None = None
    experienced: ArmExperience | None = Field(None, description="what the arm saw; null when no trial recorded it")
    fingerprints: Fingerprints | None = None
    anatomy: RunAnatomy | None = Field(None, description="failure anatomy; null for attempts recorded before it")


class Comparison(_Frozen):
    runs: tuple[str, str] = Field(description="policy labels of the two runs, in argument order")
    paired: bool = Field(description="same protocol: outcomes paired by trial index")
    both: int | None = None
    only_first: int | None = None
    only_second: int | None = None
    neither: int | None = None
    k: tuple[int, int]
    n: tuple[int, int]
    difference: float = Field(description="success rate first minus second")
    interval95: tuple[float, float] = Field(description="Newcombe interval (paired or unpaired) for the difference")
    test: Literal["exact McNemar", "Fisher exact"]
    p_value: float
    minimum_detectable_effect: float | None = Field(description="80 % power, alpha 0.05, at these trial counts")
    tracking: tuple[TrackingFit | None, TrackingFit | None] | None = Field(
        None, description="each run's tracking slope side by side (failure anatomy)")


class IntervalRow(_Frozen):
    policy_label: str
    k: int
    n: int
    wilson95: tuple[float, float]


class LatencyGroup(_Frozen):
    latency: str
    sort_key: float
    runs: int
    k: int
    n: int
    wilson95: tuple[float, float] | None
    seen_obs_to_action_ms_p50: float | None


def policy_label(sheet: Scoresheet) -> str:
    """A checkpoint by its training run and step (every LeRobot checkpoint folder is `pretrained_model`);
    a built-in policy by its name."""
    from harness.models.checkpoint import checkpoint_name

    ref = sheet.locked.policy.ref
    return ref if sheet.locked.policy.fingerprint.startswith("builtin:") else checkpoint_name(ref).label


def analyze_run(sheet: Scoresheet, training_starts: list[tuple[float, float]] | None = None) -> RunAnalysis:
    rows = trial_rows(sheet)
    split = time_split(rows, control_rate(sheet), sheet.locked.robot)
    return RunAnalysis(
        **summarize(sheet).model_dump(),
        policy_label=policy_label(sheet),
        trials=[_trial(sheet, r) for r in rows],
        by_distance=_by_distance(rows, training_starts),
        measured_starts=_measured_starts(rows),
        proposals=_proposals(rows),
        placement_uncertainty_cm=_pixel_widths(rows),
        loop_timing=None if split is None else LoopTiming(
            budget_ms=split.budget_ms, policy_ms_p50=split.policy_p50, policy_ms_p95=split.policy_p95,
            robot_io_ms_p50=split.io_p50, robot_io_ms_p95=split.io_p95, busy_ms_mean=split.busy_mean,
            wall_ms_per_step=split.wall_per_step, missed_deadlines=split.missed, steps=split.steps,
            lock_step=split.lock_step, culprit=split.culprit.value),
        latency=latency_of(sheet),
        experienced=arm_experience(sheet),
        fingerprints=Fingerprints(
            protocol_file=sheet.locked.protocol_file, protocol_sha256=sheet.locked.protocol_sha256,
            policy_ref=sheet.locked.policy.ref, policy_fingerprint=sheet.locked.policy.fingerprint,
            lock_sha256=sheet.lock["sha256"], locked_at=str(sheet.lock["locked_at"])),
        anatomy=run_anatomy(sheet),
    )


def run_anatomy(sheet: Scoresheet) -> RunAnatomy | None:
    finals = [(a, anatomy) for i in sheet.trial_indices
              if (a := sheet.final_attempt(i)) is not None and (anatomy := a.anatomy) is not None]
    if not finals:
        return None
    grasped = [(anatomy.cube_start_cm, point) for _, anatomy in finals if (point := anatomy.grasp_point_cm) is not None]
    fit = tracking_fit([cube for cube, _ in grasped], [point for _, point in grasped])
    moved = sorted(t for _, anatomy in finals if (t := anatomy.first_motion_s) is not None)
    first = None if not moved else FirstMotion(
        n=len(moved), median_s=round(statistics.median(moved), 3), p95_s=round(percentile(moved, 95), 3),
        max_s=moved[-1], stall_limit_s=finals[0][1].stall_limit_s,
        stalled_trials=[a.trial_index for a, anatomy in finals if anatomy.stalled])
    failures = [FailureAnatomy(trial=a.trial_index, label=a.label, ended_in=anatomy.ended_in.value,
                               summary=anatomy.summary, grasp_offset_cm=_rounded(anatomy.grasp_offset_cm),
                               cube_to_bowl_cm=_cube_to_bowl(sheet, a),
                               videos=sorted(v for v in a.artifacts.values() if v.endswith(".mp4")),
                               evidence_folder=_evidence_folder(a))
                for a, anatomy in finals if a.label.is_failure]
    by_phase: dict[str, int] = {}
    for f in failures:
        by_phase[f.ended_in] = by_phase.get(f.ended_in, 0) + 1
    rules: dict[str, int] = {}
    for _, anatomy in finals:
        rules[str(anatomy.rules_version)] = rules.get(str(anatomy.rules_version), 0) + 1
    return RunAnatomy(tracking=fit, first_motion=first, failures_by_phase=by_phase, failures=failures, rules=rules)


def _evidence_folder(attempt: Attempt) -> str | None:
    from pathlib import PurePath

    return next((str(PurePath(v).parent) for v in attempt.artifacts.values()), None)


def _rounded(pair: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if pair is None else (round(pair[0], 2), round(pair[1], 2))


def _cube_to_bowl(sheet: Scoresheet, attempt: Attempt) -> float | None:
    """Where a failed trial's cube came to rest: the judge's truth in simulation, the final frame's
    measurement on a real arm (the proposal's, or `harness measure`'s)."""
    if attempt.judge is not None:
        return attempt.judge.true_placement_error_cm
    if attempt.proposal and attempt.proposal.get("placement_error_cm") is not None:
        return float(attempt.proposal["placement_error_cm"])
    for m in reversed(sheet.measurements):
        if (m.trial_index, m.attempt) == (attempt.trial_index, attempt.attempt):
            return float(m.placement_error_cm)
    return None


def control_rate(sheet: Scoresheet) -> float:
    """The rate the run's loop was held to, as its attempts recorded it (30 Hz before any attempt)."""
    return next((a.loop.target_fps for a in sheet.attempts if a.loop.target_fps), 30.0)


def _trial(sheet: Scoresheet, row: TrialRow) -> TrialResult:
    final = sheet.final_attempt(row.index)
    loop = final.loop if final is not None else None
    return TrialResult(
        trial=row.index, dx_cm=row.dx_cm, dy_cm=row.dy_cm, measured_dxy_cm=row.measured_dxy_cm,
        distance_cm=round(row.distance_cm, 4), label=row.label, voids=row.voids,
        placement_error_cm=row.placement_error_cm, placement_uncertainty_cm=row.placement_uncertainty_cm,
        proposed_label=row.proposed_label,
        loop=TrialLoop(
            steps=row.steps, policy_ms_p50=row.policy_ms_p50, policy_ms_p95=row.policy_ms_p95,
            robot_io_ms_p50=row.io_ms_p50, robot_io_ms_p95=row.io_ms_p95, missed_deadlines=row.missed_deadlines,
            obs_to_action_ms_p50=loop.obs_to_action_ms_p50 if loop else None,
            obs_to_action_ms_p95=loop.obs_to_action_ms_p95 if loop else None,
            obs_to_action_ms_max=loop.obs_to_action_ms_max if loop else None,
            obs_to_action_clock=loop.obs_to_action_clock if loop else None,
            queue_underruns=loop.queue_underruns if loop else None,
            chunk_switches=loop.chunk_switches if loop else None,
            rtc_delay_steps_p50=loop.rtc_delay_steps_p50 if loop else None,
            rtc_delay_steps_max=loop.rtc_delay_steps_max if loop else None),
    )


def _median[T: (int, float)](values: list[T]) -> T | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def arm_experience(sheet: Scoresheet) -> ArmExperience | None:
    """Over the scored trials that recorded what their arm saw; None when none did."""
    loops = [a.loop for a in sheet.scored_attempts() if a.loop.obs_to_action_ms_p50 is not None]
    if not loops:
        return None
    switches = [lp.chunk_switches for lp in loops if lp.chunk_switches is not None]
    underruns = [lp.queue_underruns for lp in loops if lp.queue_underruns is not None]
    clocks = {lp.obs_to_action_clock for lp in loops if lp.obs_to_action_clock}
    return ArmExperience(
        trials=len(loops), clock=", ".join(sorted(clocks)) or None,
        obs_to_action_ms_p50=_median([lp.obs_to_action_ms_p50 for lp in loops if lp.obs_to_action_ms_p50 is not None]),
        obs_to_action_ms_max=max((lp.obs_to_action_ms_max for lp in loops if lp.obs_to_action_ms_max is not None),
                                 default=None),
        chunk_switches_per_trial=round(sum(switches) / len(switches), 2) if switches else None,
        underruns=sum(underruns) if underruns else None, steps=sum(lp.steps for lp in loops),
        rtc_delay_steps_p50=_median([lp.rtc_delay_steps_p50 for lp in loops if lp.rtc_delay_steps_p50 is not None]),
        inference_ms_p50=_median([lp.inference_ms_p50 for lp in loops if lp.inference_ms_p50 is not None]),
        rtc_delay_steps_max=max((lp.rtc_delay_steps_max for lp in loops if lp.rtc_delay_steps_max is not None),
                                default=None))


def success_fit(rows: list[TrialRow]) -> LogisticFit | None:
    scored = [r for r in rows if r.label != "pending"]
    return fit_logistic([r.distance_cm for r in scored], [int(r.label == Label.SUCCESS) for r in scored])


def is_one_spot(rows: list[TrialRow]) -> bool:
    distances = [r.planned_distance_cm for r in rows]
    return bool(distances) and max(distances) - min(distances) < ONE_SPOT_CM


def _by_distance(rows: list[TrialRow], training_starts: list[tuple[float, float]] | None) -> SuccessByDistance:
    scored = [r for r in rows if r.label != "pending"]
    far = None
    if training_starts:
        nearest = [min(math.hypot(r.dx_cm - sx, r.dy_cm - sy) for sx, sy in training_starts) for r in scored]
        far = sum(1 for d in nearest if d > FAR_FROM_TRAINING_CM)
    if is_one_spot(rows):
        return SuccessByDistance(one_spot=True, bins=[], fit=None, trials_far_from_training=far)
    bins = []
    for low, high in DISTANCE_BINS:
        inside = [r for r in scored if low <= r.distance_cm < high]
        if inside:
            k = sum(r.label == Label.SUCCESS for r in inside)
            bins.append(DistanceBin(low_cm=low, high_cm=high if math.isfinite(high) else None, k=k, n=len(inside),
                                    wilson95=wilson_interval(k, len(inside))))
    fit = success_fit(rows)
    curve = None if fit is None else LogisticCurve(intercept=fit.intercept, slope=fit.slope,
                                                   distance_at_50_cm=fit.distance_at(0.5))
    return SuccessByDistance(one_spot=False, bins=bins, fit=curve, trials_far_from_training=far)


def _measured_starts(rows: list[TrialRow]) -> MeasuredStarts | None:
    gaps = sorted(math.hypot(m[0] - r.dx_cm, m[1] - r.dy_cm) for r in rows
                  if (m := r.measured_dxy_cm) is not None and r.label != "pending")
    if not gaps:
        return None
    return MeasuredStarts(n=len(gaps), median_gap_cm=statistics.median(gaps), max_gap_cm=gaps[-1])


def _proposals(rows: list[TrialRow]) -> ProposalAgreement | None:
    proposed = [r for r in rows if r.proposed_label is not None and r.label != "pending"]
    if not proposed:
        return None
    table = []
    for label in TAXONOMY:
        mine = [r for r in proposed if r.proposed_label == label]
        if mine:
            instead = {other: n for other in TAXONOMY
                       if other != label and (n := sum(r.label == other for r in mine))}
            table.append(ProposalRow(proposed=label, trials=len(mine), agreed=sum(r.label == label for r in mine),
                                     instead=instead))
    return ProposalAgreement(rows=table, agreed=sum(r.label == r.proposed_label for r in proposed),
                             total=len(proposed))


def _pixel_widths(rows: list[TrialRow]) -> PlacementUncertainty | None:
    widths = sorted(r.placement_uncertainty_cm for r in rows if r.label == Label.SUCCESS
                    and r.placement_error_cm is not None and r.placement_uncertainty_cm is not None)
    if not widths:
        return None
    return PlacementUncertainty(n=len(widths), min_cm=widths[0], median_cm=widths[len(widths) // 2],
                                max_cm=widths[-1])


def latency_of(sheet: Scoresheet) -> Latency:
    """The latency model and inference engine a run was scored under, and whether they were locked."""
    latency = run_latency(sheet.locked, sheet.settings)
    model = ("the arm's own" if not RobotKind(sheet.locked.robot).simulated else "lock-step" if latency is None
             else latency_text(latency))
    inference = sheet.inference
    if inference.engine is InferenceEngine.ASYNC:
        return Latency(model="server round trip", engine=inference.engine.value, locked=True, server=inference.server,
                       actions_per_chunk=inference.actions_per_chunk,
                       chunk_size_threshold=inference.chunk_size_threshold, aggregate_fn=inference.aggregate_fn)
    if inference.engine is InferenceEngine.RTC and inference.execution_horizon is not None:
        return Latency(model=model, engine=inference.engine.value, locked=True,
                       execution_horizon=inference.execution_horizon,
                       max_guidance_weight=inference.max_guidance_weight,
                       attention_schedule=inference.attention_schedule, queue_threshold=inference.queue_threshold)
    return Latency(model=model, engine=inference.engine.value, locked=sheet.locked.inference is not None)


def _outcomes(sheet: Scoresheet) -> dict[int, bool]:
    return {a.trial_index: a.label is Label.SUCCESS for a in sheet.scored_attempts()}


def intervals(sheets: list[Scoresheet]) -> list[IntervalRow]:
    """One row per run; runs of one policy (a latency sweep) are told apart by their scoresheet's name."""
    labels = [policy_label(sheet) for sheet in sheets]
    rows = []
    for sheet, label in zip(sheets, labels, strict=True):
        out = _outcomes(sheet)
        k, n = sum(out.values()), len(out)
        name = f"{label} ({sheet.path.stem})" if labels.count(label) > 1 else label
        rows.append(IntervalRow(policy_label=name, k=k, n=n, wilson95=wilson_interval(k, n)))
    return rows


def compare_two(a: Scoresheet, b: Scoresheet) -> Comparison:
    """Paired by trial index on the same protocol (exact McNemar, Newcombe paired interval); otherwise two
    independent samples (Fisher's exact test, Newcombe interval)."""
    out_a, out_b = _outcomes(a), _outcomes(b)
    names = (policy_label(a), policy_label(b))
    first, second = run_anatomy(a), run_anatomy(b)
    tracking = (None if first is None and second is None else
                (first.tracking if first is not None else None, second.tracking if second is not None else None))
    if a.locked.trials == b.locked.trials:
        common = sorted(set(out_a) & set(out_b))
        both = sum(out_a[i] and out_b[i] for i in common)
        only_a = sum(out_a[i] and not out_b[i] for i in common)
        only_b = sum(out_b[i] and not out_a[i] for i in common)
        neither = len(common) - both - only_a - only_b
        n = len(common)
        return Comparison(
            runs=names, paired=True, both=both, only_first=only_a, only_second=only_b, neither=neither,
            k=(both + only_a, both + only_b), n=(n, n), difference=(only_a - only_b) / max(n, 1),
            interval95=newcombe_paired(both, only_a, only_b, neither), test="exact McNemar",
            p_value=mcnemar_exact(only_a, only_b), minimum_detectable_effect=_mde(out_b, n), tracking=tracking)
    ka, na = sum(out_a.values()), len(out_a)
    kb, nb = sum(out_b.values()), len(out_b)
    # two groups of na and nb trials detect what two equal groups of their harmonic mean would
    n_eff = round(2 / (1 / na + 1 / nb)) if na and nb else 0
    return Comparison(
        runs=names, paired=False, k=(ka, kb), n=(na, nb), difference=ka / max(na, 1) - kb / max(nb, 1),
        interval95=newcombe_unpaired(ka, max(na, 1), kb, max(nb, 1)), test="Fisher exact",
        p_value=fisher_exact(ka, na, kb, nb), minimum_detectable_effect=_mde(out_b, n_eff), tracking=tracking)


def _mde(baseline: dict[int, bool], n_eff: int) -> float | None:
    base = min(max(sum(baseline.values()) / max(len(baseline), 1), 0.05), 0.95)
    mde = minimum_detectable_effect(min(base, 1 - base), n_eff) if n_eff else float("nan")
    return mde if math.isfinite(mde) else None


def _latency_key(sheet: Scoresheet) -> tuple[str, float]:
    """A label and a sort key for a run's latency (lock-step first, measured last)."""
    latency = run_latency(sheet.locked, sheet.settings)
    inference = sheet.inference
    engine = inference.engine.value
    if inference.engine is InferenceEngine.ASYNC:   # the server's own round trip: grouped by server, after the rest
        return f"server round trip ({inference.server}), {engine}", float("inf")
    if not RobotKind(sheet.locked.robot).simulated:   # a real arm's own latency, in wall time
        return f"the arm's own, {engine}", float("inf")
    if latency is None:
        return f"lock-step, {engine}", -1.0
    if latency == "measured":
        return f"measured, {engine}", float("inf")
    if isinstance(latency, ChunkLatency):   # after the fixed ones of its step latency
        return f"{latency.describe()}, {engine}", latency.step_ms + 1e-3
    return f"{float(latency):g} ms, {engine}", float(latency)


def latency_groups(sheets: list[Scoresheet]) -> list[LatencyGroup]:
    """Success per latency model and engine; empty unless the runs were scored under more than one."""
    groups: dict[tuple[str, float], list[Scoresheet]] = {}
    for sheet in sheets:
        groups.setdefault(_latency_key(sheet), []).append(sheet)
    if len(groups) < 2:
        return []
    rows = []
    for (label, key), members in groups.items():
        scored = [a for s in members for a in s.scored_attempts()]
        k, n = sum(a.label is Label.SUCCESS for a in scored), len(scored)
        seen = sorted(a.loop.obs_to_action_ms_p50 for a in scored if a.loop.obs_to_action_ms_p50 is not None)
        rows.append(LatencyGroup(latency=label, sort_key=key if math.isfinite(key) else 1e12, runs=len(members),
                                 k=k, n=n, wilson95=wilson_interval(k, n) if n else None,
                                 seen_obs_to_action_ms_p50=seen[len(seen) // 2] if seen else None))
    # fixed latencies by their value; a server's (or a real arm's) own after them, by the latency the arm saw
    return sorted(rows, key=lambda row: (row.sort_key, row.seen_obs_to_action_ms_p50 or 0.0))


class ReportJson(_Frozen):
    """What `harness report --json` prints: one entry in `runs` per scoresheet, in argument order, and what the
    runs say together (the comparison of two, the intervals of more, success against latency)."""

    report_schema: Literal["harness.report/1"] = Field(default=REPORT_SCHEMA, alias="schema")
    runs: list[RunAnalysis]
    comparison: Comparison | None = Field(None, description="two runs: paired on one protocol, else independent")
    intervals: list[IntervalRow] | None = Field(None, description="more than two runs: intervals only, no test")
    success_by_latency: list[LatencyGroup] = Field(
        default_factory=list, description="runs grouped by latency model and engine (when more than one)")
    warnings: list[str] = Field(
        default_factory=list, description="what the terminal report prints as warnings: a torn scoresheet "
                                          "tail, drift since locking, runs not comparable")
    blind_comparison: BlindComparisonJson | None = Field(
        default=None, description="a blind comparison's scoresheet: its decision, arms (named once revealed) and test")
    twin_fidelity: FidelityReport | None = Field(
        default=None, description="twin sheets among the runs (`harness twin`): each against the real sheet it "
                                  "mirrors, and across twins Pearson r, MMRV and the ranking")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)


def analyze_report(sheets: list[Scoresheet],
                   training_starts: list[list[tuple[float, float]] | None] | None = None,
                   warnings: list[str] | None = None) -> ReportJson:
    """`training_starts`: per sheet, in order (None where a sheet has none)."""
    return ReportJson(
        warnings=list(warnings or []),
        runs=[analyze_run(sheet, training_starts[i] if training_starts else None) for i, sheet in enumerate(sheets)],
        comparison=compare_two(*sheets) if len(sheets) == 2 else None,
        intervals=intervals(sheets) if len(sheets) > 2 else None,
        success_by_latency=latency_groups(sheets) if len(sheets) > 1 else [],
        twin_fidelity=twin_report(sheets),
    )


def twin_report(sheets: list[Scoresheet]) -> FidelityReport | None:
    """The twin sheets' fidelity (`reports.fidelity`), or None when no run is a twin."""
    twins = [sheet for sheet in sheets if sheet.locked.twin_of is not None]
    return fidelity_report(twins) if twins else None
