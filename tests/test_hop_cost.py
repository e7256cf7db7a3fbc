"""The emulator's cost per hop: the fit over chains, the deduction from links' delays,
the warning for links configured below it, and the scenario switch."""

from __future__ import annotations

import math

import pytest
from conftest import scenario_dict

from fogsdn.core.scenario import ScenarioError, parse_scenario
from fogsdn.netem.hop_cost import (
    HopCostError,
    TunnelCost,
    deduct,
    deduct_peers,
    fit_hop_cost,
    floor_warning,
    ping_rtts_ms,
)
from fogsdn.netem.link_params import LinkParams


def test_the_fit_is_half_the_round_trip_slope_of_the_medians() -> None:
    # medians 0.20, 0.32, 0.44 ms: 0.12 ms of round trip per hop, 0.06 one way; the slow
    # outliers (a probe that waited for a core) do not move a median
    cost = fit_hop_cost({0: [0.19, 0.20, 0.21, 9.0], 1: [0.31, 0.32, 0.33, 7.0],
                         2: [0.43, 0.44, 0.45, 8.0]})
    assert cost.per_hop_ms == pytest.approx(0.06)
    assert cost.replies == {0: 4, 1: 4, 2: 4}
    assert cost.to_dict()["rtt_real_ms_p50_by_hops"] == {"0": 0.205, "1": 0.325, "2": 0.445}


def test_a_chain_that_gets_faster_with_hops_costs_nothing_not_less() -> None:
    assert fit_hop_cost({0: [0.3], 2: [0.2]}).per_hop_ms == 0.0


@pytest.mark.parametrize("rtts, why", [
    ({0: [0.2]}, "two hop counts"),
    ({0: [0.2], 1: []}, "no probe answered over the chain of 1"),
    ({0: [0.2], 1: [math.nan, math.inf]}, "no probe answered"),
    ({-1: [0.2], 1: [0.3]}, "hop count must be an integer"),
])
def test_probes_that_cannot_give_a_cost_say_why(rtts: dict[int, list[float]], why: str) -> None:
    with pytest.raises(HopCostError, match=why):
        fit_hop_cost(rtts)


def test_each_delayed_link_keeps_its_delay_less_the_cost_and_short_ones_are_named() -> None:
    d = deduct({"s1-s2": 0.24, "s2-s3": 0.05, "c1-s1": 0.0}, 0.1)
    assert d.applied_ms == pytest.approx({"s1-s2": 0.14, "s2-s3": 0.0, "c1-s1": 0.0})
    # a link asked for no delay is not short of anything
    assert d.below_floor == pytest.approx({"s2-s3": 0.05})
    p = d.params("s1-s2", LinkParams(delay_ms=0.24, jitter_ms=0.01, loss=0.02, bw_mbps=10))
    assert (p.delay_ms, p.jitter_ms, p.loss, p.bw_mbps) == pytest.approx((0.14, 0.01, 0.02, 10))
    report = d.to_dict(time_scale=10)
    assert report["per_hop_model_ms"] == pytest.approx(0.01)
    assert report["below_floor_model_ms"] == pytest.approx({"s2-s3": 0.005})
    line = floor_warning(d, time_scale=10)
    assert line is not None and "1 link(s)" in line and "s2-s3" in line and "0.01 model ms" in line
    assert floor_warning(deduct({"a": 1.0}, 0.1), 10) is None


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_an_impossible_cost_is_refused(bad: float) -> None:
    with pytest.raises(HopCostError, match="cost per hop"):
        deduct({"a": 1.0}, bad)


def test_the_scenario_switch_defaults_to_deduct_and_refuses_other_words() -> None:
    topo = {"kind": "line", "length": 2, "link": {"delay_ms": 0.1}}
    assert parse_scenario(scenario_dict(topology=topo)).topology.hop_cost == "deduct"
    keep = parse_scenario(scenario_dict(topology={**topo, "hop_cost": "keep"}))
    assert keep.topology.hop_cost == "keep"
    with pytest.raises(ScenarioError, match="hop_cost"):
        parse_scenario(scenario_dict(topology={**topo, "hop_cost": "subtract"}))


class _RecordingShaper:
    mechanism = "userspace"

    def __init__(self) -> None:
        self.sent: dict[str, LinkParams] = {}
        self.peers: dict[str, dict[str, float]] = {}

    def update(self, link_id: str, params: LinkParams) -> None:
        self.sent[link_id] = params

    def update_peers(self, link_id: str, delays_ms: dict[str, float]) -> None:
        self.peers[link_id] = dict(delays_ms)


def test_the_network_deducts_again_when_the_cost_or_a_link_changes() -> None:
    """A run-time change of the cost per hop re-shapes every link from what was asked
    (not from what was last applied), and a link changed at run time (a fault, the view)
    keeps the deduction."""
    import networkx as nx

    from fogsdn.core.topology import LinkSpec
    from fogsdn.netem.mininet_net import Network

    shaper = _RecordingShaper()
    net = Network(net=None, bridges={}, graph=nx.Graph(), time_scale=10.0,
                  shaper=shaper,  # type: ignore[arg-type]
                  elements={"s1-s2": object(), "s2-s3": object()},
                  configured={"s1-s2": LinkParams(delay_ms=0.5), "s2-s3": LinkParams(delay_ms=2.0)})
    net.set_per_hop_ms(0.2)
    assert {k: p.delay_ms for k, p in shaper.sent.items()} == pytest.approx(
        {"s1-s2": 0.3, "s2-s3": 1.8})
    net.set_per_hop_ms(0.6)  # dearer under load: s1-s2 is now below it and adds nothing
    assert {k: p.delay_ms for k, p in shaper.sent.items()} == pytest.approx(
        {"s1-s2": 0.0, "s2-s3": 1.4})
    net.update_link("s2-s3", LinkSpec(delay_ms=0.5, loss=0.1))  # 5 real ms asked
    assert shaper.sent["s2-s3"].delay_ms == pytest.approx(4.4)
    assert shaper.sent["s2-s3"].loss == pytest.approx(0.1)


def test_a_per_peer_table_takes_what_its_elements_own_delay_cannot_absorb() -> None:
    assert deduct_peers({"10.0.0.1": 18.0, "10.0.0.2": 0.5}, base_ms=0.3, per_hop_ms=1.3) == \
        pytest.approx({"10.0.0.1": 17.0, "10.0.0.2": 0.0})  # 1.0 left after the base's 0.3
    assert deduct_peers({"a": 5.0}, base_ms=2.0, per_hop_ms=1.3) == {"a": 5.0}  # base enough
    with pytest.raises(HopCostError):
        deduct_peers({"a": 5.0}, base_ms=0.0, per_hop_ms=math.nan)


def test_the_network_deducts_from_peer_tables_and_again_when_the_cost_changes() -> None:
    """The star city's elements hold their delays in per-peer tables (the element's own
    delay is a floor of 0.001 model ms): the cost per hop comes off every entry, from
    the table as asked, and again when the run measures a new cost."""
    import networkx as nx

    from fogsdn.netem.mininet_net import Network

    shaper = _RecordingShaper()
    net = Network(net=None, bridges={}, graph=nx.Graph(), time_scale=10.0,
                  shaper=shaper,  # type: ignore[arg-type]
                  elements={"fog0-s0": object()},
                  configured={"fog0-s0": LinkParams(delay_ms=0.01)})
    net.update_peers("fog0-s0", {"10.0.1.1": 1.8, "10.0.1.2": 0.05})  # model ms
    assert shaper.peers["fog0-s0"] == pytest.approx({"10.0.1.1": 18.0, "10.0.1.2": 0.5})
    net.set_per_hop_ms(1.31)
    assert shaper.peers["fog0-s0"] == pytest.approx({"10.0.1.1": 16.7, "10.0.1.2": 0.0})
    net.set_per_hop_ms(0.51)
    assert shaper.peers["fog0-s0"] == pytest.approx({"10.0.1.1": 17.5, "10.0.1.2": 0.0})


def test_a_tabled_link_below_the_cost_is_not_named_below_the_floor() -> None:
    """A star city's access element asks for 0.001 model ms of its own, far below the
    cost per hop; its per-peer table takes the rest, so the run names it as deducted
    from its table, not as a link that runs slower than configured."""
    import networkx as nx

    from fogsdn.live.hop_floor import HopFloor

    floor = HopFloor(nx.Graph(), 10.0, "deduct", tabled=["fog0-s0"])
    floor.configured = {"fog0-s0": 0.01, "s1-s2": 0.2}  # real ms
    full = floor._apply(1.3)
    assert set(full.below_floor) == {"s1-s2"}
    assert floor.report["from_peer_tables_model_ms"] == {"fog0-s0": pytest.approx(0.129)}
    assert floor.notes and "s1-s2" in floor.notes[0] and "fog0-s0" not in floor.notes[0]


def test_the_probes_cost_is_a_share_of_the_machine_and_a_packet_rate() -> None:
    import os

    from fogsdn.live.hop_floor import probe_cost

    cost = probe_cost(cpu_s=0.5, bridge_packets=1080, wall_s=10.0)
    assert cost["cpu_share"] == pytest.approx(0.5 / (10.0 * (os.cpu_count() or 1)), abs=1e-5)
    assert cost["bridge_packets_per_s"] == 108.0
    assert probe_cost(0.0, 0, 0.0)["cpu_share"] == 0.0


def test_measuring_under_load_can_be_switched_off() -> None:
    """`hop_cost_every_s: 0`: the start's measurement holds; no probing thread runs."""
    import threading

    import networkx as nx

    from fogsdn.live.hop_floor import HopFloor

    topo = {"kind": "line", "length": 2, "link": {"delay_ms": 0.1}}
    assert parse_scenario(scenario_dict(topology=topo)).topology.hop_cost_every_s == 10.0
    off = parse_scenario(scenario_dict(topology={**topo, "hop_cost_every_s": 0}))
    assert off.topology.hop_cost_every_s == 0.0
    for bad in (-1, 1e9, float("nan")):
        with pytest.raises(ScenarioError, match="hop_cost_every_s"):
            parse_scenario(scenario_dict(topology={**topo, "hop_cost_every_s": bad}))
    floor = HopFloor(nx.Graph(), 10.0, "deduct", every_s=0.0)
    floor._chain = object()  # type: ignore[assignment]  # a chain that must not be probed
    floor.follow(None, lambda: True, threading.Event())  # type: ignore[arg-type]
    assert floor._thread is None and floor.report["during_run_every_s"] == 0.0


PING_OUTPUT = """PING 10.250.0.2 (10.250.0.2) 56(84) bytes of data.
64 bytes from 10.250.0.2: icmp_seq=1 ttl=64 time=0.081 ms
64 bytes from 10.250.0.2: icmp_seq=2 ttl=64 time=0.043 ms
64 bytes from 10.250.0.2: icmp_seq=4 ttl=64 time=1.20 ms

--- 10.250.0.2 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 31ms
rtt min/avg/max/mdev = 0.043/0.441/1.200/0.536 ms
"""


def test_ping_round_trips_are_read_one_per_reply_not_from_the_statistics() -> None:
    assert ping_rtts_ms(PING_OUTPUT) == [0.081, 0.043, 1.2]
    assert ping_rtts_ms("connect: Network is unreachable\n") == []


def test_a_tunnel_costs_half_its_median_round_trip_each_way() -> None:
    t = TunnelCost(("a", "b"), 4, tuple(ping_rtts_ms(PING_OUTPUT)))
    assert t.one_way_ms == pytest.approx(0.081 / 2)
    assert t.to_dict() == {"servers": ["a", "b"], "sent": 4, "replies": 3,
                           "rtt_real_ms_min": 0.043, "rtt_real_ms_p50": 0.081,
                           "rtt_real_ms_max": 1.2, "one_way_real_ms": 0.0405,
                           "throughput_mbps": None}
    with_rate = TunnelCost(("a", "b"), 4, (0.1,), throughput_mbps=941.26)
    assert with_rate.to_dict()["throughput_mbps"] == 941.3


@pytest.mark.parametrize("rtts", [(), (math.nan,), (-0.1, 0.2), (math.inf,)])
def test_a_tunnel_with_no_answer_or_an_impossible_one_is_one_line(
        rtts: tuple[float, ...]) -> None:
    with pytest.raises(HopCostError, match="servers a and b") as err:
        TunnelCost(("a", "b"), 20, rtts)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mbps", [0.0, -1.0, math.nan, math.inf])
def test_a_tunnels_impossible_throughput_is_one_line(mbps: float) -> None:
    with pytest.raises(HopCostError, match="throughput"):
        TunnelCost(("a", "b"), 20, (0.1,), throughput_mbps=mbps)
