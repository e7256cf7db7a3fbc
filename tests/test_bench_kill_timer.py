"""The kill-timer benchmark's core at a tiny size (no root): killed tasks are found and
their lateness is measured; no figure is asserted against its target (2 shared cores)."""

from __future__ import annotations

import math

import pytest

import tools.bench.kill_timer as bk
from fogsdn.core.trace import Outcome, TraceRow


def test_lateness_of_killed_tasks_is_measured() -> None:
    r = bk.bench(time_scale=2.0, cutoff=3.0, duration_ms=300.0, seed=1)
    assert r["requests"] > 20 and 0 < r["killed"] < r["requests"]
    lat = r["lateness_model_ms"]
    assert -1e-3 <= lat["p50"] <= lat["p99"] <= lat["max"]  # timers wake late, never early
    assert r["mean_wasted_model_ms"] > 3.0 - 1e-3  # h1 served at least the cutoff


def _row(size: float, wasted_ms: float, outcome: Outcome = Outcome.OK) -> TraceRow:
    hosts = "h1>h2" if size > 3.0 else "h1"
    return TraceRow("r", "c1", "lp", size, 0.0, 1.0, "h2" if size > 3.0 else "h1", outcome,
                    hosts=hosts, wasted_ms=wasted_ms)


def test_kill_figures_by_hand() -> None:
    """Cutoff 3: the tasks of size 5, 8 and 20 wasted 3.2, 3.4 and 4.2 model ms at h1 (late
    by 0.2, 0.4 and 1.2); the small ones and one whose waste was never measured (it timed
    out) do not count."""
    rows = [_row(1.0, math.nan), _row(5.0, 3.2), _row(2.5, math.nan), _row(8.0, 3.4),
            _row(20.0, 4.2), _row(9.0, math.nan, Outcome.TIMEOUT)]
    r = bk.kill_figures(rows, cutoff=3.0, time_scale=4.0)
    assert (r["requests"], r["killed"]) == (6, 3)
    lat = r["lateness_model_ms"]
    assert lat["mean"] == pytest.approx(0.6) and lat["p50"] == pytest.approx(0.4)
    assert lat["max"] == pytest.approx(1.2)
    assert lat["p99"] == pytest.approx(0.4 + 0.98 * 0.8)  # numpy's linear interpolation
    assert r["mean_wasted_model_ms"] == pytest.approx(3.6)
    assert r["lateness_real_ms_mean"] == pytest.approx(2.4)  # 0.6 model ms at 4 real ms each
    assert r["target_mean_wasted_model_ms"] == pytest.approx(3.45)
    assert r["meets_target"] is False  # 3.6 > 3.45
    with pytest.raises(RuntimeError, match="no task above the cutoff"):
        bk.kill_figures(rows[:1], cutoff=3.0, time_scale=4.0)


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert bk.main(["--cutoff", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--cutoff" in err
