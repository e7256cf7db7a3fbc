"""Measured against exact: metrics, fidelity, comparisons, figures."""
