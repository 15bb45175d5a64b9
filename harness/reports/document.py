"""What a report says, for one run or several: the blocks, before any rendering."""

from __future__ import annotations

from harness.models.scoresheet import Scoresheet
from harness.models.taxonomy import Label, Outcome
from harness.reports import figures
from harness.reports.analysis import (
    FAR_FROM_TRAINING_CM,
    RunAnalysis,
    analyze_run,
    compare_two,
    intervals,
    success_fit,
    twin_report,
)
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.reports.fidelity import fidelity_blocks
from harness.reports.latency import experienced_blocks, latency_text, success_by_latency
from harness.reports.operator import operator_blocks
from harness.reports.timing import time_split, timing_paragraphs
from harness.reports.trials import locked_protocol, trial_rows
from harness.stats.logistic import LogisticFit


def distance_caption(fit: LogisticFit | None) -> str:
    """Says what the figure draws: the fit and its band only when there is a fit."""
    drawn = (", with the logistic fit and its 95% band (delta method; weak ridge penalty)" if fit is not None
             else "; no curve: the outcomes do not vary, or there are too few trials to fit one")
    return ("Each trial's outcome (1 success, 0 failure, jittered) against the cube's offset from the trained "
            f"position{drawn}.")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def run_blocks(sheet: Scoresheet, key: str = "run", title_prefix: str = "",
               training_starts: list[tuple[float, float]] | None = None,
               analysis: RunAnalysis | None = None) -> list[Block]:
    """The run's section; every number comes from `analysis` (what `report --json` prints)."""
    run = analysis or analyze_run(sheet, training_starts)
    rows = trial_rows(sheet)
    protocol = locked_protocol(sheet)
    s = run.success
    blocks: list[Block] = [Heading(f"{title_prefix}{run.policy_label} on {run.robot}")]
    if run.arms is not None:   # a blind comparison: each arm's own rate by code, never one rate over the arms
        blocks.append(Para("Success by arm: " + "; ".join(
            f"{arm.code} {arm.success.k}/{arm.success.n}" + (
                f" = {_pct(arm.success.rate)} (95% Wilson {_pct(arm.success.wilson95[0])} to "
                f"{_pct(arm.success.wilson95[1])})" if arm.success.rate is not None else "")
            for arm in run.arms) + f". {run.trials_scored} of {run.trials_planned} planned trials scored "
            "(both arms together below). Task: " + run.task))
        blocks.append(Table(["arm", Label.SUCCESS.value, *run.failure_modes, "voids"],
                            [[arm.code, str(arm.success.k), *(str(c) for c in arm.failure_modes.values()),
                              str(arm.voids)] for arm in run.arms]))
    elif s.n and s.rate is not None:
        blocks.append(Para(
            f"Success {s.k}/{s.n} = {_pct(s.rate)}, 95% Wilson interval {_pct(s.wilson95[0])} to "
            f"{_pct(s.wilson95[1])}. {run.trials_scored} of {run.trials_planned} planned trials "
            f"scored. Task: {run.task}"))
    else:
        blocks.append(Para("No trial has been scored yet."))
    if run.stopped_by_rule:
        blocks.append(Para(f"Stopped early by the pre-registered rule: {run.stopped_by_rule}."))

    blocks.append(Heading("Why it fails", 3))
    n = max(s.n, 1)
    table_rows = [[Label.SUCCESS.value, str(s.k), _pct(s.k / n)]]
    table_rows += [[m, str(c), _pct(c / n)] for m, c in run.failure_modes.items()]
    blocks.append(Table(["outcome", "trials", "share"], table_rows))
    blocks.append(Figure(f"outcomes_{key}", figures.outcome_bars(rows, len(run.voids)),
                         "Final outcome per trial; voided attempts were retried and are counted separately."))
    if run.voids:
        blocks.append(Table(["trial", "attempt", "void reason"],
                            [[str(v.trial), str(v.attempt), v.reason or ""] for v in run.voids]))
    dominant = max(run.failure_modes.items(), key=lambda kv: kv[1])
    if dominant[1]:
        blocks.append(Para(f"The dominant failure mode is {dominant[0]} ({dominant[1]} of "
                           f"{s.n - s.k} failures)."))

    blocks.append(Heading("Does it depend on where the cube is?", 3))
    by_distance = run.by_distance
    if by_distance is not None and by_distance.one_spot:
        blocks.append(Para(f"Every trial puts the cube at the same spot ({rows[0].planned_distance_cm:.1f} cm from "
                           "the trained position), so this run cannot say whether success depends on where the cube "
                           "is: a policy that remembers one motion scores as well here as one that sees. Evaluate on "
                           "a randomized protocol (harness protocol new --randomized) to find out."))
    elif by_distance is not None:
        blocks.append(Table(["offset from trained position", Label.SUCCESS.value, "95% Wilson"], [
            [f"{b.low_cm:.0f}-{b.high_cm:.0f} cm" if b.high_cm is not None else f">= {b.low_cm:.0f} cm",
             f"{b.k}/{b.n}", f"{_pct(b.wilson95[0])} to {_pct(b.wilson95[1])}"] for b in by_distance.bins]))
        curve = by_distance.fit
        if curve is not None:
            half = curve.distance_at_50_cm
            where = (f"The fitted success probability falls to 50% at {half:.1f} cm from the trained position."
                     if half is not None else "The fitted success probability does not fall to 50% in this range.")
            blocks.append(Para(f"Logistic fit: logit P(success) = {curve.intercept:.2f} {curve.slope:+.2f} x "
                               "distance (cm). " + where))
        else:
            blocks.append(Para("No logistic fit: the outcomes do not vary (or too few trials)."))
        fit = success_fit(rows)
        blocks.append(Figure(f"distance_{key}", figures.success_vs_distance(rows, fit), distance_caption(fit)))
    if not (by_distance is not None and by_distance.one_spot) or training_starts:
        blocks.append(Figure(f"map_{key}", figures.top_view_map(rows, protocol, training_starts),
                             "Top view of the trial positions relative to the trained position (+), coloured by "
                             "outcome" + (", with the bowl" if protocol is not None else "")
                             + (", and the training episodes' start positions (x)." if training_starts else ".")))
    if by_distance is not None and by_distance.trials_far_from_training is not None:
        blocks.append(Para(f"{by_distance.trials_far_from_training} of {s.n} trials put the cube more than "
                           f"{FAR_FROM_TRAINING_CM:g} cm from every training start: those test generalisation, "
                           "not recall."))

    blocks += anatomy_blocks(sheet, run, key)
    blocks += operator_blocks(rows, key, run)

    blocks.append(Heading("Placement error", 3))
    errors = [r.placement_error_cm for r in rows if r.label == Label.SUCCESS and r.placement_error_cm is not None]
    if errors and (e := run.placement_error_cm) is not None:
        blocks.append(Para(f"Over {e.n} successes: mean {e.mean:.2f} cm, median {e.median:.2f} cm, "
                           f"max {e.max:.2f} cm (cube centre to bowl centre)."))
        if (w := run.placement_uncertainty_cm) is not None:
            blocks.append(Para(f"{w.n} of these were measured from the top camera's pixels with a 95% "
                               f"interval of +/- {w.min_cm:.2f} to {w.max_cm:.2f} cm (median "
                               f"{w.median_cm:.2f} cm): differences smaller than that are not shown "
                               "by these measurements."))
        blocks.append(Figure(f"placement_{key}", figures.placement_histogram(errors),
                             "Placement error over successful trials."))
    else:
        blocks.append(Para("No placement error was measured for a successful trial."))

    blocks.append(Heading("Loop timing", 3))
    fps = protocol.fps if protocol else 30
    split = time_split(rows, fps, sheet.locked.robot)
    if split is not None:
        blocks += [Para(text) for text in timing_paragraphs(split)]
        blocks.append(Figure(f"timing_{key}", figures.loop_timing(rows, fps),
                             f"Left: each trial's typical step (p50), policy and robot I/O stacked, against the "
                             f"{1000 / fps:.1f} ms budget (dashed). Right: steps per trial that missed it."))

    blocks += experienced_blocks(sheet)

    blocks.append(Heading("Fingerprints", 3))
    f = run.fingerprints
    assert f is not None
    blocks.append(Table(["what", "value"], [
        ["scoresheet", run.scoresheet],
        ["protocol file", f"{f.protocol_file} (sha256 {f.protocol_sha256[:16]}...)"],
        ["policy", f"{f.policy_ref} ({f.policy_fingerprint[:30]})"],
        ["latency", latency_text(sheet)],
        ["lock", f"sha256 {f.lock_sha256[:16]}..., locked at {f.locked_at}"],
    ]))
    return blocks


def anatomy_blocks(sheet: Scoresheet, run: RunAnalysis, key: str) -> list[Block]:
    """Why it fails, from the joint traces: does the gripper follow the cube, when did the arm first move,
    and in which phase did each failure end."""
    anatomy = run.anatomy
    if anatomy is None:
        return []
    blocks: list[Block] = [Heading("Where the gripper went", 3)]
    fit = anatomy.tracking
    if fit is not None:
        verdict = ("follows the cube" if fit.slope95[0] > 0.5 else
                   "goes to the trained position whatever the cube's offset" if fit.slope95[1] < 0.5 else
                   "neither clearly follows the cube nor clearly ignores it")
        blocks.append(Para(
            f"Tracking slope {fit.slope:.2f} (95% interval {fit.slope95[0]:.2f} to {fit.slope95[1]:.2f}) over "
            f"{fit.n} trials where the gripper closed: the grasp point's offset from the trained position, "
            f"regressed on the cube's offset (1 = follows the cube, 0 = the same place every time). The policy "
            f"{verdict}. Grasp points scatter {fit.residual_sd_cm:.1f} cm around that line; the cubes were spread "
            f"{fit.cube_spread_cm:.1f} cm."))
    else:
        blocks.append(Para("No tracking slope: fewer than three trials where the gripper closed, or every cube at "
                           "one spot."))
    points = [(a.label, a.anatomy.cube_start_cm, a.anatomy.grasp_point_cm)
              for i in sheet.trial_indices if (a := sheet.final_attempt(i)) is not None and a.anatomy is not None
              and a.anatomy.grasp_point_cm is not None]
    if points:
        blocks.append(Figure(f"grasps_{key}", figures.grasp_arrows(points),
                             "Each trial's cube start (circle) to where its gripper closed (arrow head), from "
                             "forward kinematics of the joints the arm reported; coloured by outcome."))
    if (first := anatomy.first_motion) is not None:
        stalls = (f"; {len(first.stalled_trials)} stalled past the protocol's {first.stall_limit_s:g} s: trials "
                  + ", ".join(str(t) for t in first.stalled_trials) if first.stalled_trials else
                  f"; none stalled past the protocol's {first.stall_limit_s:g} s")
        blocks.append(Para(f"Time to first motion over {first.n} trials: median {first.median_s:.2f} s, p95 "
                           f"{first.p95_s:.2f} s, max {first.max_s:.2f} s{stalls}."))
    if anatomy.failures:
        blocks.append(Heading("Where each failure ended", 3))
        blocks.append(Table(["phase it ended in", "failures"],
                            [[phase, str(n)] for phase, n in sorted(anatomy.failures_by_phase.items(),
                                                                    key=lambda kv: -kv[1])]))
        blocks.append(Table(["trial", "label", "phase", "what the trace says", "cube to bowl (cm)", "video"], [
            [str(f.trial), f.label, f.ended_in, f.summary,
             f"{f.cube_to_bowl_cm:.1f}" if f.cube_to_bowl_cm is not None else "-",
             " ".join(f.videos) or (f"none yet: harness replay {f.evidence_folder} (or --failures on its runs "
                                    "folder)" if f.evidence_folder else "-")] for f in anatomy.failures]))
    return blocks


def comparison_blocks(sheets: list[Scoresheet]) -> list[Block]:
    blocks: list[Block] = [Heading("Comparison")]
    if len(sheets) > 2:
        blocks.append(Table(["policy", Label.SUCCESS.value, "95% Wilson"], [
            [r.policy_label, f"{r.k}/{r.n}", f"{_pct(r.wilson95[0])} to {_pct(r.wilson95[1])}"]
            for r in intervals(sheets)]))
        blocks.append(Para("With more than two runs the report shows intervals only: pick the pair to test before "
                           "looking, then report that one test (no p-value fishing)."))
        return blocks
    c = compare_two(*sheets)
    name_a, name_b = c.runs
    low, high = c.interval95
    if c.paired:
        blocks.append(Para(f"Same protocol: outcomes are paired by trial index over {c.n[0]} trials scored "
                           f"in both runs."))
        success, failure = Outcome.SUCCESS.value, Outcome.FAILURE.value
        blocks.append(Table([f"{name_a} \\ {name_b}", success, failure],
                            [[success, str(c.both), str(c.only_first)],
                             [failure, str(c.only_second), str(c.neither)]]))
        text = (f"Difference {name_a} - {name_b}: {_pct(c.difference)} (95% Newcombe paired interval {_pct(low)} to "
                f"{_pct(high)}); exact McNemar test on the {(c.only_first or 0) + (c.only_second or 0)} discordant "
                f"trials: p = {c.p_value:.3g}.")
    else:
        (ka, kb), (na, nb) = c.k, c.n
        text = (f"Different protocols, so the runs are compared as independent samples: {name_a} {ka}/{na} vs "
                f"{name_b} {kb}/{nb}; difference {_pct(c.difference)} (95% Newcombe interval "
                f"{_pct(low)} to {_pct(high)}); Fisher's exact test p = {c.p_value:.3g}.")
    blocks.append(Para(text))
    if c.tracking is not None and all(fit is not None for fit in c.tracking):
        blocks.append(Para("Tracking slopes (1 follows the cube, 0 the same place every time): " + "; ".join(
            f"{name} {fit.slope:.2f} ({fit.slope95[0]:.2f} to {fit.slope95[1]:.2f})"
            for name, fit in zip(c.runs, c.tracking, strict=True) if fit is not None) + "."))
    if c.minimum_detectable_effect is not None:
        n_a, n_b = c.n
        n_eff = round(2 / (1 / n_a + 1 / n_b)) if n_a and n_b else 0
        runs = (f"At {n_a} trials per run" if n_a == n_b else
                f"With {n_a} and {n_b} trials in the two runs (about as sensitive as {n_eff} per run)")
        blocks.append(Para(f"{runs}, a difference of about {_pct(c.minimum_detectable_effect)} in success rate is the "
                           f"smallest detectable with 80% power at alpha 0.05 (two-sided, normal approximation); "
                           f"smaller true differences will often look like no difference."))
    return blocks


def report_blocks(sheets: list[Scoresheet],
                  training_starts: list[list[tuple[float, float]] | None] | None = None) -> list[Block]:
    """`training_starts`: per sheet, in order (None where a sheet has none)."""
    blocks: list[Block] = []
    if len(sheets) > 1:
        blocks += comparison_blocks(sheets)
        blocks += success_by_latency(sheets)
    twins = twin_report(sheets)
    if twins is not None:
        blocks += fidelity_blocks(twins)
    for i, sheet in enumerate(sheets):
        prefix = f"Run {i + 1}: " if len(sheets) > 1 else ""
        blocks += run_blocks(sheet, f"run{i + 1}", prefix, training_starts[i] if training_starts else None)
    return blocks


def report_title(sheets: list[Scoresheet]) -> str:
    names = sorted({s.locked.protocol_file for s in sheets})
    return f"Evaluation report: {', '.join(names)}"


