"""Real robots: LeRobot's SO-101 follower, on the project's re-locking Feetech bus."""
