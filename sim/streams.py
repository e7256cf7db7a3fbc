"""Kept for callers of the old place: the seeded streams live in `fogsdn.streams`, where
every engine (the simulator, the live clients and the churn schedule) draws from them."""

from fogsdn.streams import (
    BLOCK,
    Stream,
    mean_size,
    numpy_stream,
    python_stream,
    replication_seed,
    size_block,
)

__all__ = ["BLOCK", "Stream", "mean_size", "numpy_stream", "python_stream", "replication_seed",
           "size_block"]
