"""LeRobot discovers installed distributions named `lerobot_robot_*` and imports them;
importing the config module registers the `harness_so101_sim` robot type."""

from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101

__all__ = ["SimSO101", "SimSO101Config"]
