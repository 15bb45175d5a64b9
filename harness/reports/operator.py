"""What a real arm's run adds to its report: where the cube really started, and how often the proposal held.

The cube's planned start is only what the operator was asked for; the top camera measured where it
went. Success against distance already uses the measured start (`TrialRow.distance_cm`); this
section shows the gap itself, and the proposal against the operator's final label, per label, so a
reader can see whether the operator overrode the evidence (or the evidence was wrong).
"""

from __future__ import annotations

from harness.reports.analysis import RunAnalysis
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.reports.trials import OUTCOME_COLOURS, TrialRow


def planned_vs_measured(rows: list[TrialRow]) -> bytes:
    """Each trial's planned start (o) joined to its measured start (dot), in the table plane."""
    from harness.reports.figures import _png, plt

    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    for r in rows:
        if r.measured_dxy_cm is None:
            continue
        mx, my = r.measured_dxy_cm
        colour = OUTCOME_COLOURS.get(r.label, "#9e9e9e")
        ax.plot([-r.dy_cm, -my], [r.dx_cm, mx], color="#757575", linewidth=0.8, zorder=1)
        ax.scatter([-r.dy_cm], [r.dx_cm], facecolors="none", edgecolors=colour, s=40, zorder=2)
        ax.scatter([-my], [mx], color=colour, s=14, zorder=3)
    ax.scatter([0], [0], marker="+", color="black", s=80, label="trained position")
    ax.set_xlabel("-dy (cm, robot's left)")
    ax.set_ylabel("dx (cm, away from the robot)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Planned (o) vs measured (dot) cube starts")
    ax.legend(frameon=False, loc="best")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def operator_blocks(rows: list[TrialRow], key: str, run: RunAnalysis) -> list[Block]:
    """Planned vs measured starts and proposal vs operator; nothing when the run has neither (simulator)."""
    blocks: list[Block] = []
    if (starts := run.measured_starts) is not None:
        measured = [r for r in rows if r.measured_dxy_cm is not None and r.label != "pending"]
        blocks.append(Heading("Where the cube really started", 3))
        blocks.append(Para(f"The top camera measured the start of {starts.n} trials: the cube was "
                           f"{starts.median_gap_cm:.2f} cm from its planned place at the median, "
                           f"{starts.max_gap_cm:.2f} cm at most. Success against distance above uses the measured "
                           "starts."))
        blocks.append(Figure(f"starts_{key}", planned_vs_measured(measured),
                             "Planned (open circle) and measured (dot) start of each trial, coloured by outcome."))
    if (proposals := run.proposals) is not None:
        blocks.append(Heading("Proposed from evidence vs the operator's label", 3))
        table = [[row.proposed, str(row.trials), str(row.agreed),
                  ", ".join(f"{other} {n}" for other, n in row.instead.items()) or "-"] for row in proposals.rows]
        blocks.append(Table(["proposed", "trials", "operator agreed", "operator chose instead"], table))
        blocks.append(Para(f"The operator confirmed {proposals.agreed} of {proposals.total} proposals and overrode "
                           f"{proposals.total - proposals.agreed}."))
    return blocks
