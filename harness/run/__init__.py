"""Running a protocol: the control loop, fault detection, evidence, and the trial engine."""
