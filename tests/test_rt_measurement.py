"""The controller's measured response time against the clients' (fogsdn.measure.rt_measurement)."""

from __future__ import annotations

import math

import pytest

from fogsdn.core.trace import Outcome, TraceRow
from fogsdn.measure.rt_measurement import ControllerRt, compare_rt, rt_report_line


def _row(client: str, port: str, t_send: float, response: float, node: str = "fn",
         outcome: Outcome = Outcome.OK) -> TraceRow:
    return TraceRow(f"{client}-{t_send}", client, "hp", 1.0, t_send, t_send + response, node,
                    outcome, response, ports=port)


def test_same_connections_are_compared_per_node() -> None:
    rows = [_row("c1", "40000", 10.0, 2.0), _row("c1", "40002", 11.0, 4.0),
            _row("c2", "40000", 10.0, 10.0, "ofn1"),
            _row("c2", "40004", 12.0, 5.0, outcome=Outcome.BLOCKED),  # not answered
            _row("c1", "40006", 13.0, 3.0),  # never timed by the controller
            _row("c1", "40008>40010", 14.0, 9.0)]  # two stages: not compared
    measured = [ControllerRt("c1", 40000, "fn", 10.2, 1.9),
                # the same port reused much earlier: another connection
                ControllerRt("c1", 40002, "fn", 2.0, 100.0),
                ControllerRt("c1", 40002, "fn", 11.1, 4.3),
                ControllerRt("c2", 40000, "ofn1", 10.1, 10.5)]
    rep = compare_rt(measured, rows)
    assert (rep["answered"], rep["matched"]) == (4, 3)
    assert rep["coverage"] == pytest.approx(0.75)
    assert rep["nodes"]["fn"]["count"] == 2
    assert rep["nodes"]["fn"]["controller_ms"] == pytest.approx(3.1)
    assert rep["nodes"]["fn"]["clients_ms"] == pytest.approx(3.0)
    assert rep["nodes"]["ofn1"]["error"] == pytest.approx(0.05)
    assert rep["rt_measurement_error"] == pytest.approx(max(0.1 / 3.0, 0.05))
    assert "rt_measurement_error 5.0 %" in rt_report_line(rep)


def test_warmup_and_nothing_matched() -> None:
    rows = [_row("c1", "40000", 1.0, 2.0)]
    rep = compare_rt([ControllerRt("c1", 40000, "fn", 1.0, 2.0)], rows, warmup_ms=5.0)
    assert rep["answered"] == 0 and rep["overall"] is None
    assert math.isnan(rep["rt_measurement_error"]) and "nothing matched" in rt_report_line(rep)
