"""`harness score --bowl-calibration`: an episode's final top frame measured against the bowl's rim, as a real arm's
proposal measures it: the cube's placement error, and whether it ended in the bowl (issue 60)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.app.score_command import Episode, placement_proposer, scene_protocol, score_episode
from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES
from harness.run.anatomy import GraspPoints
from harness.run.proposal import Reason, so101_grasp_point
from harness.sim.world import SimWorld
from harness.vision.calibration import BowlCalibration
from harness.vision.rim import fit_rim


def test_the_final_top_frame_gives_the_placement_and_whether_the_cube_is_in_the_bowl(tmp_path: Path) -> None:
    gc.collect()   # renderers earlier tests left unclosed are freed now, not mid-draw (gl_draw.py)
    world = SimWorld()
    world.set_arm(DEFAULT_START_POSE)
    world.place_cube((0.60, 0.40), 0.0)   # off the table's view: the empty scene the rim is fitted on
    empty = world.render("top", 640, 480)
    BowlCalibration(fit_rim(empty).rim, 11.5, "auto", "bowl.png", "").save(tmp_path / "bowl.yaml", empty)
    protocol = scene_protocol()
    bowl = protocol.scene.bowl_xy_cm
    world.place_cube((bowl[0] / 100 + 0.01, bowl[1] / 100), 0.0)   # 1 cm from the bowl's centre, inside
    in_bowl = world.render("top", 640, 480)
    world.close()

    pose = np.array([DEFAULT_START_POSE[n] for n in JOINT_NAMES])
    episode = Episode(0, 30.0, np.arange(30) / 30, np.tile(pose, (30, 1)), np.tile(pose, (30, 1)), None, None, None,
                      None)
    proposer = placement_proposer(tmp_path / "bowl.yaml", protocol, episode.fps)
    _, proposal = score_episode(episode, protocol.scene, 5.0, GraspPoints(), so101_grasp_point(), proposer, in_bowl)
    assert Reason.CUBE_IN_BOWL in proposal.reasons
    assert proposal.placement_error_cm is not None and abs(proposal.placement_error_cm - 1.0) < 0.6
