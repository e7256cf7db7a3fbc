"""Seed 003, whole: the city's layout and latencies, its nodes, event model, live run and claims."""
