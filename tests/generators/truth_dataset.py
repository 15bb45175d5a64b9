"""Datasets written by the harness's own `--record-dataset` sink with the cube at known places, some of
them hard to see (the arm over the cube, a washed-out or dim frame): what `dataset coverage` is
checked against, in tests and in benchmarks/coverage_bench.py."""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import Protocol
from harness.vision.calibration import BowlCalibration
from harness.vision.rim import find_rim

FOVY_DEG = 45.0          # the simulated top camera's field of view (harness.sim.scene.SceneGeometry)
BOWL_HEIGHT_CM = 4.0     # the simulated bowl's rim above the table


class Hardness(Enum):
    PLAIN = "plain"                # arm at its start pose (which may itself hide part of the cube)
    ARM_OVER = "arm_over"          # the arm reaching over the cube
    WASHED_OUT = "washed_out"      # low contrast: 30 % of the scene over a light grey
    DIM = "dim"                    # a third of the light


class EpisodeSink(typing.Protocol):
    """What the truth dataset needs from a writer (`harness.run.dataset_sink.DatasetSink`)."""

    root: Path
    size: tuple[int, int]

    def add(self, observation: dict[str, Any], action: dict[str, float],
            frames: dict[str, np.ndarray | None]) -> None: ...
    def end_episode(self) -> int | None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class TruthDataset:
    root: Path
    calibration: Path
    truth: dict[int, tuple[float, float]]      # episode -> the trial's offset (cm) from the trained position
    hardness: dict[int, Hardness]


def _arm_over(protocol: Protocol, dx: float, dy: float, rng: np.random.Generator) -> dict[str, float]:
    x = protocol.scene.trained_cube_xy_cm[0] + dx
    y = protocol.scene.trained_cube_xy_cm[1] + dy
    pose = dict(DEFAULT_START_POSE)
    pose.update(shoulder_pan=-math.degrees(math.atan2(y, x)) + rng.uniform(-8, 8),
                shoulder_lift=rng.uniform(-10, 15), elbow_flex=rng.uniform(0, 20), wrist_flex=60.0)
    return pose


def _degrade(frame: np.ndarray, hardness: Hardness, rng: np.random.Generator) -> np.ndarray:
    f = frame.astype(np.float32)
    if hardness is Hardness.WASHED_OUT:
        f = 0.3 * f + 0.7 * 150
    elif hardness is Hardness.DIM:
        f = 0.33 * f
    else:
        return frame
    return (f + rng.normal(0, 2, f.shape)).clip(0, 255).astype(np.uint8)


def make_truth_dataset(sink: EpisodeSink, protocol: Protocol, hardness: dict[int, Hardness] | None = None,
                       frames_per_episode: int = 3, seed: int = 0) -> TruthDataset:
    """One episode per protocol trial, in order, written through `sink` (pass the `--record-dataset`
    writer, `harness.run.dataset_sink.DatasetSink`, at the size and codec to check), each showing
    the simulated scene with the cube placed as `harness run` places it; and a bowl calibration made
    as `harness measure --auto` makes it, on an empty 640x480 top frame, beside the dataset."""
    from harness.sim.scene import SceneGeometry
    from harness.sim.world import SimWorld

    hardness = hardness or {}
    scene = protocol.scene
    geometry = SceneGeometry(bowl_xy=(scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100),
                             bowl_rim_diameter=scene.bowl_diameter_cm / 100, cube_edge=scene.cube_edge_cm / 100)
    world = SimWorld(geometry, control_fps=protocol.fps)
    rng = np.random.default_rng(seed)
    root = Path(sink.root)
    size = sink.size
    truth: dict[int, tuple[float, float]] = {}
    kinds: dict[int, Hardness] = {}
    try:
        world.set_arm(DEFAULT_START_POSE)
        world.place_cube((0.20, 0.70), 0.0)          # out of view: an empty table for the calibration
        empty = world.render("top", 640, 480)
        rim = find_rim(empty)
        focal_px = 240 / math.tan(math.radians(FOVY_DEG / 2))
        true_radius = focal_px * scene.bowl_diameter_cm / 2 / (100 * geometry.top_camera_height - BOWL_HEIGHT_CM)
        if rim is None or abs(rim.mean_radius_px / true_radius - 1) > 0.02:
            raise RuntimeError(f"the automatic rim fit missed the simulated bowl ({rim})")
        calibration = root.parent / f"{root.name}_bowl_top.yaml"
        BowlCalibration(rim, scene.bowl_diameter_cm, "auto", "", "").save(calibration, empty)
        for position, trial in enumerate(protocol.trials):
            kind = hardness.get(position, Hardness.PLAIN)
            arm_over = kind is Hardness.ARM_OVER
            pose = _arm_over(protocol, trial.dx_cm, trial.dy_cm, rng) if arm_over else DEFAULT_START_POSE
            world.set_arm(pose)
            x = (scene.trained_cube_xy_cm[0] + trial.dx_cm) / 100
            y = (scene.trained_cube_xy_cm[1] + trial.dy_cm) / 100
            world.place_cube((x, y), math.radians(trial.yaw_deg), seed=trial.index)
            joints = {f"{n}.pos": float(v) for n, v in pose.items()}
            top = _degrade(world.render("top", *size), kind, rng)
            wrist = world.render("wrist_cam", *size)
            for _ in range(frames_per_episode):
                sink.add(joints, joints, {"top": top, "wrist": wrist})
            episode = sink.end_episode()
            truth[episode] = (trial.dx_cm, trial.dy_cm)
            kinds[episode] = kind
    finally:
        sink.close()
        world.close()
    return TruthDataset(root, calibration, truth, kinds)
