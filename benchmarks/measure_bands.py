"""`harness measure` per distance band, on the stress set and on held-out WIDE sets, before and after.

Bands by the true distance of the cube's centre from the bowl's centre: inside (the judge's
verdict), near rim (outside, under 8 cm), 8-15 cm, 15-26 cm. Per band: frames, measured, mean, p95
and max error, the error as a share of the distance (p95 and max, frames 8 cm or more away), the
interval's coverage (errors within their own stated +/-) and its median width; the CPU per frame.

The target is on the error's growth with distance ("no faster than 2 % of the distance"), so each
table is followed by the slope of a 95th-percentile (quantile) linear fit of the error against the
true distance, over every measured frame, in % of the distance, with a bootstrap 95 % interval.

Rendering and measuring are separate steps, so the same frames can be measured by older code. Sets
are cached on disk (outside git, one .npz per set under CACHE/SETS/), rendered once:

    .venv/bin/python benchmarks/measure_bands.py render --sets dev
    .venv/bin/python benchmarks/measure_bands.py measure --sets dev --json after.json
    git archive <old-commit> harness | tar -x -C /tmp/before
    (cd /tmp && PYTHONPATH=/tmp/before /path/to/.venv/bin/python /path/to/benchmarks/measure_bands.py \\
        measure --sets dev --json /tmp/before.json)

    .venv/bin/python benchmarks/measure_bands.py compare before.json after.json

The sets are named in tests/data/heldout_seeds.yaml: `dev` were looked at while tuning, `heldout`
only once, at the end; `used` are earlier held-out sets, judged once already (docs/measurement.md).
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

SEEDS = Path(__file__).resolve().parent.parent / "tests" / "data" / "heldout_seeds.yaml"
CACHE = Path.home() / ".cache" / "harness" / "measure-sets"
BANDS = ("inside", "near rim", "8-15 cm", "15-26 cm")
BOOTSTRAP = 400


def band(distance_cm: float, inside: bool) -> str:
    if inside:
        return "inside"
    if distance_cm < 8:
        return "near rim"
    return "8-15 cm" if distance_cm < 15 else "15-26 cm"


def render(sets: str, cache: Path, force: bool = False) -> None:
    """Render the named sets into `cache`/`sets`, one .npz per set; a set already there is kept."""
    from tests.generators.stress_set import Distribution, stress_frames

    spec = yaml.safe_load(SEEDS.read_text())
    folder = cache / sets
    folder.mkdir(parents=True, exist_ok=True)
    for entry in spec[sets]:
        path = folder / f"{entry['distribution']}-{entry['seed']}.npz"
        if path.exists() and not force:
            print(f"cached {path}")
            continue
        count = entry.get("frames", spec["frames_per_set"])
        frames = list(stress_frames(count, seed=entry["seed"], distribution=Distribution(entry["distribution"])))
        np.savez_compressed(path, frames=np.stack([f.frame for f in frames]),
                            distance=np.array([f.distance_cm for f in frames]),
                            inside=np.array([f.inside for f in frames]),
                            where=np.array([f.where for f in frames]),
                            rim_visible=np.array([f.rim_visible for f in frames]),
                            cube_visible=np.array([f.cube_visible for f in frames]),
                            matrix=np.stack([f.camera_matrix for f in frames]),
                            distortion=np.stack([f.distortion for f in frames]))
        print(f"rendered {path}: {count} frames")


def measure(folder: Path, out: Path | None, only: str | None = None) -> None:
    """Measure every cached set in `folder` with the `harness` on the path (as a user with a calibrated lens)."""
    from harness.vision.camera import CameraIntrinsics
    from harness.vision.measure import Geometry, measure_image

    records: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*.npz")):
        if only and only not in path.stem:
            continue
        data = np.load(path)
        rows = []
        for i in range(len(data["frames"])):
            m = data["matrix"][i]
            lens = CameraIntrinsics(640, 480, m[0, 0], m[1, 1], m[0, 2], m[1, 2], tuple(data["distortion"][i]))
            t0 = time.process_time()
            result = measure_image(data["frames"][i], Geometry(), lens)
            cpu = time.process_time() - t0
            got = result.measurement
            rows.append({"band": band(float(data["distance"][i]), bool(data["inside"][i])),
                         "distance": float(data["distance"][i]), "cpu_s": cpu,
                         "measured": got is not None, "reason": result.reason.value if result.reason else None,
                         "error": abs(got.distance_cm - float(data["distance"][i])) if got else None,
                         "signed": got.distance_cm - float(data["distance"][i]) if got else None,
                         "plusminus": got.uncertainty_cm if got else None,
                         "rim_visible": float(data["rim_visible"][i]), "cube_visible": float(data["cube_visible"][i]),
                         "where": str(data["where"][i]) if "where" in data else ""})
        records[path.stem] = rows
    if out:
        out.write_text(json.dumps(records, indent=1))
    table(records)


def quantile_slope(distance: np.ndarray, error: np.ndarray, q: float = 0.95) -> tuple[float, float]:
    """Intercept (cm) and slope (cm per cm) of the q-th quantile of the error as a line in the
    distance: the least pinball loss, as a linear programme (Koenker and Bassett)."""
    from scipy.optimize import linprog

    n = len(distance)
    # variables: a, b, u+ (n), u- (n); error = a + b d + u+ - u-; minimise q sum(u+) + (1 - q) sum(u-)
    cost = np.concatenate([[0.0, 0.0], np.full(n, q), np.full(n, 1 - q)])
    equality = np.hstack([np.ones((n, 1)), distance[:, None], np.eye(n), -np.eye(n)])
    bounds = [(None, None), (None, None)] + [(0, None)] * (2 * n)
    solved = linprog(cost, A_eq=equality, b_eq=error, bounds=bounds, method="highs")
    return float(solved.x[0]), float(solved.x[1])


def slope_line(rows: list[dict], max_plusminus: float | None = None) -> str:
    """The p95 error's growth with distance, in % of the distance, with a bootstrap 95 % interval
    (over the frames whose +/- is at most `max_plusminus`, when given)."""
    done = [r for r in rows if r["measured"] and (max_plusminus is None or r["plusminus"] <= max_plusminus)]
    which = "" if max_plusminus is None else f", frames with +/- <= {max_plusminus:g} cm"
    if len(done) < 10:
        return f"p95 error vs distance{which}: too few measured frames for a fit"
    distance = np.array([r["distance"] for r in done])
    error = np.array([r["error"] for r in done])
    intercept, slope = quantile_slope(distance, error)
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(done), len(done))
        draws.append(quantile_slope(distance[pick], error[pick])[1])
    low, high = np.percentile(draws, [2.5, 97.5])
    span = f"{distance.min():.0f}-{distance.max():.0f} cm"
    return (f"p95 error vs distance{which} (quantile fit, {len(done)} frames, {span}): "
            f"{intercept:.2f} cm + {100 * slope:.2f} % of the distance (95 % bootstrap interval of the slope "
            f"{100 * low:.2f} to {100 * high:.2f} %)")


def _row(name: str, rows: list[dict]) -> str:
    done = [r for r in rows if r["measured"]]
    cpu = f"{1000 * np.mean([r['cpu_s'] for r in rows]):.0f}" if rows else "-"
    if not done:
        return f"| {name} | {len(rows)} | 0 | - | - | - | - | - | - | {cpu} |"
    errors = np.array([r["error"] for r in done])
    widths = np.array([r["plusminus"] for r in done])
    far = [r["error"] / r["distance"] for r in done if r["distance"] >= 8]
    share = f"{100 * np.percentile(far, 95):.1f}% / {100 * max(far):.1f}%" if far else "-"
    covered = int(np.sum(errors <= widths))
    return (f"| {name} | {len(rows)} | {len(done)} | {errors.mean():.2f} | {np.percentile(errors, 95):.2f} | "
            f"{errors.max():.2f} | {share} | {covered}/{len(done)} ({100 * covered / len(done):.0f}%) | "
            f"{np.median(widths):.2f} | {cpu} |")


def table(records: dict[str, list[dict]]) -> None:
    header = ("| band | frames | measured | mean cm | p95 cm | max cm | error / distance p95 / max | within +/- | "
              "median +/- cm | CPU ms/frame |\n|---|---|---|---|---|---|---|---|---|---|")
    pooled: dict[str, list[dict]] = defaultdict(list)
    for name, rows in records.items():
        print(f"\n{name}: CPU {1000 * np.mean([r['cpu_s'] for r in rows]):.0f} ms/frame; not measured: "
              f"{dict(sorted(_count(r['reason'] for r in rows if r['reason']).items()))}\n")
        print(header)
        for b in BANDS:
            print(_row(b, [r for r in rows if r["band"] == b]))
        print(_row("all", rows))
        print("\n" + slope_line(rows) + "\n" + slope_line(rows, 1.0))
        for r in rows:
            pooled[r["band"]].append(r)
    if len(records) > 1:
        print(f"\nall {len(records)} sets pooled\n")
        print(header)
        for b in BANDS:
            print(_row(b, pooled[b]))
        print(_row("all", [r for rows in records.values() for r in rows]))
        pooled_rows = [r for rows in records.values() for r in rows]
        print("\n" + slope_line(pooled_rows) + "\n" + slope_line(pooled_rows, 1.0))


def compare(before: Path, after: Path) -> None:
    """Before and after side by side, per band, pooled over the sets of each distribution."""
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    groups: dict[str, list[str]] = defaultdict(list)
    for name in new:
        groups[name.split("-")[0]].append(name)
    for kind, names in groups.items():
        print(f"\n{kind} ({', '.join(names)}): before -> after\n")
        print("| band | frames | measured | mean cm | p95 cm | max cm | error / distance p95 | within +/- | "
              "CPU ms/frame |\n|---|---|---|---|---|---|---|---|---|")
        for b in (*BANDS, "all"):
            cells = [_cells([r for n in names for r in records[n] if b in ("all", r["band"])])
                     for records in (old, new)]
            frames = sum(1 for n in names for r in new[n] if b in ("all", r["band"]))
            print(f"| {b} | {frames} | " + " | ".join(f"{x} -> {y}" for x, y in zip(*cells, strict=True)) + " |")
        for label, records in (("before", old), ("after", new)):
            rows = [r for n in names for r in records[n]]
            print(f"\n{label}: " + slope_line(rows) + f"\n{label}: " + slope_line(rows, 1.0))


def _cells(rows: list[dict]) -> list[str]:
    done = [r for r in rows if r["measured"]]
    cpu = f"{1000 * np.mean([r['cpu_s'] for r in rows]):.0f}" if rows else "-"
    if not done:
        return [str(0), "-", "-", "-", "-", "-", cpu]
    errors = np.array([r["error"] for r in done])
    covered = int(np.sum(errors <= np.array([r["plusminus"] for r in done])))
    far = [r["error"] / r["distance"] for r in done if r["distance"] >= 8]
    return [str(len(done)), f"{errors.mean():.2f}", f"{np.percentile(errors, 95):.2f}", f"{errors.max():.2f}",
            f"{100 * np.percentile(far, 95):.1f}%" if far else "-", f"{covered}/{len(done)}", cpu]


def _count(items) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("render")
    r.add_argument("--sets", choices=("dev", "used", "heldout"), required=True)
    r.add_argument("--cache", type=Path, default=CACHE)
    r.add_argument("--force", action="store_true", help="render again a set already cached")
    m = sub.add_parser("measure")
    m.add_argument("--sets", choices=("dev", "used", "heldout"), required=True)
    m.add_argument("--cache", type=Path, default=CACHE)
    m.add_argument("--only", help="only the cached sets whose name contains this (e.g. near_rim)")
    m.add_argument("--json", type=Path, help="also write every frame's record here")
    c = sub.add_parser("compare", help="two `measure --json` files side by side, per band")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.step == "render":
        render(args.sets, args.cache, args.force)
    elif args.step == "compare":
        compare(args.before, args.after)
    else:
        measure(args.cache / args.sets, args.json, args.only)


if __name__ == "__main__":
    main()
