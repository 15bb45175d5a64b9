"""Feasibility of a learned segmenter of the red cube's top face (issue 59), against the colour rule.

The colour rule (`harness.vision.measure.find_cube`) loses much of a shaded or oddly lit top face at 320x240
and refuses cubes the renderer says are in full view. This script asks whether a tiny fully-convolutional
net, trained on the stress generator's own frames (whose segmentation render gives the exact mask of the
cube's top face), finds the whole face where the rule does not, and where it does, as precisely.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/learned_segmenter.py render \
        --minutes 8 --held-out 24 --near-rim 5
    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/learned_segmenter.py train --minutes 10 --sets 40
    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/learned_segmenter.py evaluate

The shipped net (`harness/vision/segmenter.py`, session 49) learns the whole visible cube instead, sides too, the
blob `find_cube` outlines (`--target silhouette` on each command; its cache is ~/.cache/harness/learned-seg-silhouette),
and is written into the package by `export` (needs `pip install onnx`); `speed` times the shipped net:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_segmenter.py render --target silhouette --sets 33 --minutes 40
    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_segmenter.py train --target silhouette --sets 33 --minutes 10
    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_segmenter.py export --target silhouette
    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_segmenter.py speed

Training frames come from CAMERAS sets of seeds 30001 upward (used nowhere else); the evaluation frames are
the CAMERAS sets of seeds 9601-9606, re-rendered here with their masks (the frames equal to the pickles at
/work/m9/fresh96, read from there), the 320x240 and 424x240 frames of CAMERAS sets from 40001 and NEAR_RIM sets
from 50001. Everything is cached under ~/.cache/harness/learned-seg/ (about 0.6 GB for the run in docs/benchmarks.md).

The net sees every frame at 240 lines (wider frames keep their aspect: 320, 424 or 427 px wide), the size
of the smallest cameras the issue is about; larger frames are shrunk to it and its mask scaled back up.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.generators

import argparse
import hashlib
import json
import math
import pickle
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.vision.measure import DetectionError, Geometry, bowl_shape, find_cube
from harness.vision.rim import fit_rim
from tests.generators.stress_set import RESOLUTIONS, Distribution, stress_frames

CACHE = Path.home() / ".cache" / "harness" / "learned-seg"   # `--target silhouette`: learned-seg-silhouette
SILHOUETTE = False   # set by `--target`: learn the whole visible cube (the blob find_cube outlines), not its top face
NET_HEIGHT = 240
TRAIN_SEED0 = 30001
EVAL_SEEDS = tuple(range(9601, 9607))
HELD_OUT_SEED0 = 40001   # more evaluation sets, used nowhere else: their small frames (<= 424x240) are kept whole
SMALL = ((320, 240), (424, 240))
NEAR_RIM_SEED0 = 50001   # NEAR_RIM sets (640x480, the gripper over the cube in half the frames), used nowhere else
PICKLES = Path("/work/m9/fresh96")   # the lead's renders of 9601-9606; where absent, the frames are cached instead
FRAMES_PER_SET = 70


@dataclass
class Sample:
    frame: np.ndarray          # the camera's frame at full resolution (RGB)
    face: np.ndarray           # bool: the cube's top face where the camera sees it, distorted as the frame
    size: tuple[int, int]
    cube_visible: float
    rim_visible: float


def camera_sets(seed: int, count: int = FRAMES_PER_SET, near_rim: bool = False) -> Iterator[Sample]:
    """`stress_frames(count, seed, distribution=CAMERAS)` (or NEAR_RIM), each with the exact mask of the cube's
    top face from the segmentation render."""
    distribution = Distribution.NEAR_RIM if near_rim else Distribution.CAMERAS
    for f in stress_frames(count, seed, distribution=distribution, top_face=not SILHOUETTE, cube_mask=SILHOUETTE):
        mask = f.cube_mask if SILHOUETTE else f.top_face
        assert mask is not None
        yield Sample(f.frame, mask, f.look.size, f.cube_visible, f.rim_visible)


def to_net(image: np.ndarray) -> np.ndarray:
    """A frame (or mask) at the net's 240 lines, aspect kept."""
    h, w = image.shape[:2]
    if h == NET_HEIGHT:
        return image
    size = (round(w * NET_HEIGHT / h), NET_HEIGHT)
    if image.dtype == bool:
        return np.asarray(cv2.resize(image.astype(np.float32), size, interpolation=cv2.INTER_AREA) > 0.5)
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA))


def _set_path(seed: int) -> Path:
    return CACHE / f"set-{seed}.npz"


def save_set(seed: int, samples: list[Sample], full: bool, keep_small: bool = False, keep_all: bool = False) -> None:
    """One set's frames at the net's size (and the true masks at full size for the evaluation sets, and with
    `keep_small` the 320x240 and 424x240 frames themselves, for sets with no pickles)."""
    arrays: dict[str, np.ndarray] = {}
    for k, s in enumerate(samples):
        arrays[f"x{k}"] = to_net(s.frame)
        arrays[f"y{k}"] = to_net(s.face)
        arrays[f"meta{k}"] = np.array([s.size[0], s.size[1], s.cube_visible, s.rim_visible])
        if full:
            arrays[f"full{k}"] = s.face
        if keep_all or (keep_small and (s.size in SMALL or seed >= NEAR_RIM_SEED0)):
            arrays[f"frame{k}"] = s.frame
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = _set_path(seed).with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as its bool option
    tmp.replace(_set_path(seed))


def load_set(seed: int) -> dict[str, np.ndarray]:
    with np.load(_set_path(seed)) as data:
        return {k: data[k] for k in data.files}


def render(minutes: float, sets: int | None, held_out: int, near_rim: int) -> None:
    """The evaluation sets, then training sets from seed 30001 up until the time box is spent (cached sets are
    skipped)."""
    for seed in range(HELD_OUT_SEED0, HELD_OUT_SEED0 + held_out):
        if not _set_path(seed).exists():
            t0 = time.process_time()
            save_set(seed, list(camera_sets(seed)), full=True, keep_small=True)
            print(f"held-out set {seed}: {(time.process_time() - t0) / FRAMES_PER_SET:.2f} s CPU a frame", flush=True)
    for seed in range(NEAR_RIM_SEED0, NEAR_RIM_SEED0 + near_rim):
        if not _set_path(seed).exists():
            t0 = time.process_time()
            save_set(seed, list(camera_sets(seed, near_rim=True)), full=True, keep_small=True)
            print(f"near-rim set {seed}: {(time.process_time() - t0) / FRAMES_PER_SET:.2f} s CPU a frame", flush=True)
    for seed in EVAL_SEEDS:
        if not _set_path(seed).exists():
            t0 = time.process_time()
            save_set(seed, list(camera_sets(seed)), full=True, keep_all=not PICKLES.exists())   # no pickles here
            print(f"eval set {seed}: {(time.process_time() - t0) / FRAMES_PER_SET:.2f} s CPU a frame", flush=True)
    t_start = time.process_time()
    seed, done = TRAIN_SEED0, 0
    while (time.process_time() - t_start) < 60 * minutes and (sets is None or done < sets):
        if not _set_path(seed).exists():
            t0 = time.process_time()
            save_set(seed, list(camera_sets(seed)), full=False)
            done += 1
            print(f"train set {seed}: {(time.process_time() - t0) / FRAMES_PER_SET:.2f} s CPU a frame", flush=True)
        seed += 1


def _net() -> torch.nn.Module:
    """A three-level U-Net, 8-16-32 channels (about 25k weights): small enough to run on the desk's CPU."""
    nn = torch.nn

    def block(cin: int, cout: int) -> torch.nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e1, self.e2, self.e3 = block(3, 8), block(8, 16), block(16, 32)
            self.u2, self.d2 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
            self.u1, self.d1 = nn.ConvTranspose2d(16, 8, 2, stride=2), block(16, 8)
            self.out = nn.Conv2d(8, 1, 1)
            self.pads = True   # pad to a multiple of 4 and crop back; `export` turns it off (`CubeSegmenter` pads)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not self.pads:
                return self.unpadded(x)
            h, w = x.shape[-2:]
            ph, pw = (-h) % 4, (-w) % 4
            return self.unpadded(nn.functional.pad(x, (0, pw, 0, ph), mode="replicate"))[..., :h, :w]

        def unpadded(self, x: torch.Tensor) -> torch.Tensor:
            a = self.e1(x)
            b = self.e2(nn.functional.max_pool2d(a, 2))
            c = self.e3(nn.functional.max_pool2d(b, 2))
            b = self.d2(torch.cat([self.u2(c), b], 1))
            a = self.d1(torch.cat([self.u1(b), a], 1))
            return self.out(a)

    return UNet()


def _inputs(frames: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) RGB to the net's input."""
    return torch.from_numpy(frames).permute(0, 3, 1, 2).float().div_(255.0).sub_(0.5)


def _train_sets() -> list[int]:
    seeds = (p.name.removeprefix("set-").removesuffix(".npz") for p in CACHE.glob("set-*.npz"))
    return sorted(int(s) for s in seeds if s.isdigit() and TRAIN_SEED0 <= int(s) < HELD_OUT_SEED0)


def _sets_from(seed0: int) -> list[int]:
    return [s for s in range(seed0, seed0 + 1000) if _set_path(s).exists()]


def _crop(x: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A square crop, on the cube two times in three (the face is a few hundred of 77,000 pixels)."""
    h, w = y.shape
    ys, xs = np.nonzero(y)
    if len(ys) and rng.random() < 2 / 3:
        i = int(np.clip(ys.mean() - rng.integers(8, size - 8), 0, h - size))
        j = int(np.clip(xs.mean() - rng.integers(8, size - 8), 0, w - size))
    else:
        i, j = int(rng.integers(0, h - size + 1)), int(rng.integers(0, w - size + 1))
    return x[i:i + size, j:j + size], y[i:i + size, j:j + size]


def _augment(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Flips and quarter turns (a top view has no up), and a colour cast and exposure change (light, white balance)."""
    turns = int(rng.integers(0, 4))
    x, y = np.rot90(x, turns), np.rot90(y, turns)
    if rng.random() < 0.5:
        x, y = x[:, ::-1], y[:, ::-1]
    gain = rng.uniform(0.7, 1.3) * rng.uniform(0.85, 1.15, 3)
    x = np.clip(x.astype(np.float32) * gain, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


def train(minutes: float, crop: int, batch: int, sets: int) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    xs, ys = [], []
    for seed in _train_sets()[:sets]:
        data = load_set(seed)
        for k in range(FRAMES_PER_SET):
            xs.append(data[f"x{k}"])
            ys.append(data[f"y{k}"])
    print(f"{len(xs)} training frames from {len(xs) // FRAMES_PER_SET} sets", flush=True)
    net = _net()
    print(f"{sum(p.numel() for p in net.parameters())} weights", flush=True)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    t0, step, losses = time.process_time(), 0, []
    while time.process_time() - t0 < 60 * minutes:
        picks = rng.integers(0, len(xs), batch)
        pairs = [_augment(*_crop(xs[i], ys[i], crop, rng), rng) for i in picks]
        x = _inputs(np.stack([p[0] for p in pairs]))
        y = torch.from_numpy(np.stack([p[1] for p in pairs])).float()[:, None]
        logits = net(x)
        prob = torch.sigmoid(logits)
        dice = 1 - (2 * (prob * y).sum() + 1) / (prob.sum() + y.sum() + 1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.tensor(3.0)) + dice
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
        if step % 100 == 0:
            print(f"step {step}: loss {np.mean(losses[-100:]):.3f}, {time.process_time() - t0:.0f} s CPU", flush=True)
        spent = (time.process_time() - t0) / (60 * minutes)
        for group in opt.param_groups:   # a step-down schedule on the time box: 3e-3, then 1e-3, then 3e-4
            group["lr"] = 3e-3 if spent < 0.6 else 1e-3 if spent < 0.85 else 3e-4
    torch.save(net.state_dict(), CACHE / "net.pt")
    recipe = {"target": "silhouette" if SILHOUETTE else "top-face", "training_seeds": _train_sets()[:sets],
              "frames": len(xs), "steps": step, "batch": batch, "crop": crop, "cpu_s": round(time.process_time() - t0),
              "final_loss": round(float(np.mean(losses[-500:])), 4),
              "weights": sum(p.numel() for p in net.parameters())}
    (CACHE / "net.json").write_text(json.dumps(recipe, indent=1))
    print(f"trained {step} steps of {batch} {crop}x{crop} crops in {time.process_time() - t0:.0f} s CPU", flush=True)


def segment(net: torch.nn.Module, frame: np.ndarray) -> np.ndarray | None:
    """The learned mask's largest component at the frame's own size (None: nothing found)."""
    with torch.no_grad():
        logits = net(_inputs(to_net(frame)[None]))[0, 0].numpy()
    h, w = frame.shape[:2]
    mask = (cv2.resize(logits, (w, h), interpolation=cv2.INTER_LINEAR) > 0).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if count < 2:
        return None
    best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return np.asarray(labels == best)


def _centroid(mask: np.ndarray) -> np.ndarray:
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean(), ys.mean()])


def evaluate(limit: int | None) -> None:
    """The CAMERAS sets by resolution, then the NEAR_RIM sets (where the gripper hides part of the cube)."""
    net = _load_net()
    rows, partial = _rows(net, (*EVAL_SEEDS, *_sets_from(HELD_OUT_SEED0)), limit)
    print("\nCAMERAS: seeds 9601-9606, and the 320x240 and 424x240 frames of the held-out sets from 40001")
    _table(rows)
    _partial_table(partial)
    near = _sets_from(NEAR_RIM_SEED0)
    if near:
        rows, partial = _rows(net, near, limit)
        print(f"\nNEAR_RIM: seeds {near[0]}-{near[-1]} (640x480; the cube against the bowl or on its lip, the "
              "gripper over it in half the frames)")
        _table(rows)
        _partial_table(partial)


def _load_net() -> torch.nn.Module:
    torch.set_num_threads(1)
    net = _net()
    net.load_state_dict(torch.load(CACHE / "net.pt"))
    net.eval()
    return net


def _rows(net: torch.nn.Module, seeds: tuple[int, ...] | list[int], limit: int | None
          ) -> tuple[dict[tuple[int, int], list[dict[str, float]]], dict[tuple[int, int], list[dict[str, float]]]]:
    g = Geometry()
    rows: dict[tuple[int, int], list[dict[str, float]]] = defaultdict(list)
    partial: dict[tuple[int, int], list[dict[str, float]]] = defaultdict(list)
    infer = []
    for seed in seeds:
        data = load_set(seed)
        for k in range(FRAMES_PER_SET if limit is None else limit):
            w, h, cube_visible, rim_visible = data[f"meta{k}"]
            if rim_visible < 0.9:
                continue
            if f"frame{k}" in data:
                frame = data[f"frame{k}"]
            elif seed in EVAL_SEEDS:
                with open(PICKLES / str(seed) / f"{k:03d}.pkl", "rb") as fh:
                    frame = pickle.load(fh).frame
            else:
                continue
            truth = data[f"full{k}"]
            row: dict[str, float] = {"truth_area": float(truth.sum())}
            true_c = _centroid(truth) if truth.any() else np.array([math.nan, math.nan])
            try:
                rim = fit_rim(frame, shape=bowl_shape(g)).rim
            except DetectionError:
                rim = None
                row["rim_refused"] = 1.0
            side = g.cube_cm * (rim.mean_radius_px if rim else math.nan) / (g.bowl_cm / 2)
            row["side"] = side
            if rim is not None:
                try:
                    centre, _, _ = find_cube(frame, rim, g)
                    row["colour_err"] = float(np.hypot(*(np.array(centre) - true_c)))
                except DetectionError as err:
                    row["colour_refused"] = 1.0
                    row["reason"] = err.reason.value  # type: ignore[assignment]
            t0 = time.process_time()
            mask = segment(net, frame)
            infer.append(((int(w), int(h)), time.process_time() - t0))
            if mask is not None:
                row["learned_ratio"] = float(mask.sum()) / side ** 2 if rim is not None else math.nan
                row["learned_err"] = float(np.hypot(*(_centroid(mask) - true_c)))
                if "colour_err" in row:
                    row["learned_vs_colour"] = float(np.hypot(*(_centroid(mask) - np.array(centre))))
            if cube_visible >= 0.95:
                rows[(int(w), int(h))].append(row)
            else:
                row["truth_ratio"] = row["truth_area"] / side ** 2 if rim is not None else math.nan
                partial[(int(w), int(h))].append(row)
    for res in RESOLUTIONS:
        times = [t for size, t in infer if size == res]
        if times:
            print(f"inference {res[0]}x{res[1]}: {1000 * np.mean(times):.0f} ms CPU a frame")
    return rows, partial


def _partial_table(rows: dict[tuple[int, int], list[dict[str, float]]]) -> None:
    """The new errors a learned mask could bring: a whole face claimed for a cube partly hidden or out of view."""
    print("\nframes with the rim in view but the cube partly hidden or out of view (cube_visible < 0.95)")
    print("true face = the visible top face (segmentation render) / expected; a 'whole' claim on a true face under")
    print("0.7 of a face would let a hidden cube be measured")
    print(f"{'size':>9} {'n':>3} {'no cube':>7} {'col accepts':>11} {'col acc & true<0.5':>18} "
          f"{'lrn whole':>9} {'lrn whole & true<0.7':>20} {'lrn whole & err>0.25side':>24}")
    for res in RESOLUTIONS:
        rs = [r for r in rows.get(res, []) if "rim_refused" not in r]
        if not rs:
            continue
        col_ok = [r for r in rs if "colour_err" in r]
        whole = [r for r in rs if 0.8 <= r.get("learned_ratio", math.nan) <= 1.5]
        print(f"{res[0]:>4}x{res[1]:<4} {len(rs):>3} {sum(r['truth_area'] == 0 for r in rs):>7} {len(col_ok):>11} "
              f"{sum(r['truth_ratio'] < 0.5 for r in col_ok):>18} {len(whole):>9} "
              f"{sum(r['truth_ratio'] < 0.7 for r in whole):>20} "
              f"{sum(not r['learned_err'] <= 0.25 * r['side'] for r in whole):>24}")


def _pct(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.2f}" if values else "-"


def _table(rows: dict[tuple[int, int], list[dict[str, float]]]) -> None:
    print("frames with cube and rim in full view (cube_visible >= 0.95, rim_visible >= 0.9)")
    print("whole = learned largest component 0.8-1.5 of the expected top face (from the rule's rim)")
    print("err = centroid distance from the true top face's centroid (segmentation render), px and share of side")
    head = (f"{'size':>9} {'n':>3} {'rim-':>4} {'col ok':>6} {'col-':>4} {'col- & whole':>12} {'whole':>5} "
            f"{'col err p50/p95 px':>18} {'lrn err p50/p95 px':>18} {'lrn err p50/p95 side':>20} {'lrn>0.25side':>12} "
            f"{'col- & whole err/side p50/p95':>29}")
    print(head)
    for res in RESOLUTIONS:
        rs = rows.get(res, [])
        if not rs:
            continue
        whole = [r for r in rs if 0.8 <= r.get("learned_ratio", math.nan) <= 1.5]
        col_ref = [r for r in rs if r.get("colour_refused")]
        col_ref_whole = [r for r in col_ref if r in whole]
        col_err = [r["colour_err"] for r in rs if "colour_err" in r]
        lrn_err = [r["learned_err"] for r in whole]
        lrn_side = [r["learned_err"] / r["side"] for r in whole]
        wrong = [r for r in whole if r["learned_err"] > 0.25 * r["side"]]
        rescued = [r["learned_err"] / r["side"] for r in col_ref_whole]
        print(f"{res[0]:>4}x{res[1]:<4} {len(rs):>3} {sum('rim_refused' in r for r in rs):>4} {len(col_err):>6} "
              f"{len(col_ref):>4} {len(col_ref_whole):>12} {len(whole):>5} "
              f"{_pct(col_err, 50):>8} / {_pct(col_err, 95):<7} {_pct(lrn_err, 50):>8} / {_pct(lrn_err, 95):<7} "
              f"{_pct(lrn_side, 50):>9} / {_pct(lrn_side, 95):<8} {len(wrong):>12} "
              f"{_pct(rescued, 50):>7} / {_pct(rescued, 95):<7}")
    reasons: dict[str, int] = defaultdict(int)
    for rs in rows.values():
        for r in rs:
            if "reason" in r:
                reasons[str(r["reason"])] += 1
    print("colour rule's refusals:", dict(reasons))


SHIPPED_ONNX = Path(__file__).resolve().parents[1] / "harness" / "vision" / "data" / "cube_segmenter.onnx"


def export() -> None:
    """The trained net as the package's ONNX file (`harness.vision.segmenter`), checked against torch through
    OpenCV's DNN module on the evaluation frames, with its recipe beside it. Needs `pip install onnx`."""
    net = _load_net()
    net.pads = False
    SHIPPED_ONNX.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(net, (torch.zeros(1, 3, 240, 320),), str(SHIPPED_ONNX), dynamo=False,
                      input_names=["frame"], output_names=["logits"], opset_version=13,
                      dynamic_axes={"frame": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    from harness.vision.segmenter import CubeSegmenter

    shipped, worst = CubeSegmenter(SHIPPED_ONNX), 0.0
    net.pads = True
    data = load_set(EVAL_SEEDS[0])
    for k in range(0, FRAMES_PER_SET, 7):
        x = data[f"x{k}"]
        with torch.no_grad():
            ours = net(_inputs(x[None]))[0, 0].numpy()
        worst = max(worst, float(np.abs(shipped.logits(x) - ours).max()))
    assert worst < 1e-3, f"OpenCV's DNN and torch disagree by {worst} on a logit"
    recipe = json.loads((CACHE / "net.json").read_text())
    recipe["sha256"] = hashlib.sha256(SHIPPED_ONNX.read_bytes()).hexdigest()
    recipe["made_by"] = "benchmarks/learned_segmenter.py render/train/export --target " + recipe["target"]
    SHIPPED_ONNX.with_suffix(".json").write_text(json.dumps(recipe, indent=1) + "\n")
    print(f"wrote {SHIPPED_ONNX} ({SHIPPED_ONNX.stat().st_size} bytes; OpenCV against torch: {worst:.1e} at most)")


def speed(repeats: int) -> None:
    """The shipped net's cost a frame (`CubeSegmenter.outlines`: resize, net, upsampling, regions) per camera size,
    on one OpenCV thread and on OpenCV's default."""
    from harness.vision.segmenter import CubeSegmenter

    rng = np.random.default_rng(0)
    print(f"{'size':>9} {'1 thread ms':>11} {'default ms':>10}")
    for w, h in RESOLUTIONS:
        frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        row = []
        for threads in (1, -1):
            cv2.setNumThreads(threads)
            net = CubeSegmenter()
            net.outlines(frame)   # loads the net
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                net.outlines(frame)
                times.append(time.perf_counter() - t0)
            row.append(1000 * float(np.median(times)))
        print(f"{w:>4}x{h:<4} {row[0]:>11.1f} {row[1]:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render")
    r.add_argument("--minutes", type=float, default=10.0)
    r.add_argument("--sets", type=int, default=None)
    r.add_argument("--held-out", type=int, default=0, help="extra evaluation sets from seed 40001")
    r.add_argument("--near-rim", type=int, default=0, help="NEAR_RIM evaluation sets from seed 50001")
    t = sub.add_parser("train")
    t.add_argument("--minutes", type=float, default=10.0)
    t.add_argument("--crop", type=int, default=96)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--sets", type=int, default=20, help="training sets of 70 frames to use at most")
    e = sub.add_parser("evaluate")
    e.add_argument("--limit", type=int, default=None, help="frames a set (default: all 70)")
    x = sub.add_parser("export", help="the trained net as harness/vision/data/cube_segmenter.onnx")
    sp = sub.add_parser("speed", help="the shipped net's cost a frame per camera size")
    sp.add_argument("--repeats", type=int, default=20)
    for p in (r, t, e, x, sp):
        p.add_argument("--target", choices=("top-face", "silhouette"), default="top-face",
                       help="what the net learns: the cube's top face, or all of it in view (sides too)")
    args = parser.parse_args()
    global CACHE, SILHOUETTE
    if args.target == "silhouette":
        CACHE, SILHOUETTE = CACHE.with_name("learned-seg-silhouette"), True
    if args.cmd == "render":
        render(args.minutes, args.sets, args.held_out, args.near_rim)
    elif args.cmd == "train":
        train(args.minutes, args.crop, args.batch, args.sets)
    elif args.cmd == "export":
        export()
    elif args.cmd == "speed":
        speed(args.repeats)
    else:
        evaluate(args.limit)


if __name__ == "__main__":
    main()
