"""Measuring from pixels: bowl-rim calibration, cube detection, placement error, scene checks."""
