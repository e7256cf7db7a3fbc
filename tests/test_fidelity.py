from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from fogsdn.core.scenario import NodeSpec, Role
from fogsdn.core.trace import Outcome, TraceRow
from fogsdn.measure.fidelity import replay_node


def _fifo_end(t: float, size: float, capacity: int, ends: list[float]) -> float | None:
    """An ideal FIFO single-server node written apart from the code under test (which
    replays through `fogsdn.models.service_queue`): the end of a request arriving at `t` given the
    ends of those admitted before it (appended to), None when `capacity` are still in."""
    if sum(1 for e in ends if e > t) >= capacity:
        return None
    end = max([t, *ends]) + size
    ends.append(end)
    return end


def _row(i: int, t: float, size: float, end: float | None, overshoot: float) -> TraceRow:
    """A request reaching the node at `t`, blocked (end None) or replying `overshoot` late."""
    if end is None:
        return TraceRow(f"r{i}", "c1", "hp", size, t, t, "fn", Outcome.BLOCKED, 0.01,
                        nominal_ms=size)
    node_ms = end - t + overshoot
    return TraceRow(f"r{i}", "c1", "hp", size, t - 0.01, end + overshoot, "fn", Outcome.OK,
                    node_ms + 0.02, node_ms, end - size - t, size + overshoot, size)


def _ideal_rows(n: int, overshoot: float, seed: int = 7) -> list[TraceRow]:
    """Requests through an ideal FIFO node of capacity 3, replies `overshoot` late."""
    rng = random.Random(seed)
    rows, t, ends = [], 0.0, []
    for i in range(n):
        t += rng.expovariate(0.8)
        size = rng.expovariate(1.0)
        rows.append(_row(i, t, size, _fifo_end(t, size, 3, ends), overshoot))
    return rows


SPEC = NodeSpec(name="fn", role=Role.FN, mu=1.0, capacity=3)


def test_a_perfect_node_has_no_bias() -> None:
    f = replay_node(SPEC, _ideal_rows(3000, 0.0))
    assert f.replayed > 2000 and f.blocked_disagree == 0
    assert f.bias.mean == pytest.approx(0.0, abs=1e-9)


def test_replay_by_hand() -> None:
    """Capacity 2, service 1 each: arrivals at 0, 0.5, 1 and 3 wait 0, 0.5, 1 and 0 (ideal
    sojourns 1, 1.5, 2, 1); the one at 1.5 finds two in the node and is blocked."""
    spec = NodeSpec(name="fn", role=Role.FN, mu=1.0, capacity=2)
    ends = {0.0: 1.0, 0.5: 2.0, 1.0: 3.0, 1.5: None, 3.0: 4.0}
    rows = [_row(i, t, 1.0, end, 0.25) for i, (t, end) in enumerate(ends.items())]
    f = replay_node(spec, rows)
    assert (f.replayed, f.blocked_disagree) == (4, 0)
    assert f.ideal_W == pytest.approx((1 + 1.5 + 2 + 1) / 4)
    assert f.measured_W == pytest.approx(f.ideal_W + 0.25)
    # the one at 1.5 answered live: the replay disagrees (it blocks it)
    rows[3] = _row(3, 1.5, 1.0, 4.0, 0.0)
    assert replay_node(spec, rows).blocked_disagree == 1


def test_late_replies_show_as_bias_of_that_size() -> None:
    f = replay_node(SPEC, _ideal_rows(3000, 0.05))
    assert f.bias.mean == pytest.approx(0.05, abs=1e-6)
    assert f.ideal_W > 0


def test_routing_against_the_drawn_availability() -> None:
    from conftest import scenario_dict

    from fogsdn.core.scenario import parse_scenario
    from fogsdn.measure.fidelity import routing_against_schedule
    from fogsdn.policies import initial_view, make_policy

    sc = parse_scenario(scenario_dict())
    avail = [(0.0, "ofn1", True), (10.0, "ofn1", False), (20.0, "ofn1", True)]

    def row(t: float, cls: str, node: str) -> TraceRow:
        return TraceRow(f"r{t}{cls}", "c1", cls, 1.0, t, t + 1, node, Outcome.OK, 1, 1)

    rows = [
        row(5, "lp", "ofn1"), row(5, "hp", "fn"),  # as drawn
        row(10.2, "lp", "ofn1"),  # 0.2 after the OFN left: the network had not caught up
        row(15, "lp", "fn"), row(25, "lp", "ofn1"),  # as drawn
        row(20.5, "lp", "fn"),  # 0.5 after it came back
        row(12, "hp", "ofn1"),  # never right for prioritized
    ]
    rc = routing_against_schedule(rows, avail, make_policy(sc.policy), initial_view(sc))
    assert (rc.checked, rc.against) == (7, 3)
    assert rc.share == pytest.approx(3 / 7)
    assert rc.late_ms[0] == pytest.approx(0.5)


@pytest.mark.parametrize("servers", ["single", "multi"])
def test_the_simulators_inlined_nodes_are_the_service_queue(tmp_path: Path, servers: str) -> None:
    """The simulator inlines its FIFO nodes for speed; replayed through `ServiceQueue`
    (the worker's node model) its trace agrees request by request."""
    from conftest import scenario_dict

    from fogsdn.core.scenario import parse_scenario
    from fogsdn.core.trace import read_trace
    from fogsdn.measure.fidelity import replay
    from fogsdn.sim.runner import run_simulation

    sc = parse_scenario(scenario_dict(
        duration_ms=3000, churn={"eta": 0.0, "xi": 0.0},
        nodes=[{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 4, "servers": servers},
               {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 3}]))
    run_simulation(sc, tmp_path, verbose=False, compare=False)
    rows = read_trace(tmp_path / "trace.csv")
    got = replay(sc.nodes, rows)
    assert sum(1 for r in rows if r.outcome is Outcome.BLOCKED) > 20
    for node in ("fn", "ofn1"):
        assert got[node].blocked_disagree == 0 and got[node].replayed > 500
        # equal up to the trace's rounding (microseconds of model time)
        assert got[node].ideal_W == pytest.approx(got[node].measured_W, abs=1e-5)


def test_routing_before_a_change_is_counted_early_not_right() -> None:
    """A change the runner issued ahead routes a few requests by the state still to come:
    they are against the drawn state too, counted apart from the late ones."""
    from conftest import scenario_dict

    from fogsdn.core.scenario import parse_scenario
    from fogsdn.measure.fidelity import routing_against_schedule
    from fogsdn.policies import initial_view, make_policy

    sc = parse_scenario(scenario_dict())
    # the leave was installed at 9.7 (ahead), the return at 19.6 (ahead)
    avail = [(0.0, "ofn1", True, 0.0), (10.0, "ofn1", False, 9.7), (20.0, "ofn1", True, 19.6)]

    def row(t: float, cls: str, node: str) -> TraceRow:
        return TraceRow(f"r{t}{cls}", "c1", cls, 1.0, t, t + 1, node, Outcome.OK, 1, 1)

    rows = [
        row(9.8, "lp", "fn"),  # 0.2 before the OFN leaves, already sent to the FN: early
        row(19.7, "lp", "ofn1"),  # 0.3 before it returns, already to the OFN: early
        row(10.4, "lp", "ofn1"),  # 0.4 after it left, still to the OFN: late
        row(3.0, "lp", "fn"),  # 7 before the change: not the change's doing: late
        row(14.0, "lp", "fn"),  # as drawn
    ]
    rc = routing_against_schedule(rows, avail, make_policy(sc.policy), initial_view(sc))
    assert (rc.checked, rc.against, rc.early) == (5, 4, 2)
    assert rc.early_ms[0] == pytest.approx(0.25)  # median of 0.2 and 0.3
    assert rc.late_ms[0] == pytest.approx((0.4 + 3.0) / 2)
    # every change installed after its instant: a request sent just before one and
    # routed by it still counts early (its SYN reached the switch after the install);
    # one sent nearer the change before (3.0) is late
    on_time = [(t, n, up, t + 0.1) for t, n, up, _ in avail]
    rc = routing_against_schedule(rows, on_time, make_policy(sc.policy), initial_view(sc))
    assert (rc.against, rc.early) == (4, 2)
    assert rc.late_ms[0] == pytest.approx((0.4 + 3.0) / 2)


def test_reaction_lead_is_the_median_of_recent_reactions_capped() -> None:
    from fogsdn.core.churn import ReactionLead

    lead = ReactionLead(window=3, cap_s=0.004)
    assert lead.lead_s == 0.0  # nothing measured yet: on time
    for x in (0.001, 0.003, 0.002):
        lead.observe(x)
    assert lead.lead_s == pytest.approx(0.002)
    lead.observe(0.010)  # the window keeps the last 3: 0.003, 0.002, 0.010
    assert lead.lead_s == pytest.approx(0.003)
    lead.observe(0.010)  # 0.002, 0.010, 0.010: median 0.010, capped
    assert lead.lead_s == pytest.approx(0.004)
    lead.observe(float("nan"))  # a reply without a time changes nothing
    assert lead.lead_s == pytest.approx(0.004)
    off = ReactionLead(enabled=False)
    off.observe(0.002)
    assert off.lead_s == 0.0
    with pytest.raises(ValueError, match="window"):
        ReactionLead(window=0)


def test_a_large_emulation_bias_is_named() -> None:
    from fogsdn.measure.fidelity import emulation_bias

    fine = emulation_bias({"fn": 1.01, "ofn1": 0.995}, 0.05)
    assert fine["large"] is False and fine["reasons"] == []
    slow = emulation_bias({"fn": 1.05, "ofn1": 1.0}, 0.12)
    assert slow["large"] is True
    assert slow["reasons"] == ["node fn served at x1.050 its nominal mean service",
                               "12.0 % of requests were routed against the drawn OFN "
                               "availability"]
    assert emulation_bias({"fn": 0.96}, None)["large"] is True  # too fast counts too


def test_bunched_arrivals_are_named() -> None:
    from fogsdn.measure.fidelity import emulation_bias

    timing = {"fn": {"hp": 0.08, "lp": 0.02}, "ofn1": {"hp": math.nan, "lp": -0.01}}
    bunched = emulation_bias({"fn": 1.0, "ofn1": 1.0}, 0.01, timing=timing)
    assert bunched["large"] is True and len(bunched["reasons"]) == 1
    assert bunched["reasons"][0].startswith("HP requests reached node fn bunched: an ideal "
                                            "node gives them +8.0 % sojourn")
    timing["fn"]["hp"] = 0.04
    assert emulation_bias({"fn": 1.0}, 0.01, timing=timing)["large"] is False


def test_the_timing_line_names_each_node_and_class_it_has() -> None:
    from fogsdn.measure.fidelity import timing_line

    line = timing_line({"fn": {"hp": 0.016, "lp": 0.012, "lag_p50_ms": 0.61, "lag_p99_ms": 2.5},
                        "ofn1": {"hp": None, "lp": -0.022, "lag_p50_ms": 0.6, "lag_p99_ms": 2.7}})
    assert line.endswith("fn HP +1.6 %, fn LP +1.2 %, ofn1 LP -2.2 %; drawn instant to node "
                         "p50 0.61 / p99 2.70 model ms")


def test_a_hypervisor_that_took_the_cpu_is_named_as_the_likely_cause(tmp_path: Path) -> None:
    from fogsdn.live.cpu_steal import idle_share, read_cpu_times, steal_share
    from fogsdn.measure.fidelity import emulation_bias

    slow = emulation_bias({"fn": 1.06}, 0.05, steal_share=0.14)
    assert slow["reasons"][-1].startswith("likely cause: the hypervisor took 14.0 %")
    # stolen time alone is no artefact, and a little of it is not named
    assert emulation_bias({"fn": 1.0}, 0.05, steal_share=0.14)["large"] is False
    assert len(emulation_bias({"fn": 1.06}, 0.05, steal_share=0.01)["reasons"]) == 1
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 1 2 3\n")
    before = read_cpu_times(stat)
    stat.write_text("cpu  200 0 100 1600 0 0 0 100 0 0\n")
    assert before == (50, 800, 1000)
    assert steal_share(before, read_cpu_times(stat)) == 0.05  # 50 of 1000 jiffies
    assert steal_share(before, before) == 0.0
    assert idle_share(before, read_cpu_times(stat)) == 0.8  # 800 of 1000
    stat.write_text("cpu  300 0 100 1650 50 0 0 100 0 0\n")  # iowait is idle too
    assert idle_share(before, read_cpu_times(stat)) == 0.75  # 900 (850 + 50) of 1200


def _rows_arriving(times: list[float], sizes: list[float], capacity: int = 50) -> list[TraceRow]:
    """Requests r0, r1, ... reaching an ideal FIFO node at `times` (in any order)."""
    order = sorted(range(len(times)), key=lambda i: times[i])
    ends: list[float] = []
    rows = {}
    for i in order:
        ends[:] = [e for e in ends if e > times[i]]  # those gone change nothing after
        rows[i] = _row(i, times[i], sizes[i], _fifo_end(times[i], sizes[i], capacity, ends), 0)
    return [rows[i] for i in range(len(times))]


def test_arrival_timing_by_hand() -> None:
    """Drawn at 0, 2 and 4 with service 1: nobody waits (ideal W 1). A client that stalled
    sends the first two at 4 with the third: they wait 0, 1 and 2 (W 2), +100 %."""
    from fogsdn.measure.fidelity import arrival_timing

    spec = NodeSpec(name="fn", role=Role.FN, mu=1.0, capacity=10)
    rows = _rows_arriving([4.0, 4.0, 4.0], [1.0, 1.0, 1.0])
    t = arrival_timing(spec, rows, {"r0": 0.0, "r1": 2.0, "r2": 4.0})
    assert t.replayed == 3
    assert t.W_as_drawn == {"hp": pytest.approx(1.0)}
    assert t.W_at_arrival == {"hp": pytest.approx(2.0)}
    assert t.bias("hp") == pytest.approx(1.0)
    assert t.lag_ms[0] == pytest.approx(2.0)  # lags 4, 2, 0
    assert t.bias("lp") != t.bias("lp")  # no LP here: nan


def test_lags_that_move_together_bunch_arrivals_and_independent_ones_do_not() -> None:
    from fogsdn.measure.fidelity import arrival_timing

    big = NodeSpec(name="fn", role=Role.FN, mu=1.0, capacity=50)
    rng = random.Random(11)
    n, drawn, sizes, t = 20000, [], [], 0.0
    for _ in range(n):
        t += rng.expovariate(0.7)
        drawn.append(t)
        sizes.append(rng.expovariate(1.0))
    ids = {f"r{i}": d for i, d in enumerate(drawn)}
    # a constant lag changes nothing
    same = arrival_timing(big, _rows_arriving([d + 0.3 for d in drawn], sizes), ids)
    assert same.bias("hp") == pytest.approx(0.0, abs=1e-9)
    # independent lags (exponential, mean 0.3) leave the stream Poisson (-0.1 % here)
    iid = [d + rng.expovariate(1 / 0.3) for d in drawn]
    assert abs(arrival_timing(big, _rows_arriving(iid, sizes), ids).bias("hp")) < 0.03
    # a similar mean lag, but a stall of 3 ms every 10 ms releases what it held at once
    stalled = [10.0 * math.ceil(d / 10.0) if 10.0 * math.ceil(d / 10.0) - d < 3.0 else d
               for d in drawn]
    lag = sum(s - d for s, d in zip(stalled, drawn, strict=True)) / n
    assert 0.3 < lag < 0.6
    bunched = arrival_timing(big, _rows_arriving(stalled, sizes), ids)
    assert bunched.bias("hp") > 0.08  # +11.6 % here


def test_the_gap_to_exact_splits_into_the_sample_and_the_emulation() -> None:
    from fogsdn.measure.fidelity import gap_split, gap_split_line

    live = {"hp": {"W": 2.5}, "lp": {"W": 4.0}}
    sim = {"hp": {"W": 2.45}, "lp": {"W": math.nan}}
    exact = {"hp": {"W": 2.4}, "lp": {"W": 3.97}}
    split = gap_split(live, sim, exact)
    assert set(split) == {"hp"}  # LP has no simulated figure: left out
    hp = split["hp"]
    assert hp["live_vs_exact"] == pytest.approx(2.5 / 2.4 - 1)
    assert hp["sim_vs_exact"] == pytest.approx(2.45 / 2.4 - 1)
    assert hp["live_vs_sim"] == pytest.approx(2.5 / 2.45 - 1)
    # the parts compose: (1 + sample)(1 + emulation) = 1 + total
    assert (1 + hp["sim_vs_exact"]) * (1 + hp["live_vs_sim"]) == pytest.approx(
        1 + hp["live_vs_exact"])
    assert "HP +4.2 % = sample +2.1 %" in gap_split_line(split)
    # outside the model: the emulation's part alone
    alone = gap_split(live, {"hp": {"W": 2.45}, "lp": {"W": 4.0}}, None)
    assert set(alone["lp"]) == {"live_vs_sim"} and alone["lp"]["live_vs_sim"] == 0.0
    assert gap_split({"hp": {"W": True}}, sim, exact) == {}
