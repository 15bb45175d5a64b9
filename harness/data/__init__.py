"""Datasets before GPU time: integrity validation, held-out splits, and small synthetic datasets."""
