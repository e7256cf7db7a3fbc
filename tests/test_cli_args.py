"""The shared argument checks: one message per flag, whichever CLI asks."""

from __future__ import annotations

import pytest

from fogsdn.core.cli_args import ArgumentError, duration_span_ms, require_count


def test_duration_spans_model_ms_at_the_time_scale() -> None:
    assert duration_span_ms(2.0, 5.0) == 400.0
    with pytest.raises(ArgumentError, match="--duration: must be > 0 seconds"):
        duration_span_ms(0.0, 5.0)


def test_require_count_names_the_flag() -> None:
    require_count("--requests", None)
    require_count("--requests", 1)
    with pytest.raises(ArgumentError, match="--replications must be >= 1"):
        require_count("--replications", 0)
