"""Live: the controller times answered connections, SYN to the server's FIN plus the
client's leg, within 5 % of what the clients measured on the same connections, per node
(7 % here: a loaded machine stretches the FN's reading):
every connection for a proactive policy (select groups: header copies of SYN and FIN),
one in four for a per-request one (the decision's packet-in is the SYN; its controller
is on every connection's path, so the FIN copies are sampled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from fogsdn.controller.pipeline import sample_mask
from fogsdn.core.scenario import load_scenario
from fogsdn.core.trace import Outcome, read_trace

pytestmark = pytest.mark.emulation


def _run(tmp: Path, policy: dict[str, Any], measure_rt: int) -> tuple[Path, dict[str, Any]]:
    from fogsdn.live.queueing_run import LiveOptions, run_emulation

    # a sample needs a longer run for enough timed connections at the OFN
    sc = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(
        {"duration_ms": 2000.0 * measure_rt ** 0.5, "warmup_ms": 100.0, "policy": policy})
    out = tmp / str(policy["name"])
    return out, run_emulation(sc, out, show_progress=False,
                              options=LiveOptions(measure_rt=measure_rt))


@pytest.mark.parametrize(("policy", "one_in"), [
    ({"name": "prioritized"}, 1), ({"name": "threshold", "params": {"threshold": 2}}, 4)])
def test_the_controller_times_answered_requests_as_the_clients_do(
        tmp_path: Path, policy: dict[str, Any], one_in: int) -> None:
    out, summary = _run(tmp_path, policy, one_in)
    assert summary["crashed"] is False
    rt = summary["rt_measurement"]
    answered = sum(1 for r in read_trace(out / "trace.csv") if r.outcome is Outcome.OK)
    assert rt["answered"] >= 0.9 * answered > 500  # every answered row has its port
    rows = (out / "controller-rt.csv").read_text().splitlines()
    assert rows[0] == "client,client_port,node,t_syn,t_fin,rt_ms,span_ms,leg_ms"
    ports = [int(r.split(",")[1]) for r in rows[1:]]
    mask = sample_mask(one_in)
    assert all(not p & mask for p in ports)  # only the sampled connections
    if one_in == 1:
        assert rt["coverage"] >= 0.98, rt
    else:  # the kernel's port choice decides the share; nearly every sampled one is timed
        sampled = sum(1 for r in read_trace(out / "trace.csv") if r.outcome is Outcome.OK
                      and r.ports and ">" not in r.ports and not int(r.ports) & mask
                      and r.t_send >= 100.0)
        # a client port reused towards the same worker gets another port from conntrack
        # (docs/learning.md, "Response time measured by the controller"): before its FIN
        # was paired by acknowledgment number, 4-6 % of sampled connections went untimed
        assert rt["matched"] >= 0.98 * sampled > 100, (rt["matched"], sampled)
    assert set(rt["nodes"]) == {"fn", "ofn1"}
    for node, b in rt["nodes"].items():
        assert b["count"] > 30, node
        # the target is 5 % (met on a quiet machine: -2.7 % and -0.9 %); the FN's
        # reading drifts short with load (-4.9 % at load average 21), so the guard on a
        # shared CI machine is 7 %
        assert abs(b["error"]) <= 0.07, (node, b)
    assert summary["rt_measurement_error"] == max(abs(b["error"]) for b in rt["nodes"].values())
