"""Benchmarks: each prints its figures beside a ceiling measured in the same run."""
