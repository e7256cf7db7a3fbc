"""Policy epochs (fogsdn.measure.policy_epochs): the log of swaps and each span's comparison
with the exact model for its own policy."""

from __future__ import annotations

import math

import pytest
from conftest import scenario_dict

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, TraceRow
from fogsdn.exact.model_params import exact_prediction
from fogsdn.measure.policy_epochs import EpochLog, epoch_comparisons, epochs_table, rows_in


def test_epoch_log_closes_each_span() -> None:
    log = EpochLog()
    log.start("prioritized", {"name": "prioritized"}, 0.0)
    log.start("nodiff", {"name": "nodiff", "alpha": 0.5}, 40.0)
    log.start("basic", {"name": "basic"}, 30.0)  # a clock read early: never before the last
    log.close(100.0)
    eps = log.to_list()
    assert [(e["policy"], e["from_ms"], e["to_ms"]) for e in eps] == [
        ("prioritized", 0.0, 40.0), ("nodiff", 40.0, 40.0), ("basic", 40.0, 100.0)]
    assert eps[1]["spec"] == {"name": "nodiff", "alpha": 0.5}
    log.close(200.0)  # closed once
    assert log.to_list()[-1]["to_ms"] == 100.0


def _row(i: int, cls: str, t: float, node_ms: float, outcome: Outcome = Outcome.OK) -> TraceRow:
    return TraceRow(f"r{i}", "c1", cls, 1.0, t, t + node_ms, "fn", outcome, node_ms, node_ms)


def test_rows_in() -> None:
    rows = [_row(i, "hp", float(i), 1.0) for i in range(10)]
    assert [r.t_send for r in rows_in(rows, 2.0, 5.0)] == [2.0, 3.0, 4.0]
    assert len(rows_in(rows, 8.0, None)) == 2


def test_each_epoch_against_its_own_policy() -> None:
    sc = parse_scenario(scenario_dict(warmup_ms=0))
    rows = ([_row(i, c, float(i), 1.0) for i in range(100) for c in ("hp", "lp")]
            + [_row(1000 + i, c, 100.0 + i, 3.0) for i in range(100) for c in ("hp", "lp")]
            + [_row(5000, "lp", 150.0, math.nan, Outcome.BLOCKED)])
    epochs = [{"policy": "prioritized", "from_ms": 0.0, "to_ms": 100.0,
               "spec": {"name": "prioritized", "alpha": 0.5}},
              {"policy": "nodiff", "from_ms": 100.0, "to_ms": 200.0,
               "spec": {"name": "nodiff", "alpha": 0.5}}]
    blocks = epoch_comparisons(sc, rows, epochs)
    assert [b["policy"] for b in blocks] == ["prioritized", "nodiff"]
    assert blocks[0]["requests"] == 200 and blocks[1]["requests"] == 201
    assert blocks[0]["measured"]["hp"]["W"] == pytest.approx(1.0)
    assert blocks[1]["measured"]["hp"]["W"] == pytest.approx(3.0)
    assert blocks[1]["spec"] == {"name": "nodiff", "alpha": 0.5}
    for b, name in zip(blocks, ("prioritized", "nodiff"), strict=True):
        want = exact_prediction(sc.with_overrides({"policy.name": name})).to_dict()
        assert b["predicted"]["hp"]["W"] == pytest.approx(want["hp"]["W"])  # type: ignore[index]
        assert b["comparison"]["lp"]["W"]["predicted"] == pytest.approx(want["lp"]["W"])  # type: ignore[index]
    # the two schemes predict differently: each span has its own prediction
    assert blocks[0]["predicted"]["lp"]["W"] != pytest.approx(blocks[1]["predicted"]["lp"]["W"])
    text = epochs_table(sc, blocks)
    assert "epoch prioritized [0, 100)" in text and "epoch nodiff [100, 200)" in text


def test_epoch_outside_the_model_says_why(tmp_path) -> None:  # noqa: ANN001
    sc = parse_scenario(scenario_dict())
    blocks = epoch_comparisons(sc, [_row(0, "hp", 1.0, 1.0)],
                               [{"policy": "least_loaded", "from_ms": 0.0, "to_ms": None,
                                 "spec": {"name": "least_loaded"}}])
    assert blocks[0]["predicted"] is None and blocks[0]["outside_model"]
    assert "outside the model" in epochs_table(sc, blocks)


def test_compare_run_splits_the_comparison_per_epoch(tmp_path) -> None:  # noqa: ANN001
    import json

    from fogsdn.core.trace import write_trace
    from fogsdn.measure.compare import compare_run

    sc = parse_scenario(scenario_dict(warmup_ms=0))
    (tmp_path / "scenario.yaml").write_text(sc.to_yaml())
    rows = [_row(i, c, float(i), 1.0 + (i % 3)) for i in range(200) for c in ("hp", "lp")]
    write_trace(tmp_path / "trace.csv", rows)
    epochs = [{"policy": "prioritized", "from_ms": 0.0, "to_ms": 120.0,
               "spec": {"name": "prioritized", "alpha": 0.5}},
              {"policy": "nodiff", "from_ms": 120.0, "to_ms": 200.0,
               "spec": {"name": "nodiff", "alpha": 0.5}}]
    (tmp_path / "summary.json").write_text(json.dumps({"policy_epochs": epochs}))
    text = compare_run(tmp_path, plot=False)
    out = json.loads((tmp_path / "summary.json").read_text())["policy_epochs"]
    assert [(e["policy"], e["requests"]) for e in out] == [("prioritized", 240),
                                                           ("nodiff", 160)]
    assert all(e["comparison"]["hp"]["W"]["predicted"] > 0 for e in out)
    assert "epoch nodiff [120, 200)" in text
    top = json.loads((tmp_path / "summary.json").read_text())
    # the whole run mixes two policies: no single prediction stands beside it
    assert top["predicted"] is None and "comparison" not in top
    assert "swapped" in top["not_compared"] and "not compared" in text
    assert top["measured"]["hp"]["count"] == 200  # the whole run, as measured
    compare_run(tmp_path, plot=False)  # again, over its own output: the same epochs
    again = json.loads((tmp_path / "summary.json").read_text())["policy_epochs"]
    assert [e["requests"] for e in again] == [240, 160]


def test_one_epoch_keeps_the_top_level_comparison(tmp_path) -> None:  # noqa: ANN001
    import json

    from fogsdn.core.trace import write_trace
    from fogsdn.measure.compare import compare_run

    sc = parse_scenario(scenario_dict(warmup_ms=0))
    (tmp_path / "scenario.yaml").write_text(sc.to_yaml())
    write_trace(tmp_path / "trace.csv", [_row(i, "hp", float(i), 1.0) for i in range(50)])
    epochs = [{"policy": "prioritized", "from_ms": 0.0, "to_ms": None,
               "spec": {"name": "prioritized"}}]
    (tmp_path / "summary.json").write_text(json.dumps({"policy_epochs": epochs}))
    compare_run(tmp_path, plot=False)
    top = json.loads((tmp_path / "summary.json").read_text())
    assert top["comparison"]["hp"]["W"]["predicted"] > 0 and "not_compared" not in top
