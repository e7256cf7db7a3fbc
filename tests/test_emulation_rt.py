"""Live: the controller times nearly every answered connection, SYN to the server's FIN,
within 5 % of what the clients measured on the same connections, per node, for a
proactive policy (select groups: header copies of SYN and FIN) and a per-request one
(the decision's packet-in is the SYN)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from fogsdn.scenario import load_scenario
from fogsdn.trace import Outcome, read_trace

pytestmark = pytest.mark.emulation


def _run(tmp: Path, policy: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    from runner.queueing_run import run_emulation

    sc = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(
        {"duration_ms": 2000.0, "warmup_ms": 100.0, "policy": policy})
    out = tmp / str(policy["name"])
    return out, run_emulation(sc, out, show_progress=False)


@pytest.mark.parametrize("policy", [{"name": "prioritized"},
                                    {"name": "threshold", "params": {"threshold": 2}}])
def test_the_controller_times_answered_requests_as_the_clients_do(
        tmp_path: Path, policy: dict[str, Any]) -> None:
    out, summary = _run(tmp_path, policy)
    assert summary["crashed"] is False
    rt = summary["rt_measurement"]
    answered = sum(1 for r in read_trace(out / "trace.csv") if r.outcome is Outcome.OK)
    assert rt["answered"] >= 0.9 * answered > 500  # every answered row has its port
    assert rt["coverage"] >= 0.98, rt
    assert set(rt["nodes"]) == {"fn", "ofn1"}
    for node, b in rt["nodes"].items():
        assert b["count"] > 50, node
        assert abs(b["error"]) <= 0.05, (node, b)
    assert summary["rt_measurement_error"] == max(abs(b["error"]) for b in rt["nodes"].values())
    header = (out / "controller-rt.csv").read_text().splitlines()[0]
    assert header == "client,client_port,node,t_syn,t_fin,rt_ms,span_ms,leg_ms"
