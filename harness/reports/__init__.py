"""Turning scoresheets into answers: summaries now, plots and comparisons built on them."""
