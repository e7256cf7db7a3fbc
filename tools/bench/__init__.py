"""The benchmarks (docs/benchmarks.md): each module's `main` is run by its thin entry point
`scripts/bench_<name>.py`, which sets up the machine first. Not installed.
"""
