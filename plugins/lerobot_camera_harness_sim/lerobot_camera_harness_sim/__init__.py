"""LeRobot discovers installed distributions named `lerobot_camera_*` and imports them;
importing the config module registers the `harness_sim` camera type (frames rendered by
`harness emulate-bus --sim`), so `--robot.cameras='{top: {type: harness_sim, camera: top}}'` works."""

from harness.sim.config_sim_camera import HarnessSimCameraConfig
from harness.sim.sim_camera import HarnessSimCamera

__all__ = ["HarnessSimCamera", "HarnessSimCameraConfig"]
