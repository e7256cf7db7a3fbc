"""The kill-timer benchmark's core at a tiny size (no root): killed tasks are found and
their lateness is measured; no figure is asserted against its target (2 shared cores)."""

from __future__ import annotations

import bench_kill_timer as bk
import pytest


def test_lateness_of_killed_tasks_is_measured() -> None:
    r = bk.bench(time_scale=2.0, cutoff=3.0, duration_ms=300.0, seed=1)
    assert r["requests"] > 20 and 0 < r["killed"] < r["requests"]
    lat = r["lateness_model_ms"]
    assert -1e-3 <= lat["p50"] <= lat["p99"] <= lat["max"]  # timers wake late, never early
    assert r["mean_wasted_model_ms"] == pytest.approx(3.0 + lat["mean"])
    assert r["target_mean_wasted_model_ms"] == pytest.approx(3.0 * 1.15)


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert bk.main(["--cutoff", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--cutoff" in err
