"""Live: a worker serving its node's discipline (issue 22), checked on the run's own path.

The FN runs in status U for the whole run (the OFN never in range), so it serves both
classes. Each answered request is replayed at the instant it arrived through the
simulator's own `ClassQueue` (`fogsdn.measure.fidelity`): the live order is the discipline's
when the replay's sojourns match the measured ones up to the emulation's own lateness.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from conftest import scenario_dict

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.measure.fidelity import replay

pytestmark = pytest.mark.emulation


@pytest.mark.parametrize("discipline", ["priority_preemptive", "round_robin"])
def test_the_live_fn_serves_in_its_discipline_order(tmp_path: Path, discipline: str) -> None:
    from fogsdn.live.queueing_run import run_emulation

    sc = parse_scenario(scenario_dict(
        name=f"disc_{discipline}", time_scale=20.0, duration_ms=600, seed=3,
        workload={"lambda_hp": 0.35, "lambda_lp": 0.55, "clients": 2},
        churn={"eta": 0.0, "xi": 0.0, "initial": "unavailable"},
        nodes=[{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20,
                "discipline": discipline},
               {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10}]))
    summary = run_emulation(sc, tmp_path / "run", show_progress=False)
    assert summary["crashed"] is False
    rows = read_trace(tmp_path / "run" / "trace.csv")
    ok = [r for r in rows if r.outcome is Outcome.OK and r.node == "fn"]
    assert len(ok) > 300
    w = {c: statistics.fmean(r.node_ms for r in ok if r.cls == c) for c in ("hp", "lp")}
    if discipline == "priority_preemptive":
        assert w["hp"] < 0.6 * w["lp"], w  # FIFO would give them the same mean
    fid = replay(sc.nodes[:1], rows)["fn"]
    # a few requests may replay differently at a capacity boundary (531 of 534 in one
    # clean-clone CI run): 1 %, where the wrong order moves every request
    slack = max(2, len(ok) // 100)
    assert fid.replayed >= len(ok) - slack
    # admissions: an arrival within the emulation's jitter of a departure at a full node
    # is admitted live and blocked in the replay, or the other way (6 of 533 in a
    # clean-clone CI run on a loaded machine). A wrong capacity or admission rule flips
    # every arrival at a full node: 2 % still fails it. The order is judged by the
    # bias below (a wrong order moves every request by about a service time).
    assert fid.blocked_disagree <= max(4, len(ok) // 50), fid
    # the emulation's own lateness: under 1 % of W at this scale when FIFO (docs/
    # emulation.md); requests served out of the discipline's order move by about a
    # service time each (a simulated trace replayed under the wrong discipline: mean
    # 0.9-1.7 ms, half-width 0.4-0.7 ms on W of about 11 ms)
    assert abs(fid.bias.mean) < 0.05 * fid.ideal_W, (fid.bias, fid.ideal_W)
    assert fid.bias.half_width < 0.05 * fid.ideal_W, (fid.bias, fid.ideal_W)
