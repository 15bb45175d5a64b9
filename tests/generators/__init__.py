"""Generators of test and benchmark data (rendered frames with known truth, the measurement stress set, synthetic
and deliberately broken LeRobot datasets): used by tests/ and benchmarks/, never by the installed package."""
