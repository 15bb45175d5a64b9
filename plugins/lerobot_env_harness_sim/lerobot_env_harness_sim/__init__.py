"""LeRobot discovers installed distributions named `lerobot_env_*` and imports them; importing the environment
module registers the `harness_so101` env type (and the gym id `harness/SO101PickPlace-v0`)."""

from harness.app.lerobot_env import HarnessSimEnv, HarnessSimEnvConfig

__all__ = ["HarnessSimEnv", "HarnessSimEnvConfig"]
