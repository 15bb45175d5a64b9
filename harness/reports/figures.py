"""The report's plots, each a PNG in memory. Matplotlib's Agg backend: no display needed."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle

from harness.models.protocol import Protocol
from harness.models.taxonomy import TAXONOMY, Label
from harness.reports.trials import OUTCOME_COLOURS, TrialRow
from harness.stats.logistic import LogisticFit

LABELS = list(TAXONOMY)


def _png(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def outcome_bars(rows: list[TrialRow], voids: int) -> bytes:
    counts = [sum(1 for r in rows if r.label == label) for label in LABELS] + [voids]
    names = [*LABELS, "void (retried)"]
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    bars = ax.barh(names[::-1], counts[::-1], color=[*[OUTCOME_COLOURS[n] for n in LABELS], Label.VOID.hex][::-1])
    ax.bar_label(bars, padding=3)
    ax.set_xlabel("trials")
    ax.set_title("Outcomes")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def placement_histogram(errors: list[float]) -> bytes:
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    ax.hist(errors, bins=min(20, max(5, len(errors) // 3)), color=OUTCOME_COLOURS[Label.SUCCESS], edgecolor="white")
    ax.axvline(float(np.mean(errors)), color="black", linestyle="--", label=f"mean {np.mean(errors):.2f} cm")
    ax.set_xlabel("placement error, cube centre to bowl centre (cm)")
    ax.set_ylabel("successes")
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def success_vs_distance(rows: list[TrialRow], fit: LogisticFit | None) -> bytes:
    scored = [r for r in rows if r.label != "pending"]
    x = np.array([r.distance_cm for r in scored])
    y = np.array([r.label == Label.SUCCESS for r in scored], dtype=float)
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.scatter(x, y + rng.uniform(-0.04, 0.04, len(y)), c=[OUTCOME_COLOURS[r.label] for r in scored], s=22,
               alpha=0.8, zorder=3)
    if fit is not None:
        grid = np.linspace(0, max(float(x.max()), 1.0) * 1.05, 200)
        prob, low, high = fit.predict(grid)
        ax.plot(grid, prob, color="black", label="logistic fit")
        ax.fill_between(grid, low, high, color="black", alpha=0.12, label="95% band")
        ax.legend(frameon=False, loc="center right")
    ax.set_xlabel("cube offset from the trained position (cm)")
    ax.set_ylabel("outcome: success 1, failure 0" + ("\nand fitted P(success)" if fit is not None else ""))
    ax.set_ylim(-0.1, 1.1)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def top_view_map(rows: list[TrialRow], protocol: Protocol | None,
                 training_starts_cm: list[tuple[float, float]] | None = None) -> bytes:
    """Offsets in the table plane, drawn as the top camera sees them (robot's +x up, +y left)."""
    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    for label in [*LABELS, "pending"]:
        pts = [(r.dx_cm, r.dy_cm) for r in rows if r.label == label]
        if pts:
            dx, dy = zip(*pts, strict=True)
            ax.scatter([-v for v in dy], dx, s=46, color=OUTCOME_COLOURS[label], label=label, edgecolor="white",
                       zorder=3)
    if training_starts_cm:
        tx, ty = zip(*training_starts_cm, strict=True)
        ax.scatter([-v for v in ty], tx, marker="x", color="black", s=25, label="training starts", zorder=4)
    ax.scatter([0], [0], marker="+", s=220, color="black", label="trained position", zorder=5)
    if protocol is not None:
        s = protocol.scene
        bx, by = s.bowl_xy_cm[0] - s.trained_cube_xy_cm[0], s.bowl_xy_cm[1] - s.trained_cube_xy_cm[1]
        ax.add_patch(Circle((-by, bx), s.bowl_diameter_cm / 2, fill=False, color="#1565c0", lw=2))
        ax.annotate("bowl", (-by, bx), ha="center", va="center", color="#1565c0")
    ax.set_aspect("equal")
    ax.set_xlabel("<- robot's left   offset (cm)   robot's right ->")
    ax.set_ylabel("offset away from the robot (cm)")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def loop_timing(rows: list[TrialRow], fps: float) -> bytes:
    """Per trial: the typical step's time in the policy and in robot I/O, stacked against the budget,
    so the bar shows which of the two took the time; and the steps that missed the budget."""
    scored = [r for r in rows if r.policy_ms_p50 is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 2.8), gridspec_kw={"wspace": 0.35})
    idx = [r.index for r in scored]
    policy = [r.policy_ms_p50 or 0.0 for r in scored]
    io = [r.io_ms_p50 or 0.0 for r in scored]
    ax1.bar(idx, policy, color="#5c6bc0", label="policy p50")
    ax1.bar(idx, io, bottom=policy, color="#8d6e63", label="robot I/O p50")
    ax1.axhline(1000 / fps, color="red", linestyle="--", label=f"{1000 / fps:.1f} ms budget")
    ax1.set_xlabel("trial")
    ax1.set_ylabel("ms per step")
    ax1.set_ylim(0, max(1000 / fps, *(a + b for a, b in zip(policy, io, strict=True))) * 1.3)
    ax1.legend(frameon=False, fontsize=7, loc="upper left", ncols=3)
    missed = [r.missed_deadlines or 0 for r in scored]
    ax2.bar(idx, missed, color="#ef6c00")
    ax2.set_ylim(0, max(1, *missed) * 1.1)
    ax2.set_xlabel("trial")
    ax2.set_ylabel("missed deadlines")
    for ax in (ax1, ax2):
        ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def grasp_arrows(points: list[tuple[Label, tuple[float, float], tuple[float, float]]]) -> bytes:
    """Top view: an arrow from each trial's cube start to where its gripper closed, coloured by outcome.
    Arrows that all point at the trained position (+) are a memorised motion; short arrows follow the cube."""
    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    for label, cube, grasp in points:
        colour = OUTCOME_COLOURS.get(label, "#9e9e9e")
        ax.annotate("", xy=(-grasp[1], grasp[0]), xytext=(-cube[1], cube[0]),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2})
        ax.scatter([-cube[1]], [cube[0]], s=28, facecolors="none", edgecolors=colour, zorder=3)
    ax.scatter([0], [0], marker="+", color="black", s=90, label="trained position", zorder=4)
    for name in LABELS:
        if any(p[0] == name for p in points):
            ax.scatter([], [], color=OUTCOME_COLOURS[name], label=name)
    ax.set_xlabel("-dy (cm, robot's left)")
    ax.set_ylabel("dx (cm, away from the robot)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Cube start (o) to where the gripper closed")
    ax.legend(frameon=False, loc="best", fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
