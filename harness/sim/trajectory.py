"""A simulated attempt's exact state trajectory: the evidence a simulated trial keeps instead of pixels.

Why: in simulation a video is a pure function of the simulator's state, and drawing it (CPU rendering
of the arm's meshes) cost more than the trial's physics, judge and policy together. So every simulated
attempt stores what reproduces each of its frames exactly, and frames are drawn when someone wants to
look (`harness replay`, or the evidence writer for failed attempts).

The file (`sim_state.npz`, `np.savez_compressed`; format documented in docs/trajectory.md):

- `meta`: one JSON string: format, model fingerprint, MuJoCo version, scene geometry, control rate,
  cameras, the recorded video's fps and size, the final frames' size.
- per control step (rows): `step`, `t` (episode time, s), `physics` (`mj_getState` with
  `mjSTATE_FULLPHYSICS` after the step: time, qpos, qvel, act, ...), `ctrl` (the joint targets), and
  `posed_qpos` (the configuration a render at that step shows: the one before the step's last physics
  substep, see `SimWorld.frame_request`).
- per video frame tick: `frame_row` (the step row it was taken at), `frame_noise` and `frame_frozen`
  (per camera, in `meta.cameras` order: the sensor-noise pattern and the frozen flag of the request).
- the final frames: `final_qpos`, `final_noise`, `final_frozen`.

`load_trajectory` is the small loader later tools (failure anatomy) build on.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from harness.errors import HarnessInputError
from harness.sim.scene import SceneGeometry, menagerie_dir
from harness.sim.world import FrameRequest

TRAJECTORY_FILE = "sim_state.npz"
FORMAT = "harness.trajectory/1"
STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


@lru_cache(maxsize=4)
def _fingerprint_of(folder: str) -> str:
    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def model_fingerprint() -> str:
    """sha256 over the SO-101 model files (the Menagerie XML and meshes the scene is built from): a
    trajectory only reproduces its frames on the model it was recorded on. Hashed once per process."""
    return _fingerprint_of(str(menagerie_dir()))


@dataclass
class TrajectoryLog:
    """Collects one attempt's trajectory in the control loop: a state copy per step (microseconds), the
    frame requests' noise and frozen flags per video tick; written by the evidence writer, off the loop."""

    cameras: list[str]
    video_fps: float
    video_size: tuple[int, int]

    def __post_init__(self) -> None:
        self._steps: list[int] = []
        self._t: list[float] = []
        self._physics: list[np.ndarray] = []
        self._ctrl: list[np.ndarray] = []
        self._posed: list[np.ndarray] = []
        self._frame_row: list[int] = []
        self._frame_noise: list[list[int]] = []
        self._frame_frozen: list[list[bool]] = []
        self._final: dict[str, FrameRequest] = {}

    def step(self, world: Any, step: int, t: float) -> None:
        state = np.empty(mujoco.mj_stateSize(world.model, STATE_SPEC))
        mujoco.mj_getState(world.model, world.data, state, STATE_SPEC)
        self._steps.append(step)
        self._t.append(t)
        self._physics.append(state)
        self._ctrl.append(world.data.ctrl.copy())
        self._posed.append(world.posed_qpos.copy())

    def frame_tick(self, requests: dict[str, FrameRequest]) -> None:
        """The requests of one video tick (every camera), taken at the last logged step."""
        self._frame_row.append(len(self._steps) - 1)
        self._frame_noise.append([requests[cam].noise_index for cam in self.cameras])
        self._frame_frozen.append([requests[cam].frozen for cam in self.cameras])

    def final(self, requests: dict[str, FrameRequest]) -> None:
        self._final = dict(requests)

    def requests(self, camera: str) -> list[tuple[float, FrameRequest]]:
        """The recorded video's frame requests of one camera, in order (what the writer draws lazily)."""
        c = self.cameras.index(camera)
        width, height = self.video_size
        return [(self._t[row], FrameRequest(camera, width, height, self._posed[row], self._frame_noise[i][c],
                                            self._frame_frozen[i][c]))
                for i, row in enumerate(self._frame_row)]

    def arrays(self, world: Any) -> dict[str, np.ndarray]:
        """Everything `sim_state.npz` holds, `meta` included."""
        nq, nu = world.model.nq, world.model.nu
        size = mujoco.mj_stateSize(world.model, STATE_SPEC)
        final = [self._final.get(cam) for cam in self.cameras]
        final_size = next(((r.width, r.height) for r in final if r is not None), None)
        meta = {
            "format": FORMAT,
            "model_fingerprint": model_fingerprint(),
            "mujoco": mujoco.__version__,
            "scene": asdict(world.geometry),
            "control_fps": world.control_fps,
            "physics_dt": float(world.model.opt.timestep),
            "state_spec": "mjSTATE_FULLPHYSICS",
            "cameras": list(self.cameras),
            "video_fps": self.video_fps,
            "video_size": list(self.video_size),
            "final_size": list(final_size) if final_size else None,
        }
        return {
            "meta": np.array(json.dumps(meta)),
            "step": np.array(self._steps, dtype=np.int32),
            "t": np.array(self._t, dtype=np.float64),
            "physics": np.array(self._physics, dtype=np.float64).reshape(-1, size),
            "ctrl": np.array(self._ctrl, dtype=np.float64).reshape(-1, nu),
            "posed_qpos": np.array(self._posed, dtype=np.float64).reshape(-1, nq),
            "frame_row": np.array(self._frame_row, dtype=np.int32),
            "frame_noise": np.array(self._frame_noise, dtype=np.int16).reshape(len(self._frame_row), len(self.cameras)),
            "frame_frozen": np.array(self._frame_frozen, dtype=bool).reshape(len(self._frame_row), len(self.cameras)),
            "final_qpos": np.array([r.qpos if r is not None else np.full(nq, np.nan) for r in final]
                                   ).reshape(len(final), nq),
            "final_noise": np.array([r.noise_index if r is not None else 0 for r in final], dtype=np.int16),
            "final_frozen": np.array([bool(r.frozen) if r is not None else False for r in final], dtype=bool),
        }


def save_trajectory(path: Path, arrays: dict[str, np.ndarray]) -> None:
    # numpy's stub types keyword arrays against `allow_pickle: bool`; they are arrays, saved by name
    np.savez_compressed(path, **arrays)   # type: ignore[arg-type]


@dataclass(frozen=True)
class Trajectory:
    """A loaded `sim_state.npz` (see the module docstring for each array)."""

    path: Path
    meta: dict[str, Any]
    step: np.ndarray
    t: np.ndarray
    physics: np.ndarray
    ctrl: np.ndarray
    posed_qpos: np.ndarray
    frame_row: np.ndarray
    frame_noise: np.ndarray
    frame_frozen: np.ndarray
    final_qpos: np.ndarray
    final_noise: np.ndarray
    final_frozen: np.ndarray

    @property
    def cameras(self) -> list[str]:
        return list(self.meta["cameras"])

    @property
    def geometry(self) -> SceneGeometry:
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in self.meta["scene"].items()}
        return SceneGeometry(**values)

    @property
    def video_size(self) -> tuple[int, int]:
        width, height = self.meta["video_size"]
        return int(width), int(height)

    def frame_requests(self, camera: str, size: tuple[int, int] | None = None) -> list[tuple[float, FrameRequest]]:
        """The recorded video's frames of `camera` as requests (at `size`, default the recorded size): drawn
        by `SimWorld.render_request` in a fresh world they are the recorded video's frames, pixel for pixel."""
        c = self.cameras.index(camera)
        width, height = size or self.video_size
        return [(float(self.t[row]), FrameRequest(camera, width, height, self.posed_qpos[row],
                                                  int(self.frame_noise[i, c]), bool(self.frame_frozen[i, c])))
                for i, row in enumerate(self.frame_row)]

    @property
    def qpos(self) -> np.ndarray:
        """Each logged step's configuration after the step, (S, nq): the full physics state holds the time
        first, then qpos."""
        nq = self.posed_qpos.shape[1]
        return self.physics[:, 1:1 + nq]

    def final_request(self, camera: str, size: tuple[int, int] | None = None) -> FrameRequest:
        """The request of `camera`'s final frame (at `size`, default the recorded final size): drawn by
        `SimWorld.render_request` it is the evidence folder's `final_<camera>.png` at that size."""
        c = self.cameras.index(camera)
        width, height = size or tuple(self.meta.get("final_size") or self.video_size)
        if np.isnan(self.final_qpos[c]).any():
            raise HarnessInputError(self.path, "final_qpos", f"no final frame of {camera} was recorded")
        return FrameRequest(camera, int(width), int(height), self.final_qpos[c], int(self.final_noise[c]),
                            bool(self.final_frozen[c]))

    def gripper_loads(self) -> np.ndarray:
        """Each row's gripper load as the arm reported it with that row's observation (`SimSO101`, Present_Load
        units), for a trajectory recorded before the load was logged: the actuator's force in the state the
        previous step left (its targets held), the first row's at rest (0). Row k's observation is taken
        before row k's step, so it sees the state after row k-1's."""
        from harness.sim.scene import build_model
        from harness.sim.world import actuator_loads

        model = build_model(self.geometry)
        data = mujoco.MjData(model)
        actuator = np.array([model.actuator("gripper").id])
        nq = self.posed_qpos.shape[1]
        loads = np.zeros(len(self.t))
        for row in range(1, len(self.t)):   # the force of the step's last substep: its pose, the step's end speed
            mujoco.mj_setState(model, data, self.physics[row - 1], STATE_SPEC)
            data.qpos[:] = self.posed_qpos[row - 1][:nq]
            data.ctrl[:] = self.ctrl[row - 1]
            mujoco.mj_forward(model, data)
            loads[row] = float(actuator_loads(model, data.actuator_force, actuator)[0])
        return loads

    def rows_at(self, fps: float) -> list[int]:
        """Step rows for a video at `fps` (the first step at or after each frame's time, as the recorder
        picks them)."""
        control_fps = float(self.meta["control_fps"])
        every = max(1, round(control_fps / fps))
        rows, next_tick = [], 0
        for row, t in enumerate(self.t):
            tick = round(float(t) * control_fps)
            if tick >= next_tick:
                rows.append(row)
                next_tick = (tick // every + 1) * every
        return rows

    def check_model(self) -> None:
        """Refuse (one line, exit 2) a trajectory recorded on other model files: its frames would not be its own."""
        here = model_fingerprint()
        recorded = self.meta.get("model_fingerprint")
        if recorded != here:
            raise HarnessInputError(self.path, "model_fingerprint",
                                    f"recorded with other model files ({str(recorded)[:12]}, these are "
                                    f"{here[:12]}): its frames cannot be reproduced here")


def load_trajectory(path: Path) -> Trajectory:
    """Read a `sim_state.npz`; a file that is not one is one clear error (HarnessInputError)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(str(arrays.pop("meta")))
    except Exception as exc:   # a damaged file fails in zipfile, zlib, numpy or json, each its own way
        raise HarnessInputError(path, "sim_state", f"not a readable trajectory file ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise HarnessInputError(path, "meta", "not a JSON object")
    if meta.get("format") != FORMAT:
        raise HarnessInputError(path, "format", f"{meta.get('format')!r}: this harness reads {FORMAT}")
    try:
        trajectory = Trajectory(path, meta, **arrays)
    except TypeError as exc:
        raise HarnessInputError(path, "sim_state", f"missing or unknown arrays ({exc})") from None
    _check_shapes(trajectory)
    return trajectory


def _check_shapes(trajectory: Trajectory) -> None:
    """Arrays and meta that agree with each other, so a damaged file is refused here in one line rather than
    failing half-way through drawing a replay."""
    meta = trajectory.meta
    try:
        cameras = [str(name) for name in meta["cameras"]]
        width, height = (int(v) for v in meta["video_size"])
        fps = (float(meta["control_fps"]), float(meta["video_fps"]))
        trajectory.geometry   # noqa: B018  (the scene must rebuild)
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessInputError(trajectory.path, "meta", f"damaged ({type(exc).__name__}: {exc})") from None
    steps, frames = len(trajectory.t), len(trajectory.frame_row)
    t = trajectory
    problems = [
        (t.step.shape != (steps,), "step"),
        (t.posed_qpos.ndim != 2 or len(t.posed_qpos) != steps, "posed_qpos"),
        (t.physics.ndim != 2 or len(t.physics) != steps or t.physics.shape[1] < 1 + t.posed_qpos.shape[-1], "physics"),
        (t.frame_noise.shape != (frames, len(cameras)) or t.frame_frozen.shape != (frames, len(cameras)),
         "frame_noise"),
        (frames and (t.frame_row.min() < 0 or t.frame_row.max() >= steps), "frame_row"),
        (len(t.final_qpos) != len(cameras) or len(t.final_noise) != len(cameras), "final_qpos"),
        (not (width > 0 and height > 0 and all(np.isfinite(fps)) and min(fps) > 0), "video_size"),
        (not np.isfinite(t.t).all(), "t"),
    ]
    for bad, field in problems:
        if bad:
            raise HarnessInputError(trajectory.path, field, "damaged: its shape or values disagree with the rest")


def parse_view(text: str) -> tuple[float, float, float]:
    """`AZIMUTH,ELEVATION,DISTANCE` (degrees, degrees, metres)."""
    try:
        azimuth, elevation, distance = (float(v) for v in text.split(","))
    except ValueError:
        raise HarnessInputError(None, "--view", f"'{text}' is not AZIMUTH,ELEVATION,DISTANCE") from None
    if not (math.isfinite(azimuth) and -90 <= elevation <= 90 and 0.05 <= distance <= 5):
        raise HarnessInputError(None, "--view", f"'{text}': elevation within -90..90 deg, distance 0.05..5 m")
    return azimuth, elevation, distance
