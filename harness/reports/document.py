"""What a report says, for one run or several: the blocks, before any rendering."""

from __future__ import annotations

import math

from harness.models.checkpoint import checkpoint_name
from harness.models.logistic import LogisticFit, fit_logistic
from harness.models.scoresheet import Scoresheet
from harness.models.stats import (
    fisher_exact,
    mcnemar_exact,
    minimum_detectable_effect,
    newcombe_paired,
    newcombe_unpaired,
    wilson_interval,
)
from harness.models.taxonomy import Label
from harness.reports import figures
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.reports.latency import experienced_blocks, latency_text, success_by_latency
from harness.reports.operator import operator_blocks
from harness.reports.summary import summarize
from harness.reports.timing import time_split, timing_paragraphs
from harness.reports.trials import locked_protocol, trial_rows

DISTANCE_BINS = ((0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, math.inf))
ONE_SPOT_CM = 0.5       # trial offsets all within this of each other: a fixed-position protocol


def policy_label(sheet: Scoresheet) -> str:
    """A checkpoint by its training run and step (every LeRobot checkpoint folder is `pretrained_model`);
    a built-in policy by its name."""
    ref = sheet.locked.policy.ref
    return ref if sheet.locked.policy.fingerprint.startswith("builtin:") else checkpoint_name(ref).label


def distance_caption(fit: LogisticFit | None) -> str:
    """Says what the figure draws: the fit and its band only when there is a fit."""
    drawn = (", with the logistic fit and its 95% band (delta method; weak ridge penalty)" if fit is not None
             else "; no curve: the outcomes do not vary, or there are too few trials to fit one")
    return ("Each trial's outcome (1 success, 0 failure, jittered) against the cube's offset from the trained "
            f"position{drawn}.")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def run_blocks(sheet: Scoresheet, key: str = "run", title_prefix: str = "",
               training_starts: list[tuple[float, float]] | None = None) -> list[Block]:
    summary = summarize(sheet)
    rows = trial_rows(sheet)
    protocol = locked_protocol(sheet)
    s = summary.success
    blocks: list[Block] = [Heading(f"{title_prefix}{policy_label(sheet)} on {sheet.locked.robot}")]
    if s.n and s.rate is not None:
        blocks.append(Para(
            f"Success {s.k}/{s.n} = {_pct(s.rate)}, 95% Wilson interval {_pct(s.wilson95[0])} to "
            f"{_pct(s.wilson95[1])}. {summary.trials_scored} of {summary.trials_planned} planned trials "
            f"scored. Task: {summary.task}"))
    else:
        blocks.append(Para("No trial has been scored yet."))
    if summary.stopped_by_rule:
        blocks.append(Para(f"Stopped early by the pre-registered rule: {summary.stopped_by_rule}."))

    blocks.append(Heading("Why it fails", 3))
    n = max(s.n, 1)
    table_rows = [["success", str(s.k), _pct(s.k / n)]]
    table_rows += [[m, str(c), _pct(c / n)] for m, c in summary.failure_modes.items()]
    blocks.append(Table(["outcome", "trials", "share"], table_rows))
    blocks.append(Figure(f"outcomes_{key}", figures.outcome_bars(rows, len(summary.voids)),
                         "Final outcome per trial; voided attempts were retried and are counted separately."))
    if summary.voids:
        blocks.append(Table(["trial", "attempt", "void reason"],
                            [[str(v.trial), str(v.attempt), v.reason or ""] for v in summary.voids]))
    dominant = max(summary.failure_modes.items(), key=lambda kv: kv[1])
    if dominant[1]:
        blocks.append(Para(f"The dominant failure mode is {dominant[0]} ({dominant[1]} of "
                           f"{s.n - s.k} failures)."))

    scored = [r for r in rows if r.label != "pending"]
    blocks.append(Heading("Does it depend on where the cube is?", 3))
    distances = [r.planned_distance_cm for r in rows]
    one_spot = bool(distances) and max(distances) - min(distances) < ONE_SPOT_CM
    fit = None
    if one_spot:
        blocks.append(Para(f"Every trial puts the cube at the same spot ({distances[0]:.1f} cm from the trained "
                           "position), so this run cannot say whether success depends on where the cube is: a "
                           "policy that remembers one motion scores as well here as one that sees. Evaluate on a "
                           "randomized protocol (harness protocol new --randomized) to find out."))
    else:
        fit = fit_logistic([r.distance_cm for r in scored], [int(r.label == Label.SUCCESS) for r in scored])
        bin_rows = []
        for low, high in DISTANCE_BINS:
            inside = [r for r in scored if low <= r.distance_cm < high]
            if inside:
                k = sum(r.label == Label.SUCCESS for r in inside)
                lo, hi = wilson_interval(k, len(inside))
                bin_rows.append([f"{low:.0f}-{high:.0f} cm" if math.isfinite(high) else f">= {low:.0f} cm",
                                 f"{k}/{len(inside)}", f"{_pct(lo)} to {_pct(hi)}"])
        blocks.append(Table(["offset from trained position", "success", "95% Wilson"], bin_rows))
        if fit is not None:
            half = fit.distance_at(0.5)
            where = (f"The fitted success probability falls to 50% at {half:.1f} cm from the trained position."
                     if half is not None else "The fitted success probability does not fall to 50% in this range.")
            blocks.append(Para(f"Logistic fit: logit P(success) = {fit.intercept:.2f} {fit.slope:+.2f} x distance "
                               "(cm). " + where))
        else:
            blocks.append(Para("No logistic fit: the outcomes do not vary (or too few trials)."))
        blocks.append(Figure(f"distance_{key}", figures.success_vs_distance(rows, fit), distance_caption(fit)))
    if not one_spot or training_starts:
        blocks.append(Figure(f"map_{key}", figures.top_view_map(rows, protocol, training_starts),
                             "Top view of the trial positions relative to the trained position (+), coloured by "
                             "outcome" + (", with the bowl" if protocol is not None else "")
                             + (", and the training episodes' start positions (x)." if training_starts else ".")))
    if training_starts:
        nearest = [min(math.hypot(r.dx_cm - sx, r.dy_cm - sy) for sx, sy in training_starts) for r in scored]
        far = sum(1 for d in nearest if d > 2.0)
        blocks.append(Para(f"{far} of {len(scored)} trials put the cube more than 2 cm from every training start: "
                           "those test generalisation, not recall."))

    blocks += operator_blocks(rows, key)

    blocks.append(Heading("Placement error", 3))
    errors = [r.placement_error_cm for r in rows if r.label == Label.SUCCESS and r.placement_error_cm is not None]
    if errors and (e := summary.placement_error_cm) is not None:
        blocks.append(Para(f"Over {e.n} successes: mean {e.mean:.2f} cm, median {e.median:.2f} cm, "
                           f"max {e.max:.2f} cm (cube centre to bowl centre)."))
        widths = sorted(r.placement_uncertainty_cm for r in rows if r.label == Label.SUCCESS
                        and r.placement_error_cm is not None and r.placement_uncertainty_cm is not None)
        if widths:
            blocks.append(Para(f"{len(widths)} of these were measured from the top camera's pixels with a 95% "
                               f"interval of +/- {widths[0]:.2f} to {widths[-1]:.2f} cm (median "
                               f"{widths[len(widths) // 2]:.2f} cm): differences smaller than that are not shown "
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
    blocks.append(Table(["what", "value"], [
        ["scoresheet", str(sheet.path)],
        ["protocol file", f"{sheet.locked.protocol_file} (sha256 {sheet.locked.protocol_sha256[:16]}...)"],
        ["policy", f"{sheet.locked.policy.ref} ({sheet.locked.policy.fingerprint[:30]})"],
        ["latency", latency_text(sheet)],
        ["lock", f"sha256 {sheet.lock['sha256'][:16]}..., locked at {sheet.lock['locked_at']}"],
    ]))
    return blocks


def _outcomes(sheet: Scoresheet) -> dict[int, bool]:
    return {a.trial_index: a.outcome == Label.SUCCESS for a in sheet.scored_attempts()}


def comparison_blocks(sheets: list[Scoresheet]) -> list[Block]:
    blocks: list[Block] = [Heading("Comparison")]
    if len(sheets) > 2:
        rows = []
        for sheet in sheets:
            out = _outcomes(sheet)
            k, n = sum(out.values()), len(out)
            lo, hi = wilson_interval(k, n)
            rows.append([policy_label(sheet), f"{k}/{n}", f"{_pct(lo)} to {_pct(hi)}"])
        blocks.append(Table(["policy", "success", "95% Wilson"], rows))
        blocks.append(Para("With more than two runs the report shows intervals only: pick the pair to test before "
                           "looking, then report that one test (no p-value fishing)."))
        return blocks
    a, b = sheets
    name_a, name_b = policy_label(a), policy_label(b)
    out_a, out_b = _outcomes(a), _outcomes(b)
    same_protocol = a.locked.trials == b.locked.trials
    if same_protocol:
        common = sorted(set(out_a) & set(out_b))
        both = sum(out_a[i] and out_b[i] for i in common)
        only_a = sum(out_a[i] and not out_b[i] for i in common)
        only_b = sum(out_b[i] and not out_a[i] for i in common)
        neither = len(common) - both - only_a - only_b
        low, high = newcombe_paired(both, only_a, only_b, neither)
        p = mcnemar_exact(only_a, only_b)
        diff = (only_a - only_b) / max(len(common), 1)
        blocks.append(Para(f"Same protocol: outcomes are paired by trial index over {len(common)} trials scored "
                           f"in both runs."))
        blocks.append(Table([f"{name_a} \\ {name_b}", "success", "failure"],
                            [["success", str(both), str(only_a)], ["failure", str(only_b), str(neither)]]))
        n_eff = len(common)
        text = (f"Difference {name_a} - {name_b}: {_pct(diff)} (95% Newcombe paired interval {_pct(low)} to "
                f"{_pct(high)}); exact McNemar test on the {only_a + only_b} discordant trials: p = {p:.3g}.")
    else:
        ka, na = sum(out_a.values()), len(out_a)
        kb, nb = sum(out_b.values()), len(out_b)
        low, high = newcombe_unpaired(ka, max(na, 1), kb, max(nb, 1))
        p = fisher_exact(ka, na, kb, nb)
        # two groups of na and nb trials detect what two equal groups of their harmonic mean would
        n_eff = round(2 / (1 / na + 1 / nb)) if na and nb else 0
        text = (f"Different protocols, so the runs are compared as independent samples: {name_a} {ka}/{na} vs "
                f"{name_b} {kb}/{nb}; difference {_pct(ka / max(na, 1) - kb / max(nb, 1))} (95% Newcombe interval "
                f"{_pct(low)} to {_pct(high)}); Fisher's exact test p = {p:.3g}.")
    blocks.append(Para(text))
    base = min(max(sum(out_b.values()) / max(len(out_b), 1), 0.05), 0.95)
    mde = minimum_detectable_effect(min(base, 1 - base), n_eff) if n_eff else float("nan")
    n_a, n_b = (len(common), len(common)) if same_protocol else (len(out_a), len(out_b))
    if math.isfinite(mde):
        runs = (f"At {n_a} trials per run" if n_a == n_b else
                f"With {n_a} and {n_b} trials in the two runs (about as sensitive as {n_eff} per run)")
        blocks.append(Para(f"{runs}, a difference of about {_pct(mde)} in success rate is the "
                           f"smallest detectable with 80% power at alpha 0.05 (two-sided, normal approximation); "
                           f"smaller true differences will often look like no difference."))
    return blocks


def report_blocks(sheets: list[Scoresheet], training_starts: list[tuple[float, float]] | None = None) -> list[Block]:
    blocks: list[Block] = []
    if len(sheets) > 1:
        blocks += comparison_blocks(sheets)
        blocks += success_by_latency(sheets)
    for i, sheet in enumerate(sheets):
        prefix = f"Run {i + 1}: " if len(sheets) > 1 else ""
        blocks += run_blocks(sheet, f"run{i + 1}", prefix, training_starts)
    return blocks


def report_title(sheets: list[Scoresheet]) -> str:
    names = sorted({s.locked.protocol_file for s in sheets})
    return f"Evaluation report: {', '.join(names)}"


