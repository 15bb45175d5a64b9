"""The sweep report: which checkpoint to ship, from closed-loop success, beside what offline figures say.

Cells on the same protocol share their trials, so each checkpoint is compared with the baseline
paired by trial (exact McNemar, Newcombe's paired interval). The ranking pools every cell of a
checkpoint; validation loss and offline action error rank the same checkpoints when the sweep
measured them, and the report says where the three rankings pick different checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.models.scoresheet import Scoresheet
from harness.models.taxonomy import Label
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.reports.latency import success_by_latency
from harness.stats.estimates import mcnemar_exact, newcombe_paired, wilson_interval

DISTANCE_BINS_CM = (0.0, 1.5, 3.0, 4.5, 6.0, 9.0, 15.0)


@dataclass(frozen=True)
class SweepCell:
    checkpoint: str
    protocol: str
    condition: str
    sheet: Scoresheet

    def outcomes(self) -> dict[int, bool]:
        return {a.trial_index: a.label is Label.SUCCESS for a in self.sheet.scored_attempts()}

    @property
    def voids(self) -> int:
        return sum(1 for a in self.sheet.attempts if a.label is Label.VOID)


@dataclass(frozen=True)
class SkippedCell:
    """A condition that does not apply to a checkpoint (RTC for a policy without it): reported, never run."""

    checkpoint: str
    protocol: str
    condition: str
    why: str


# label -> (validation loss, offline action MAE, why not measured)
OfflineFigures = dict[str, tuple[float | None, float | None, str | None]]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rate(outcomes: dict[int, bool]) -> tuple[int, int, float, float]:
    k, n = sum(outcomes.values()), len(outcomes)
    low, high = wilson_interval(k, n) if n else (0.0, 1.0)
    return k, n, low, high


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def seen_latency(sheet: Scoresheet) -> tuple[str, str, str]:
    """What the cell's arm saw, in three columns: the policy's own time per inference (p50 over trials), the
    observation-to-action latency (p50 and max) with its clock, and underruns and chunk switches."""
    from harness.reports.analysis import arm_experience

    scored = sheet.scored_attempts()
    per_inference = [a.loop.inference_ms_p50 for a in scored if a.loop.inference_ms_p50 is not None]
    policy = (None if sheet.inference_engine == "async"   # the server's inference is not timed here
              else _median(per_inference or [a.loop.policy_latency_ms_p50 for a in scored if a.loop.steps]))
    seen = arm_experience(sheet)
    if seen is None:
        return _ms(policy), "-", "-"
    clock = {"simulated": "sim", "wall": "wall"}.get(seen.clock or "", seen.clock or "?")
    arm = f"{_ms(seen.obs_to_action_ms_p50)} / {_ms(seen.obs_to_action_ms_max)} ({clock})"
    flow = (f"{seen.underruns if seen.underruns is not None else '-'}/{seen.steps}, "
            f"{seen.chunk_switches_per_trial if seen.chunk_switches_per_trial is not None else '-'}")
    if seen.rtc_delay_steps_max is not None:
        flow += f", RTC delay {seen.rtc_delay_steps_p50}/{seen.rtc_delay_steps_max}"
    return _ms(policy), arm, flow


CELL_HEADER = ["checkpoint", "protocol", "condition", Label.SUCCESS.value,
               "95% Wilson", "voids", "ms per inference p50",
               "obs-to-action p50 / max ms", "underruns/steps, chunks per trial"]


def cell_rows(cells: list[SweepCell], skipped: list[SkippedCell] | tuple[SkippedCell, ...] = ()) -> list[list[str]]:
    rows = []
    for cell in cells:
        k, n, low, high = _rate(cell.outcomes())
        planned = cell.sheet.locked.trial_count
        rows.append([cell.checkpoint, cell.protocol, cell.condition, f"{k}/{n}" + ("" if n == planned else
                     f" ({planned - n} pending)"), f"{_pct(low)} to {_pct(high)}" if n else "-", str(cell.voids),
                     *seen_latency(cell.sheet)])
    for gone in skipped:
        rows.append([gone.checkpoint, gone.protocol, gone.condition, "not applicable", "-", "-", "-", "-",
                     gone.why])
    return rows


def paired_rows(cells: list[SweepCell], baseline: str) -> list[list[str]]:
    """Each checkpoint against the baseline in the same protocol and condition, paired by trial."""
    rows = []
    by_group: dict[tuple[str, str], dict[str, SweepCell]] = {}
    for cell in cells:
        by_group.setdefault((cell.protocol, cell.condition), {})[cell.checkpoint] = cell
    for (protocol, condition), group in by_group.items():
        base = group.get(baseline)
        if base is None:
            continue
        out_b = base.outcomes()
        for label, cell in group.items():
            if label == baseline:
                continue
            out_a = cell.outcomes()
            common = sorted(set(out_a) & set(out_b))
            if not common:
                continue
            both = sum(out_a[i] and out_b[i] for i in common)
            only_a = sum(out_a[i] and not out_b[i] for i in common)
            only_b = sum(out_b[i] and not out_a[i] for i in common)
            neither = len(common) - both - only_a - only_b
            low, high = newcombe_paired(both, only_a, only_b, neither)
            rows.append([label, protocol, condition, str(len(common)), _pct((only_a - only_b) / len(common)),
                         f"{_pct(low)} to {_pct(high)}", f"{mcnemar_exact(only_a, only_b):.3g}"])
    return rows


@dataclass(frozen=True)
class Ranked:
    label: str
    k: int
    n: int
    val_loss: float | None
    action_mae: float | None


def rankings(cells: list[SweepCell], figures: OfflineFigures) -> list[Ranked]:
    """Checkpoints by pooled closed-loop success (ties: fewer trials count as less evidence)."""
    pooled: dict[str, list[int]] = {}
    for cell in cells:
        out = cell.outcomes()
        entry = pooled.setdefault(cell.checkpoint, [0, 0])
        entry[0] += sum(out.values())
        entry[1] += len(out)
    ranked = [Ranked(label, k, n, *(figures.get(label, (None, None, None))[:2])) for label, (k, n) in pooled.items()]
    return sorted(ranked, key=lambda r: (-(r.k / r.n if r.n else -1), -r.n, r.label))


def _best(ranked: list[Ranked], key: str) -> str | None:
    values = [(getattr(r, key), r.label) for r in ranked if getattr(r, key) is not None
              and math.isfinite(getattr(r, key))]
    return min(values)[1] if values else None


def _order(ranked: list[Ranked], key: str) -> dict[str, int]:
    values = sorted((getattr(r, key), r.label) for r in ranked if getattr(r, key) is not None
                    and math.isfinite(getattr(r, key)))
    return {label: place for place, (_, label) in enumerate(values, start=1)}


def ranking_rows(ranked: list[Ranked]) -> list[list[str]]:
    by_loss, by_mae = _order(ranked, "val_loss"), _order(ranked, "action_mae")
    rows = []
    for place, r in enumerate(ranked, start=1):
        low, high = wilson_interval(r.k, r.n) if r.n else (0.0, 1.0)
        rows.append([str(place), r.label, f"{r.k}/{r.n} = {_pct(r.k / r.n) if r.n else '-'}",
                     f"{_pct(low)} to {_pct(high)}",
                     f"{r.val_loss:.4g} (#{by_loss[r.label]})" if r.label in by_loss else "-",
                     f"{r.action_mae:.4g} (#{by_mae[r.label]})" if r.label in by_mae else "-"])
    return rows


def verdict(ranked: list[Ranked]) -> str:
    """Which checkpoint each criterion picks, and whether they agree."""
    if not ranked:
        return "No cell has a scored trial yet."
    closed = ranked[0].label
    picks = [f"closed-loop success picks {closed}"]
    loss, mae = _best(ranked, "val_loss"), _best(ranked, "action_mae")
    if loss is not None:
        picks.append(f"validation loss picks {loss}")
    if mae is not None:
        picks.append(f"offline action error picks {mae}")
    text = "; ".join(picks) + "."
    disagree = {p for p in (loss, mae) if p is not None and p != closed}
    if disagree:
        text += (f" They disagree: {', '.join(sorted(disagree))} looks best offline but not on the arm. "
                 "Ship by closed-loop success; offline figures only rank how well demonstrations are imitated.")
    elif loss is not None or mae is not None:
        text += " They agree."
    tied = [r.label for r in ranked[1:] if r.n and ranked[0].n and _overlaps(r, ranked[0])]
    if tied:
        text += (f" The 95% intervals of {', '.join(tied)} overlap the leader's: more trials are needed to tell "
                 "them apart.")
    return text


def _overlaps(a: Ranked, b: Ranked) -> bool:
    la, ha = wilson_interval(a.k, a.n)
    lb, hb = wilson_interval(b.k, b.n)
    return la <= hb and lb <= ha


def success_by_distance(cells: list[SweepCell], protocol: str) -> bytes | None:
    """Success rate per distance bin, one line per checkpoint (and condition); None when every trial of
    the protocol is at one distance (a fixed-position protocol: nothing to draw)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.reports.figures import _png

    mine = [c for c in cells if c.protocol == protocol]
    if not mine:
        return None
    distances = {t.index: math.hypot(t.dx_cm, t.dy_cm) for t in mine[0].sheet.locked.trials}
    if max(distances.values()) - min(distances.values()) < 0.5:
        return None
    edges = np.array(DISTANCE_BINS_CM)
    centres = (edges[:-1] + edges[1:]) / 2
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for cell in mine:
        out = cell.outcomes()
        xs, ys = [], []
        for low, high, centre in zip(edges[:-1], edges[1:], centres, strict=True):
            in_bin = [ok for i, ok in out.items() if low <= distances[i] < high]
            if in_bin:
                xs.append(centre)
                ys.append(sum(in_bin) / len(in_bin))
        name = cell.checkpoint if cell.condition == "default" else f"{cell.checkpoint} ({cell.condition})"
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("cube offset from the trained position (cm, bins of 1.5-6 cm)")
    ax.set_ylabel("success rate in the bin")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def sweep_blocks(cells: list[SweepCell], baseline: str, figures: OfflineFigures,
                 skipped: list[SkippedCell] | tuple[SkippedCell, ...] = ()) -> list[Block]:
    ranked = rankings(cells, figures)
    blocks: list[Block] = [Heading("Which checkpoint to ship"), Para(verdict(ranked)),
                           Table(["#", "checkpoint", "closed-loop success (all cells)", "95% Wilson",
                                  "validation loss (rank)", "offline action MAE (rank)"], ranking_rows(ranked))]
    problems = [f"{label}: {problem}" for label, (_, _, problem) in figures.items() if problem]
    if problems:
        blocks.append(Para("Offline figures not measured: " + "; ".join(problems)))
    blocks += [Heading("Cells"),
               Para("Per checkpoint and condition: success with its 95% Wilson interval, and the latency the arm "
                    "saw: the policy's own time per inference (a chunk; median over trials; not timed here for the "
                    "policy server), the observation-to-action latency "
                    "(median over trials of each trial's median, and the largest; sim: simulated time, wall: wall "
                    "time), steps the arm held with no action ready over all steps, and chunk switches per trial "
                    "(with RTC: the inference delay it was told, p50/max in control steps). A condition that does "
                    "not apply to a checkpoint (RTC for a policy without it) is not applicable, not a failure."),
               Table(CELL_HEADER, cell_rows(cells, skipped))]
    paired = paired_rows(cells, baseline)
    if paired:
        blocks += [Heading(f"Against the baseline, {baseline}"),
                   Para("Same protocol and condition, so outcomes are paired by trial. One interval per checkpoint: "
                        "decide which comparison matters before looking; with many checkpoints, some intervals "
                        "miss by chance."),
                   Table(["checkpoint", "protocol", "condition", "paired trials", f"difference vs {baseline}",
                          "95% Newcombe paired", "exact McNemar p"], paired)]
    for checkpoint, protocol in sorted({(c.checkpoint, c.protocol) for c in cells}):   # conditions varying latency
        blocks += success_by_latency([c.sheet for c in cells if (c.checkpoint, c.protocol) == (checkpoint, protocol)],
                                     f"{checkpoint}, protocol {protocol}")
    for protocol in sorted({c.protocol for c in cells}):
        png = success_by_distance(cells, protocol)
        if png is not None:
            blocks.append(Figure(f"distance_{protocol}", png,
                                 f"Success rate against the cube's distance from the trained position, protocol "
                                 f"{protocol}: one line per checkpoint, each point a distance bin's rate."))
    return blocks


def sweep_table_text(cells: list[SweepCell], baseline: str, figures: OfflineFigures) -> str:
    """The ranking and the verdict as plain text, for the terminal."""
    ranked = rankings(cells, figures)
    success = Label.SUCCESS.value
    lines = [f"{'#':>2}  {'checkpoint':<32} {success:>14}  {'95% Wilson':>17}  {'val loss':>9}  {'act MAE':>8}"]
    for row in ranking_rows(ranked):
        lines.append(f"{row[0]:>2}  {row[1]:<32} {row[2]:>14}  {row[3]:>17}  {row[4].split(' ')[0]:>9}  "
                     f"{row[5].split(' ')[0]:>8}")
    return "\n".join([*lines, "", verdict(ranked)])
