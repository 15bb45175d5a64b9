"""Does the twin predict the arm? A twin sheet (`harness twin`) against the real sheet it mirrors.

Per twin: every scored real attempt paired with the twin's attempt at the same trial (the twin ran it from the
real attempt's measured start), the confusion of labels, agreement with its Wilson interval, Cohen's kappa,
the failure modes the twin misses or invents with the real and simulated final frames side by side, and the
tracking slope (failure anatomy) of each. Across several twins (checkpoints or policies): Pearson's r and
SimplerEnv's MMRV of twin success against real success, and whether the twin ranks them the same way. The
numbers are `models.fidelity`'s; the HTML and Markdown render these models, `report --json` prints them.
"""

from __future__ import annotations

import io
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessInputError
from harness.models.anatomy import TrackingFit, tracking_fit
from harness.models.checkpoint import checkpoint_name
from harness.models.fidelity import SCORED_LABELS, PairedAttempt, fidelity, mmrv, pearson_r, same_ranking
from harness.models.scoresheet import Scoresheet, load_scoresheet
from harness.models.taxonomy import Label
from harness.reports.blocks import Block, Figure, Heading, Para, Table
from harness.stats.ppi import TWIN_EXTRA_BASE, twin_assisted

MAX_FRAME_PAIRS = 6   # disagreements drawn side by side per twin; the table lists them all


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rate(_Frozen):
    k: int
    n: int
    rate: float | None
    wilson95: tuple[float, float]


class PairRow(_Frozen):
    trial: int
    real: Label
    twin: Label
    start_dxy_cm: tuple[float, float] = Field(description="the cube start the twin ran (the real measured one "
                                                          "where there was one)")
    start_measured: bool = Field(description="the real attempt's start was measured by the top camera")
    real_final_top: str | None = None
    twin_final_top: str | None = None


class ModeRow(_Frozen):
    label: Label
    real: int
    twin: int
    missed: int = Field(description="real attempts with this mode the twin labelled otherwise")
    invented: int = Field(description="twin attempts with this mode whose real attempt was otherwise")


class TwinAssistedJson(_Frozen):
    """The real success rate estimated with the twin's help (`harness.stats.ppi`), beside the real trials'."""

    estimate: float = Field(description="the twin's own success rate plus the paired real-minus-twin difference")
    low95: float
    high95: float
    real_only_low95: float = Field(description="the real trials alone: 95% Wilson interval")
    real_only_high95: float
    real_trials: int
    twin_trials: int = Field(description="the twin's own trials at the protocol's starts (not paired)")
    twin_successes: int
    outcome_agreement: float = Field(description="share of paired attempts where real and twin agree on success")


class TwinFidelity(_Frozen):
    real_sheet: str
    twin_sheet: str
    policy_label: str
    rehearsal_gap: dict[str, float] | None = Field(description="the real sheet is a rehearsal on the emulated arm "
                                                               "with this declared gap ({} = none); null: a real arm")
    paired: int = Field(description="real scored attempts the twin has run")
    pending: int = Field(description="real scored attempts the twin has not run yet")
    real_success: Rate
    twin_success: Rate
    label_agreement: Rate = Field(description="same label: success, or the same failure mode")
    outcome_agreement: Rate = Field(description="same outcome: success or failure")
    kappa: float | None = Field(description="Cohen's kappa over labels; null when both used one label throughout")
    outcome_kappa: float | None
    confusion: dict[str, dict[str, int]] = Field(description="real label -> twin label -> attempts")
    modes: list[ModeRow]
    tracking_real: TrackingFit | None
    tracking_twin: TrackingFit | None
    pairs: list[PairRow]
    twin_assisted: TwinAssistedJson | None = Field(None, description="the twin-assisted (prediction-powered) "
                                                                     "estimate of the real success rate; null "
                                                                     "without the twin's own trials (twin --extra)")


class SheetRates(_Frozen):
    policy_label: str
    real: float
    twin: float


class AcrossSheets(_Frozen):
    """Two or more twins: does the twin rank the policies as the arm does?"""

    sheets: list[SheetRates]
    pearson_r: float | None = Field(description="null when either side's rates have no spread")
    mmrv: float | None = Field(description="SimplerEnv's Mean Maximum Rank Violation (0: perfect ranking)")
    same_ranking: bool


class FidelityReport(_Frozen):
    twins: list[TwinFidelity]
    across: AcrossSheets | None = None


def real_of(twin: Scoresheet) -> Scoresheet:
    """The real sheet a twin mirrors, checked to be the one it was locked against."""
    mirrored = twin.locked.twin_of
    if mirrored is None:
        raise HarnessInputError(twin.path, "locked.twin_of", "not a twin scoresheet")
    path = Path(mirrored.real_sheet)
    if not path.is_file():
        raise HarnessInputError(twin.path, "locked.twin_of.real_sheet", f"{path} is gone")
    real = load_scoresheet(path)
    if real.lock["sha256"] != mirrored.real_lock_sha256:
        raise HarnessInputError(twin.path, "locked.twin_of.real_lock_sha256", f"{path} is another run than the "
                                                                              "one this twin mirrors")
    return real


def tracking(sheet: Scoresheet) -> TrackingFit | None:
    """The run's tracking slope, as its failure anatomy reports it (`reports.analysis.run_anatomy`)."""
    finals = [a for i in sheet.trial_indices if (a := sheet.final_attempt(i)) is not None and a.anatomy is not None]
    anatomies = [a.anatomy for a in finals if a.anatomy is not None]
    points = [(g.cube_start_cm, g.grasp_point_cm) for g in anatomies if g.grasp_point_cm is not None]
    return tracking_fit([start for start, _ in points], [grasp for _, grasp in points])


def _rate(k: int, n: int) -> Rate:
    from harness.stats.estimates import wilson_interval

    return Rate(k=k, n=n, rate=k / n if n else None, wilson95=wilson_interval(k, n))


def twin_fidelity(real: Scoresheet, twin: Scoresheet) -> TwinFidelity:

    starts = {t.index: t for t in twin.locked.trials}
    rows, pairs = [], []
    real_scored = real.scored_attempts()
    for attempt in real_scored:
        mirrored = twin.final_attempt(attempt.trial_index)
        if mirrored is None or attempt.trial_index not in starts:
            continue
        start = starts[attempt.trial_index]
        pairs.append(PairedAttempt(attempt.trial_index, attempt.label, mirrored.label))
        measured = (attempt.measured_start or {}).get("dx_cm") is not None
        rows.append(PairRow(trial=attempt.trial_index, real=attempt.label, twin=mirrored.label,
                            start_dxy_cm=(start.dx_cm, start.dy_cm), start_measured=measured,
                            real_final_top=attempt.artifacts.get("final_top.png"),
                            twin_final_top=mirrored.artifacts.get("final_top.png")))
    result = fidelity(pairs)
    rehearsal = real.locked.rehearsal
    own = [a for a in twin.scored_attempts() if a.trial_index >= TWIN_EXTRA_BASE]
    assisted = None
    if own and pairs:
        found = twin_assisted([p.real is Label.SUCCESS for p in pairs], [p.twin is Label.SUCCESS for p in pairs],
                              sum(1 for a in own if a.label is Label.SUCCESS), len(own))
        assisted = TwinAssistedJson(estimate=found.estimate, low95=found.low, high95=found.high,
                                    real_only_low95=found.real_low, real_only_high95=found.real_high,
                                    real_trials=found.real_trials, twin_trials=found.twin_trials,
                                    twin_successes=found.twin_successes,
                                    outcome_agreement=found.agreement / found.real_trials)
    return TwinFidelity(
        real_sheet=str(real.path), twin_sheet=str(twin.path),
        policy_label=checkpoint_name(real.locked.policy.ref).label,
        rehearsal_gap=rehearsal.gap.declared() if rehearsal is not None else None,
        paired=len(pairs), pending=len(real_scored) - len(pairs),
        real_success=_rate(sum(1 for p in pairs if p.real is Label.SUCCESS), len(pairs)),
        twin_success=_rate(sum(1 for p in pairs if p.twin is Label.SUCCESS), len(pairs)),
        label_agreement=_rate(result.labels.agreed, result.labels.n),
        outcome_agreement=_rate(result.outcomes.agreed, result.outcomes.n),
        kappa=result.kappa, outcome_kappa=result.outcome_kappa,
        confusion={r.value: {t.value: c for t, c in row.items()} for r, row in result.confusion.items()},
        modes=[ModeRow(label=m.label, real=m.real, twin=m.twin, missed=m.missed, invented=m.invented)
               for m in result.modes],
        tracking_real=tracking(real), tracking_twin=tracking(twin),
        pairs=rows, twin_assisted=assisted,
    )


def fidelity_report(twins: list[Scoresheet]) -> FidelityReport:
    rows = [twin_fidelity(real_of(twin), twin) for twin in twins]
    across = None
    if len(rows) > 1:
        usable = [r for r in rows if r.paired]
        real = [r.real_success.rate or 0.0 for r in usable]
        sim = [r.twin_success.rate or 0.0 for r in usable]
        across = AcrossSheets(
            sheets=[SheetRates(policy_label=r.policy_label, real=a, twin=b) for r, a, b in zip(usable, real, sim,
                                                                                              strict=True)],
            pearson_r=pearson_r(real, sim), mmrv=mmrv(real, sim), same_ranking=same_ranking(real, sim))
    return FidelityReport(twins=rows, across=across)


# --- rendering --------------------------------------------------------------------------------------------------

def _pct(rate: Rate) -> str:
    if not rate.n:
        return "none paired"
    low, high = rate.wilson95
    return f"{rate.k}/{rate.n} ({100 * (rate.rate or 0):.0f} %, 95 % {100 * low:.0f}-{100 * high:.0f} %)"


def _num(value: float | None, digits: int = 2) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def _slope(fit: TrackingFit | None) -> str:
    if fit is None:
        return "not enough grasps (3 at spread-out starts needed)"
    return f"{fit.slope:.2f} (95 % {fit.slope95[0]:.2f}-{fit.slope95[1]:.2f}, {fit.n} grasps)"


def _side_by_side(row: PairRow) -> bytes | None:
    """The real and the twin's final top frames, side by side, labelled."""
    from PIL import Image, ImageDraw

    frames = []
    for path in (row.real_final_top, row.twin_final_top):
        if path is None or not Path(path).is_file():
            return None
        frames.append(Image.open(path).convert("RGB"))
    height = min(f.height for f in frames)
    frames = [f.resize((round(f.width * height / f.height), height)) for f in frames]
    canvas = Image.new("RGB", (sum(f.width for f in frames) + 8, height), "white")
    x = 0
    for frame, name, label in zip(frames, ("real", "twin"), (row.real, row.twin), strict=True):
        canvas.paste(frame, (x, 0))
        draw = ImageDraw.Draw(canvas)
        draw.rectangle((x, 0, x + 8 + 7 * (len(name) + len(label.display) + 2), 16), fill="black")
        draw.text((x + 4, 2), f"{name}: {label.display}", fill="white")
        x += frame.width + 8
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


def twin_blocks(result: TwinFidelity, anchor: str) -> list[Block]:
    what = ("a rehearsal on the emulated arm, " + (", ".join(f"{k}={v:g}" for k, v in result.rehearsal_gap.items())
                                                   or "no declared gap")
            if result.rehearsal_gap is not None else "a real arm")
    blocks: list[Block] = [
        Heading(f"Twin fidelity: {result.policy_label}", 2),
        Para(f"Real sheet {result.real_sheet} ({what}); twin {result.twin_sheet}. {result.paired} scored real "
             f"attempts paired with the twin's run from the same start" +
             (f"; {result.pending} not run by the twin yet." if result.pending else ".")),
        Table(["", "real", "twin"], [[Label.SUCCESS.display, _pct(result.real_success), _pct(result.twin_success)],
                                     ["tracking slope", _slope(result.tracking_real), _slope(result.tracking_twin)]]),
        Para(f"Same label on {_pct(result.label_agreement)} of attempts (Cohen's kappa {_num(result.kappa)}); same "
             f"outcome on {_pct(result.outcome_agreement)} (kappa {_num(result.outcome_kappa)}). Kappa is agreement "
             "beyond chance: undefined when both sides used one label throughout."),
        *_assisted_blocks(result),
        Heading("Real label (rows) against twin label (columns)", 3),
        Table(["real \\ twin", *(label.display for label in SCORED_LABELS)],
              [[real.display, *(str(result.confusion[real.value][twin.value]) for twin in SCORED_LABELS)]
               for real in SCORED_LABELS]),
        Heading("Failure modes the twin misses or invents", 3),
        Table(["failure mode", "real", "twin", "missed by the twin", "invented by the twin"],
              [[m.label.display, str(m.real), str(m.twin), str(m.missed), str(m.invented)] for m in result.modes]),
    ]
    wrong = [row for row in result.pairs if row.real is not row.twin]
    if wrong:
        blocks.append(Table(["trial", "real", "twin", "start (dx, dy cm)", "start measured"],
                            [[str(r.trial), r.real.display, r.twin.display, f"{r.start_dxy_cm[0]:+.1f}, "
                              f"{r.start_dxy_cm[1]:+.1f}", "yes" if r.start_measured else "no (planned)"]
                             for r in wrong]))
        for row in wrong[:MAX_FRAME_PAIRS]:
            png = _side_by_side(row)
            if png is not None:
                blocks.append(Figure(f"{anchor}-trial{row.trial}", png,
                                     f"Trial {row.trial}: the real arm's final top frame (left, {row.real.display}) "
                                     f"and the twin's (right, {row.twin.display})"))
    else:
        blocks.append(Para("The twin gave every paired attempt the real label."))
    return blocks


def _assisted_blocks(result: TwinFidelity) -> list[Block]:
    """Both intervals side by side, in words: what the real trials alone say, and what they say with the twin."""
    found = result.twin_assisted
    if found is None:
        return []
    alone = f"{100 * found.real_only_low95:.0f}-{100 * found.real_only_high95:.0f} %"
    helped = f"{100 * found.low95:.0f}-{100 * found.high95:.0f} %"
    return [
        Heading("Real success rate, with the twin's help", 3),
        Table(["", "estimate", "95 % interval", "width (points)", "from"],
              [["real trials alone", f"{100 * (result.real_success.rate or 0.0):.0f} % ({result.real_success.k}/"
                                     f"{result.real_success.n})", alone,
                f"{100 * (found.real_only_high95 - found.real_only_low95):.0f}", f"{found.real_trials} real trials"],
               ["with the twin", f"{100 * found.estimate:.0f} %", helped, f"{100 * (found.high95 - found.low95):.0f}",
                f"the same {found.real_trials} real trials and {found.twin_trials} twin trials "
                f"({found.twin_successes} successes)"]]),
        Para(f"The twin agreed with the arm on success in {100 * found.outcome_agreement:.0f} % of the paired "
             f"attempts. The second estimate is the twin's own success rate corrected by how much the arm and its "
             f"twin differed on the same starts (prediction-powered inference): the real success rate lies in "
             f"{helped} with 95 % confidence however good or bad the twin is; a twin that agrees more makes the "
             f"interval narrower, one that disagrees makes it wider, never wrong more often than 1 time in 20."),
    ]


def assisted_text(report: FidelityReport) -> str | None:
    """The plain report's lines: each twin's real success rate alone and with the twin, side by side."""
    lines = []
    for result in report.twins:
        for block in _assisted_blocks(result):
            if isinstance(block, Heading | Para):
                lines.append(f"{block.text} ({result.policy_label})" if isinstance(block, Heading) else block.text)
            elif isinstance(block, Table):
                lines += ["  ".join(f"{c:<18}" for c in row) for row in [block.headers, *block.rows]]
    return "\n".join(lines) or None


def across_blocks(across: AcrossSheets) -> list[Block]:
    return [
        Heading("Does the twin rank the policies as the arm does?", 2),
        Table(["policy", "real success", "twin success"],
              [[s.policy_label, f"{100 * s.real:.0f} %", f"{100 * s.twin:.0f} %"] for s in across.sheets]),
        Para(f"Pearson r {_num(across.pearson_r)}; MMRV {_num(across.mmrv, 3)} (SimplerEnv's Mean Maximum Rank "
             "Violation: per policy the largest real success gap to a policy the twin orders the other way, "
             f"averaged; 0 is a perfect ranking). Same ranking: {'yes' if across.same_ranking else 'no'}."),
    ]


def fidelity_blocks(report: FidelityReport) -> list[Block]:
    blocks: list[Block] = []
    for i, result in enumerate(report.twins):
        blocks += twin_blocks(result, f"twin{i + 1}")
    if report.across is not None:
        blocks += across_blocks(report.across)
    return blocks


def fidelity_text(report: FidelityReport) -> str:
    """What the plain `harness report` says of twin sheets: per twin the success on both sides and the agreement
    (the same numbers as the HTML, Markdown and JSON reports), and across twins the ranking."""
    lines = []
    for result in report.twins:
        pending = f", {result.pending} not run by the twin yet" if result.pending else ""
        lines += [f"Twin        {result.policy_label}: {result.paired} real attempts paired with the twin's run"
                  f"{pending}",
                  f"  success   real {_pct(result.real_success)}, twin {_pct(result.twin_success)}",
                  f"  agreement same label {_pct(result.label_agreement)} (kappa {_num(result.kappa)}), same outcome "
                  f"{_pct(result.outcome_agreement)} (kappa {_num(result.outcome_kappa)})"]
    if report.across is not None:
        across = report.across
        lines.append(f"Across      Pearson r {_num(across.pearson_r)}, MMRV {_num(across.mmrv, 3)}, same ranking: "
                     f"{'yes' if across.same_ranking else 'no'}")
    return "\n".join(lines)
