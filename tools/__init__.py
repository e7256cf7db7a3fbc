"""Benchmarks' and tests' rigs, not installed."""
