"""`harness score DATASET`: a LeRobot v3 dataset recorded with a policy (`lerobot-rollout --strategy.type=episodic`,
`lerobot-record`), scored after the fact into a post-hoc sheet (`models.posthoc`: NOT pre-registered).

Per episode: the anatomy from the joint trace (`run.anatomy`, with the rules that need no gripper load where the
dataset has none), a proposed label from the gripper's positions (`run.proposal`, the rules a real arm's trials are
proposed by) and, given a top camera and a bowl calibration, the final top frame's placement error; then the
operator's label (plain mode: one line per episode naming the episode's video and where in it the episode is;
Enter accepts the proposal). The dataset is checked before anything is written (one line naming what is wrong),
the sheet has one writer (`WriterLock`), and each label is written before the next episode is shown.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessInputError
from harness.models.posthoc import NOTICE, DatasetRef, EpisodeScore, PosthocSheet, load_posthoc, save_posthoc
from harness.models.protocol import JOINT_NAMES, Protocol, Scene, Trial
from harness.models.taxonomy import Label

STATE = "observation.state"
ACTION = "action"
LOAD_FEATURE = "observation.gripper.load"   # a dataset that records the gripper servo's load names it so


def robot_types() -> frozenset[str]:
    """The robot types whose datasets hold an SO-101 follower's joints: LeRobot's follower (as `lerobot-record`
    writes it now, and as it was named before 0.6) and the harness's simulated one."""
    from harness.models.run_settings import SO101_ROBOT_TYPE
    from harness.sim.sim_so101 import SimSO101

    return frozenset({SO101_ROBOT_TYPE, "so101_follower", SimSO101.name})


@dataclass(frozen=True)
class Episode:
    index: int
    fps: float             # the dataset's frame rate (info.json): the proposal's times are counted in frames
    t: np.ndarray          # seconds from the episode's start
    state: np.ndarray      # (frames, 6), the follower's units
    action: np.ndarray     # (frames, 6)
    load: np.ndarray | None
    video: str | None      # the top camera's video file and the episode's span in it
    video_from_s: float | None
    video_to_s: float | None


def dataset_root(source: str) -> Path:
    """A folder, or a Hub id from the local Hub cache (never downloaded: a scoring run reaches no network)."""
    path = Path(source)
    if path.is_dir() or source.count("/") != 1 or source.startswith((".", "/")):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(source, repo_type="dataset", local_files_only=True))
    except LocalEntryNotFoundError:
        raise HarnessInputError(source, None, "neither a dataset folder nor a dataset in the Hub cache (`hf "
                                              "download --repo-type dataset ...` puts it there)") from None


def _names_ok(feature: Any) -> bool:
    names = feature.get("names") if isinstance(feature, dict) else None
    if isinstance(names, dict):   # older datasets: {"motors": [...]}
        names = next(iter(names.values()), None)
    return list(names or []) == [f"{n}.pos" for n in JOINT_NAMES]


def check_dataset(root: Path) -> tuple[dict[str, Any], Any, Any]:
    """info.json, the frames and the episodes table; refused in one line when the dataset cannot be scored."""
    import pandas as pd

    from harness.app.dataset_command import check_dataset_meta

    info = check_dataset_meta(root)
    info_path = root / "meta" / "info.json"
    robot = info.get("robot_type")
    if robot not in robot_types():
        raise HarnessInputError(info_path, "robot_type", f"{robot!r}: not an SO-101 follower's dataset (expected one "
                                f"of {', '.join(sorted(robot_types()))})")
    features = info["features"]
    assert isinstance(features, dict)
    for key in (STATE, ACTION):
        if key not in features:
            raise HarnessInputError(info_path, f"features.{key}", "missing: the joint trace is what is scored")
        if not _names_ok(features[key]):
            raise HarnessInputError(info_path, f"features.{key}.names", "not the SO-101 follower's six joints "
                                    f"({', '.join(f'{n}.pos' for n in JOINT_NAMES)})")
    try:
        data = pd.concat([pd.read_parquet(p) for p in sorted((root / "data").glob("*/*.parquet"))], ignore_index=True)
        episodes = pd.concat([pd.read_parquet(p) for p in sorted((root / "meta" / "episodes").glob("*/*.parquet"))],
                             ignore_index=True)
    except (ValueError, OSError) as exc:
        raise HarnessInputError(root, None, f"its data or episode files cannot be read ({exc})") from None
    if episodes.empty:
        raise HarnessInputError(root / "meta" / "episodes", None, "no episodes")
    counts = data.groupby("episode_index").size() if not data.empty else pd.Series(dtype=int)
    empty = [int(e) for e in episodes["episode_index"] if int(counts.get(int(e), 0)) == 0]
    if empty:
        raise HarnessInputError(root, "episode_index", f"episode {empty[0]} has no frames"
                                + (f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""))
    return info, data, episodes


def top_camera(info: dict[str, Any], wanted: str) -> str | None:
    key = f"observation.images.{wanted}"
    return key if info["features"].get(key, {}).get("dtype") in ("video", "image") else None


def episodes_of(root: Path, info: dict[str, Any], data: Any, episodes: Any, camera: str | None) -> Iterator[Episode]:
    for _, row in episodes.sort_values("episode_index").iterrows():
        index = int(row["episode_index"])
        frames = data[data["episode_index"] == index].sort_values("frame_index")
        t = frames["timestamp"].to_numpy(dtype=float)
        load = frames[LOAD_FEATURE].to_numpy(dtype=float) if LOAD_FEATURE in frames else None
        video = start = end = None
        if camera is not None and f"videos/{camera}/chunk_index" in row:
            video = str(root / str(info["video_path"]).format(
                video_key=camera, chunk_index=int(row[f"videos/{camera}/chunk_index"]),
                file_index=int(row[f"videos/{camera}/file_index"])))
            start, end = float(row[f"videos/{camera}/from_timestamp"]), float(row[f"videos/{camera}/to_timestamp"])
        yield Episode(index, float(info["fps"]), t - t[0], np.stack(frames[STATE].to_numpy()),
                      np.stack(frames[ACTION].to_numpy()), load, video, start, end)


def last_frame(episode: Episode) -> np.ndarray | None:
    """The episode's final top frame, decoded by LeRobot's own video decoding."""
    if episode.video is None or episode.video_to_s is None:
        return None
    from lerobot.datasets.video_utils import decode_video_frames

    at = max(episode.video_from_s or 0.0, episode.video_to_s - 1e-3 - 1.0 / 60)
    frame = decode_video_frames(Path(episode.video), [at], tolerance_s=0.05)[0]
    return np.ascontiguousarray((np.transpose(frame.numpy(), (1, 2, 0)) * 255).round().astype(np.uint8))


def score_episode(episode: Episode, scene: Scene, stall_limit_s: float, grasp_points: Any, grasp_point: Any,
                  proposer: Any, frame: np.ndarray | None) -> tuple[Any, Any]:
    """The episode's anatomy (no cube start is known: the trained spot stands in) and proposal."""
    from harness.run.anatomy import anatomy_from_rows
    from harness.run.proposal import FinalView, GripperTrace, propose
    from harness.sim.units import GRIPPER_LOAD_KEY

    rows: list[dict[str, Any]] = []
    for i, t in enumerate(episode.t):
        row: dict[str, Any] = {"t": float(t), "action.gripper.pos": float(episode.action[i][-1])}
        row.update({f"obs.{n}.pos": float(v) for n, v in zip(JOINT_NAMES, episode.state[i], strict=True)})
        if episode.load is not None:
            row[f"obs.{GRIPPER_LOAD_KEY}"] = float(episode.load[i])
        rows.append(row)
    anatomy = anatomy_from_rows(rows, grasp_points, scene.trained_cube_xy_cm, (0.0, 0.0), scene.bowl_xy_cm,
                                stall_limit_s)
    trace = proposer.trace() if proposer is not None else GripperTrace(grasp_point, fps=episode.fps)
    for i, state in enumerate(episode.state):
        trace.see({n: float(v) for n, v in zip(JOINT_NAMES, state, strict=True)},
                  float(episode.load[i]) if episode.load is not None else None)
    if proposer is not None:
        proposal = proposer.propose(trace, frame)
    else:
        bx, by = scene.bowl_xy_cm
        proposal = propose(trace, FinalView(None), (bx / 100, by / 100), scene.bowl_diameter_cm / 200,
                           scene.cube_edge_cm / 200)
    return anatomy, proposal


def episode_frames(episode: Episode, fps: float) -> list[np.ndarray]:
    """The episode's top camera frames at `fps` (for the labelling screen's loop), decoded by LeRobot."""
    if episode.video is None or episode.video_from_s is None or episode.video_to_s is None:
        return []
    from lerobot.datasets.video_utils import decode_video_frames

    span = max(0.0, episode.video_to_s - episode.video_from_s - 1e-3)
    times = [episode.video_from_s + float(t) for t in np.arange(0.0, span, 1.0 / fps)] or [episode.video_from_s]
    frames = decode_video_frames(Path(episode.video), times, tolerance_s=0.5 / fps + 0.05)
    return [np.ascontiguousarray((np.transpose(f.numpy(), (1, 2, 0)) * 255).round().astype(np.uint8))
            for f in frames]


def labelling_app(pending: list[tuple[Episode, Any, Any]], record: Callable[[int, Label, str], None],
                  header: str) -> Any:
    """The screen that plays each episode's video beside its proposal (`tui.score_app`)."""
    from harness.tui.score_app import PLAY_FPS, EpisodeView, ScoreDatasetApp

    def frames_of(episode: Episode) -> Callable[[], list[np.ndarray]]:
        return lambda: episode_frames(episode, PLAY_FPS)

    views = [EpisodeView(episode.index, f"episode {episode.index}: {len(episode.t)} frames, "
                                        f"{float(episode.t[-1]):.1f} s", proposal.label, proposal.line(),
                         anatomy.summary if anatomy is not None else "no anatomy", frames_of(episode))
             for episode, anatomy, proposal in pending]
    return ScoreDatasetApp(views, lambda index, label: record(index, label, "operator"), header)


def ask_plain(episode: Episode, proposal: Any, read: Callable[[str], str]) -> tuple[Label, str]:
    """One episode at the terminal: its video (file and span), the proposal; Enter accepts it, a label's key
    (s n d w v) overrides it. Returns the label and who gave it."""
    where = (f"video {episode.video} from {episode.video_from_s:.2f} s to {episode.video_to_s:.2f} s"
             if episode.video else "no video in the dataset")
    keys = " ".join(f"{label.key}={label.display}" for label in Label)
    while True:
        answer = read(f"episode {episode.index}: {proposal.line()}; {where}. Enter accepts, or {keys}: ").strip()
        if not answer:
            return proposal.label, "operator"
        label = Label.by_key(answer.lower())
        if label is not None:
            return label, "operator"
        print(f"  '{answer}' is not one of Enter, {keys}", file=sys.stderr)


def score_from_args(args: argparse.Namespace, read: Callable[[str], str] = input,
              run_app: Callable[[Any], None] | None = None) -> int:
    """`read`: the plain mode's prompt; `run_app`: what runs the labelling screen (its `run()`; a test drives it)."""
    from harness.models.protocol import load_protocol
    from harness.run.anatomy import GraspPoints
    from harness.run.proposal import so101_grasp_point
    from harness.storage.lock import WriterLock

    root = dataset_root(args.dataset)
    info, data, episodes = check_dataset(root)
    protocol = load_protocol(args.protocol) if args.protocol else scene_protocol()
    scene, stall = protocol.scene, protocol.stall_limit_s
    camera = top_camera(info, args.top_camera)
    proposer = None
    if args.bowl_calibration:
        if camera is None:
            raise HarnessInputError(root, f"features.observation.images.{args.top_camera}",
                                    "missing: --bowl-calibration measures the final top frame")
        proposer = placement_proposer(Path(args.bowl_calibration), protocol, float(info["fps"]))
    info_bytes = (root / "meta" / "info.json").read_bytes()
    ref = DatasetRef(source=args.dataset, root=str(root.resolve()), robot_type=str(info["robot_type"]),
                     fps=float(info["fps"]), episodes=len(episodes), info_sha256=hashlib.sha256(info_bytes).hexdigest(),
                     gripper_load=LOAD_FEATURE in info["features"], top_camera=camera,
                     placement_measured=proposer is not None)
    path = Path(args.scoresheet) if args.scoresheet else Path("scoresheets") / f"posthoc-{root.resolve().name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    with WriterLock(path):
        if path.exists():
            sheet = load_posthoc(path)
            if sheet.dataset.info_sha256 != ref.info_sha256 or sheet.dataset.root != ref.root:
                raise HarnessInputError(path, "dataset", "was scored from another dataset (or this one has changed "
                                        "since): name another --scoresheet")
        else:
            sheet = PosthocSheet(dataset=ref, scene=scene)
            save_posthoc(path, sheet)
        grasp_points, grasp_point = GraspPoints(), so101_grasp_point()
        done = sheet.labelled()
        pending: list[tuple[Episode, Any, Any]] = []
        for episode in episodes_of(root, info, data, episodes, camera):
            if episode.index in done:
                continue
            frame = last_frame(episode) if proposer is not None else None
            pending.append((episode, *score_episode(episode, scene, stall, grasp_points, grasp_point, proposer,
                                                    frame)))
        by_index = {episode.index: (episode, anatomy, proposal) for episode, anatomy, proposal in pending}

        def record(index: int, label: Label, who: str) -> None:
            nonlocal sheet
            episode, anatomy, proposal = by_index[index]
            sheet = sheet.with_score(EpisodeScore(
                episode=index, frames=len(episode.t), duration_s=round(float(episode.t[-1]), 3),
                label=label, scored_by="proposal" if who == "proposal" else "operator", proposal=proposal.record(),
                placement_error_cm=round(proposal.placement_error_cm, 3)
                if proposal.placement_error_cm is not None and label is Label.SUCCESS else None,
                anatomy=anatomy))
            save_posthoc(path, sheet)   # before the next episode is shown

        if args.accept_proposals:
            for episode, _, proposal in pending:
                record(episode.index, proposal.label, "proposal")
        elif args.plain or (run_app is None and not (sys.stdin.isatty() and sys.stdout.isatty())):
            for episode, _, proposal in pending:
                record(episode.index, ask_plain(episode, proposal, read)[0], "operator")
        else:
            app = labelling_app(pending, record, f"{NOTICE.split(':')[0]}: {args.dataset}")
            (run_app or (lambda screen: screen.run()))(app)
    print("\n".join(sheet.report_lines()))
    print(f"wrote {path}")
    return 0


def placement_proposer(calibration: Path, protocol: Protocol, fps: float) -> Any:
    """The final-frame proposer for a dataset recorded at `fps`."""
    from harness.app.operator_parts import placement_files
    from harness.models.run_request import PlacementRequest
    from harness.run.operator_trial import Proposer
    from harness.run.proposal import so101_grasp_point

    files = placement_files(PlacementRequest(bowl_calibration=calibration), protocol)
    assert files is not None   # a calibration was given
    return Proposer(files.view, so101_grasp_point(), fps=fps)


def scene_protocol() -> Protocol:
    """The default scene as a protocol, where none is named (only its scene and stall limit are read)."""
    from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS, DEFAULT_TASK

    return Protocol(name="posthoc", task=DEFAULT_TASK, success_definition=DEFAULT_SUCCESS,
                    start_pose=dict(DEFAULT_START_POSE), trials=[Trial(index=1, dx_cm=0.0, dy_cm=0.0)])
