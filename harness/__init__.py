"""harness: evaluate learned SO-101 policies against pre-registered protocols."""

__version__ = "0.1.0"
