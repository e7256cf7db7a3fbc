"""Rigs for tests and benchmarks: fakes, namespace test networks, traffic probes.

Not installed with the product; importable from the repository root, as scripts/ is.
"""
