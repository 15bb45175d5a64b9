"""Policies the run engine can drive: LeRobot checkpoints and two scripted built-ins."""
