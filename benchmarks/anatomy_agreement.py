"""Failure anatomy against the simulator judge's contact truth, per policy (issue 37).

For every scored (non-void) final attempt of each simulated scoresheet: the anatomy recomputed with the
current rules from the attempt's recorded trace (`harness.run.reanalyze`: the evidence folder's
`trajectory.parquet`, the gripper's load from `sim_state.npz` where the trace predates it), compared with the
judge's first `grasp` and `release` events (`harness.run.anatomy_agreement`: present or absent alike, and
within one control step when both). `--stored` compares the anatomy stored in the sheet instead (what a sheet
recorded with older rules says; needs no trace). Prints one markdown row per sheet, then each disagreeing
attempt.

`--slopes` adds, per sheet, the stored tracking slope beside the slope with each judged grasp's point replaced
by where the judge saw the cube held (its `grasp` event's cube position: where a gripper that holds it is),
which re-checks a slope from sheets whose traces were not kept.

`--export DIR --per-sheet N` also writes the first N scored attempts' traces of each sheet, with the judge's
verdict and the cube's start, as `DIR/<label>.npz` (`tests/data/anatomy/`: the held-out test's fixtures).

Run: .venv/bin/python benchmarks/anatomy_agreement.py SHEET[=RUNS_FOLDER] ... [--stored] [--label NAME ...]
     [--slopes] [--export DIR --per-sheet N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.models.scoresheet import load_scoresheet  # noqa: E402
from harness.models.taxonomy import Label  # noqa: E402
from harness.run.anatomy import GraspPoints  # noqa: E402
from harness.run.anatomy_agreement import trial_agreement  # noqa: E402
from harness.run.reanalyze import evidence_folder, reanalyze, trace_rows  # noqa: E402

COLUMNS = ["t", *(f"obs.{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                                             "wrist_roll", "gripper")), "action.gripper.pos", "obs.gripper.load"]


def export(spec: str, label: str, out: Path, per_sheet: int) -> int:
    """The first `per_sheet` scored attempts' traces (the columns anatomy reads, float32) with the judge's
    verdict, the cube's planned start and the label, in one compressed file."""
    path, _, runs = spec.partition("=")
    sheet = load_scoresheet(path)
    planned = {t.index: (t.dx_cm, t.dy_cm) for t in sheet.locked.trials}
    arrays: dict[str, np.ndarray] = {"columns": np.array(COLUMNS)}
    meta = []
    for index in sheet.trial_indices:
        attempt = sheet.final_attempt(index)
        if attempt is None or attempt.label is Label.VOID or attempt.judge is None:
            continue
        folder = evidence_folder(sheet, attempt, Path(runs) if runs else None)
        if folder is None:
            continue
        rows, _ = trace_rows(folder)
        arrays[f"trial{index}"] = np.array([[r[c] for c in COLUMNS] for r in rows], dtype=np.float32)
        meta.append({"trial": index, "label": attempt.label.value, "cube_start_cm": planned[index],
                     "judge": attempt.judge.model_dump(mode="json")})
        if len(meta) >= per_sheet:
            break
    arrays["meta"] = np.array(json.dumps({"policy": label, "sheet": Path(path).name, "attempts": meta}))
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / f"{label}.npz", **arrays)
    return len(meta)


def sheet_agreement(spec: str, stored: bool, fk: GraspPoints | None) -> tuple[dict, list[str]]:
    path, _, runs = spec.partition("=")
    sheet = load_scoresheet(path)
    note = "stored anatomy"
    if not stored:
        result = reanalyze(sheet, Path(runs) if runs else None, fk)
        sheet, note = result.sheet, result.describe()
    period = 1.0 / float(sheet.locked_data.get("fps") or 30)
    rows: dict = {"sheet": Path(path).name, "n": 0, "grasps": 0, "releases": 0, "grasp_ok": 0, "release_ok": 0,
                  "both_ok": 0, "no_anatomy": 0, "lift_seen": 0, "lifts": 0, "note": note, "dt_ms": []}
    lines = []
    for index in sheet.trial_indices:
        attempt = sheet.final_attempt(index)
        if attempt is None or attempt.label is Label.VOID or attempt.judge is None:
            continue
        if attempt.anatomy is None:
            rows["no_anatomy"] += 1
            continue
        agreement = trial_agreement(attempt.anatomy, attempt.judge, period)
        rows["n"] += 1
        rows["grasps"] += agreement.grasp.judge_s is not None
        rows["releases"] += agreement.release.judge_s is not None
        rows["grasp_ok"] += agreement.grasp.agrees
        rows["release_ok"] += agreement.release.agrees
        rows["both_ok"] += agreement.agrees
        rows["lifts"] += agreement.lift.judge_s is not None
        for event in (agreement.grasp, agreement.release):
            if event.judge_s is not None and event.anatomy_s is not None:
                rows["dt_ms"].append(1000 * (event.anatomy_s - event.judge_s))
        rows["lift_seen"] += (agreement.lift.judge_s is None) == (agreement.lift.anatomy_s is None)
        if not agreement.agrees:
            lines.append(f"- {Path(path).name} trial {index} ({attempt.label.value}): {agreement.describe()}; "
                         f"anatomy: {attempt.anatomy.summary}")
    return rows, lines


def slopes(spec: str) -> str:
    """The stored tracking slope, and the same with judged grasps placed where the judge saw the cube held."""
    from harness.models.anatomy import tracking_fit
    from harness.models.protocol import Scene
    from harness.models.verdict import EventKind

    sheet = load_scoresheet(spec.partition("=")[0])
    trained = Scene().trained_cube_xy_cm
    stored, judged, moved = [], [], []
    for index in sheet.trial_indices:
        attempt = sheet.final_attempt(index)
        if attempt is None or attempt.anatomy is None or attempt.anatomy.grasp_point_cm is None:
            continue
        a = attempt.anatomy
        stored.append((a.cube_start_cm, a.grasp_point_cm))
        grasp = next((e for e in (attempt.judge.events if attempt.judge else []) if e.event is EventKind.GRASP), None)
        point = a.grasp_point_cm if grasp is None else (100 * grasp.cube[0] - trained[0],
                                                         100 * grasp.cube[1] - trained[1])
        if grasp is not None:
            moved.append(float(np.hypot(point[0] - a.grasp_point_cm[0], point[1] - a.grasp_point_cm[1])))
        judged.append((a.cube_start_cm, point))

    def fit(pairs: list) -> str:
        f = tracking_fit([c for c, _ in pairs], [g for _, g in pairs]) if pairs else None
        return "n/a (one spot or under 3)" if f is None else f"{f.slope:.2f} ({f.slope95[0]:.2f} to {f.slope95[1]:.2f})"

    shift = f"; judged grasps moved median {np.median(moved):.2f} cm, max {max(moved):.2f} cm" if moved else ""
    return f"- {Path(sheet.path).name}: slope stored {fit(stored)}, judge-placed {fit(judged)}{shift}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sheets", nargs="+", help="SHEET or SHEET=RUNS_FOLDER (the run's evidence folders)")
    parser.add_argument("--stored", action="store_true", help="the anatomy stored in each sheet, not recomputed")
    parser.add_argument("--label", action="append", help="a name per sheet for the table (default: file name)")
    parser.add_argument("--slopes", action="store_true", help="re-check each sheet's tracking slope (above)")
    parser.add_argument("--export", type=Path, metavar="DIR", help="write each sheet's first traces as fixtures")
    parser.add_argument("--per-sheet", type=int, default=4, help="attempts per sheet to export (default 4)")
    args = parser.parse_args()
    fk = None if args.stored else GraspPoints()
    print("| policy (sheet) | attempts | judge grasps | judge releases | grasp agrees | release agrees | "
          "both agree | lift seen alike (judge lifts) |")
    print("|---|---|---|---|---|---|---|---|")
    details = []
    for i, spec in enumerate(args.sheets):
        row, lines = sheet_agreement(spec, args.stored, fk)
        name = args.label[i] if args.label and i < len(args.label) else row["sheet"]
        n = max(row["n"], 1)
        print(f"| {name} | {row['n']} | {row['grasps']} | {row['releases']} | {row['grasp_ok']}/{row['n']} | "
              f"{row['release_ok']}/{row['n']} | **{row['both_ok']}/{row['n']} = {100 * row['both_ok'] / n:.0f} %** | "
              f"{row['lift_seen']}/{row['n']} ({row['lifts']}) |")
        timing = (f"; anatomy minus judge over {len(row['dt_ms'])} events both saw: median "
                  f"{np.median(row['dt_ms']):+.0f} ms, range {min(row['dt_ms']):+.0f} to {max(row['dt_ms']):+.0f} ms"
                  if row["dt_ms"] else "")
        details.append(f"{row['note']}" + (f"; {row['no_anatomy']} without anatomy" if row["no_anatomy"] else "")
                       + timing)
        details += lines
        if args.slopes:
            details.append(slopes(spec))
        if args.export:
            count = export(spec, name.replace(" ", "-"), args.export, args.per_sheet)
            details.append(f"exported {count} attempts of {name} to {args.export}")
    print()
    print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
