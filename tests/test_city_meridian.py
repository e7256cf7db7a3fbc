"""The fog daemons' Meridian (fogsdn/city/meridian_node.py) over a fake network: the query
forwarded between agents gives what the pure overlay gives, with the same messages."""

from __future__ import annotations

import copy
import dataclasses
import math
import random
from collections import Counter, deque
from typing import Any

import numpy as np
import pytest

from fogsdn.city.meridian_node import (
    AgentTiming,
    MeridianAgent,
    Ping,
    Send,
    query_message,
)
from fogsdn.core.timebase import Timebase
from fogsdn.nodes.ncs.meridian import (
    UPKEEP,
    MeridianConfig,
    MeridianOverlay,
    Messages,
    matrix_measure,
)

CLIENT_PROBE = ("10.9.0.1", 7000)
CLIENT_REPLY = ("10.9.0.1", 5000)

# the wire kinds of one Meridian query (fogsdn.city.meridian_node)
QUERY_KINDS = ("m_query", "m_ask", "m_answer", "m_result", "m_probe")


class FakeNet:
    """Agents at fixed addresses; datagrams delivered in order, client probes answered
    from a latency matrix (None where the client is silent)."""

    def __init__(self, rtt: np.ndarray, n_fogs: int, seed: int, seeds_per_node: int = 2,
                 timing: AgentTiming | None = None) -> None:
        self.names = [f"f{i}" for i in range(n_fogs)]
        self.rtt = rtt  # (n_fogs + 1) square: the last row/column is the client
        self.addr = {n: (f"10.0.0.{i + 1}", 7002) for i, n in enumerate(self.names)}
        self.by_addr = {a: n for n, a in self.addr.items()}
        self.sent: dict[str, Counter[str]] = {n: Counter() for n in self.names}
        self.received: dict[str, Counter[str]] = {n: Counter() for n in self.names}
        t = timing or AgentTiming(gossip_s=1e9, manage_s=1e9)
        self.agents = {n: MeridianAgent(n, self.addr, MeridianConfig(), random.Random(
            f"{seed}-{n}"), t, self.sent[n], self.received[n], seeds_per_node)
            for n in self.names}
        self.results: list[dict[str, Any]] = []
        self.client_pings = 0
        self.client_silent = False
        self.now = 0.0

    def lat(self, a: str, b: str) -> float:
        idx = {n: i for i, n in enumerate(self.names)} | {"c": len(self.names)}
        return float(self.rtt[idx[a], idx[b]])

    def full_rings(self) -> None:
        """Every agent knows every peer, its rings managed from the true latencies."""
        for n, ag in self.agents.items():
            ag.known = set(ag.peers)
            for p in ag.peers:
                ag.measured(p, self.lat(n, p))
            ag.node.manage_rings(self.lat, Messages())

    def run(self, actions: list[tuple[str, Any]]) -> None:
        queue: deque[tuple[str, Any]] = deque(actions)
        while True:
            while queue:
                at, action = queue.popleft()
                ag = self.agents[at]
                if isinstance(action, Ping):
                    self.client_pings += 1
                    rtt = None if self.client_silent else self.lat(at, "c")
                    queue += [(at, a) for a in ag.client_rtt(action.token, rtt, self.now)]
                elif isinstance(action, Send):
                    if action.dest == CLIENT_REPLY:
                        self.results.append(action.msg)
                        continue
                    to = self.by_addr[action.dest]
                    queue += [(to, a) for a in self.agents[to].message(action.msg, self.now)]
            if not any(ag.queries for ag in self.agents.values()):
                return
            self.now += 10.0  # the waits run out: members beyond the cutoff never answer
            for n, ag in self.agents.items():
                queue += [(n, a) for a in ag.tick(self.now)]

    def query(self, entry: str, eligible: list[str]) -> dict[str, Any]:
        msg = query_message(f"q{len(self.results)}", "c", CLIENT_PROBE, CLIENT_REPLY,
                            eligible)
        self.run([(entry, a) for a in self.agents[entry].message(msg, self.now)])
        return self.results[-1]


def _city_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    pts = rng.uniform(0, 20, size=(n + 1, 2))
    d = np.linalg.norm(pts[:, None] - pts[None, :], axis=2) + 1.0
    np.fill_diagonal(d, 0.0)
    return d


@pytest.mark.parametrize("seed", range(12))
def test_the_forwarded_query_matches_the_pure_overlay(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 9
    net = FakeNet(_city_matrix(rng, n), n, seed)
    net.full_rings()
    names = net.names
    pure = MeridianOverlay(names, matrix_measure([*names, "c"], net.rtt))
    for name, ag in net.agents.items():
        pure.nodes[name].rings = copy.deepcopy(ag.node.rings)
    pyr = random.Random(seed)
    for _ in range(4):
        entry = pyr.choice(names)
        eligible = sorted(pyr.sample(names, pyr.randint(1, n)))
        before = {k: sum(c[k] for c in net.sent.values()) for k in QUERY_KINDS}
        pings0 = net.client_pings
        live = net.query(entry, eligible)
        pure.messages = Messages()
        ok = set(eligible)
        want = pure.closest("c", entry, ok.__contains__)
        assert live["node"] == want.node and live["hops"] == want.hops
        if want.node is not None:
            assert live["rtt"] == pytest.approx(want.latency_ms)
        sent = {k: sum(c[k] for c in net.sent.values()) - before[k] for k in QUERY_KINDS}
        # the same messages as the simulator counts: the client's query, the asks and
        # forwards (query), the members' answers and the result (answer), the probes
        assert pure.messages.by_kind["query"] == 1 + sent["m_query"] + sent["m_ask"]
        assert pure.messages.by_kind["answer"] == sent["m_answer"] + sent["m_result"]
        assert pure.messages.by_kind["probe"] == 2 * (net.client_pings - pings0)


def test_a_query_crosses_daemons_when_the_entry_is_far() -> None:
    # f0 far from the client, f1 half way, f2 next to it and outside f0's band: the
    # query moves twice
    rtt = np.array([[0, 10, 35, 20], [10, 0, 9, 10], [35, 9, 0, 1], [20, 10, 1, 0]], float)
    net = FakeNet(rtt, 3, 0)
    net.full_rings()
    out = net.query("f0", ["f0", "f1", "f2"])
    assert out["node"] == "f2" and out["by"] == "f2" and out["hops"] == 2
    assert net.sent["f0"]["m_query"] == 1 and net.sent["f1"]["m_query"] == 1
    assert net.received["f2"]["m_query"] == 1 and net.sent["f2"]["m_result"] == 1
    assert net.agents["f2"].hops == [2]


def test_a_full_entry_routes_but_is_not_chosen_and_a_silent_client_gets_no_node() -> None:
    rtt = np.array([[0, 10, 35, 20], [10, 0, 9, 10], [35, 9, 0, 1], [20, 10, 1, 0]], float)
    net = FakeNet(rtt, 3, 0)
    net.full_rings()
    assert net.query("f2", ["f0", "f1"])["node"] == "f1"  # the fallback asks the members
    net.client_silent = True
    out = net.query("f0", ["f0", "f1", "f2"])
    assert out["node"] is None and out["rtt"] is None
    assert not any(ag.queries for ag in net.agents.values())


def test_gossip_spreads_membership_and_ring_management_is_counted() -> None:
    rng = np.random.default_rng(5)
    n = 8
    net = FakeNet(_city_matrix(rng, n), n, 5, seeds_per_node=1,
                  timing=AgentTiming(gossip_s=1.0, manage_s=5.0))
    for t in range(40):
        net.now = float(t)
        for name, ag in net.agents.items():
            for p in ag.peers:  # the daemons' own probes to each other, once a second
                ag.measured(p, net.lat(name, p))
        net.run([(name, a) for name, ag in net.agents.items() for a in ag.tick(net.now)])
    for ag in net.agents.values():
        assert ag.node.knows() == set(ag.peers)
        assert all(len(r.primary) <= ag.node.k for r in ag.node.rings)
    total = {k: sum(c[k] for c in net.sent.values()) for k in ("m_gossip", "m_ring",
                                                                 "m_report")}
    got = {k: sum(c[k] for c in net.received.values()) for k in total}
    assert total == got and total["m_gossip"] == 39 * n  # no start rounds: from t = 1 on
    assert total["m_ring"] > 0 and total["m_ring"] == total["m_report"]
    assert all(math.isfinite(v) for ag in net.agents.values()
               for rep in ag.reports.values() for v in rep.values())


def test_an_agent_starts_converged_then_keeps_the_simulators_schedule() -> None:
    """Ten quick rounds of gossip, the rings managed once from the members' reports, then
    gossip and management on the model clock (time scale 10: every 50 and 300 real s)."""
    rng = np.random.default_rng(7)
    n = 16
    timing = AgentTiming.on_model_clock(Timebase(10.0), ping_timeout_s=1.0)
    assert (timing.gossip_s, timing.manage_s) == (UPKEEP.gossip_s * 10, UPKEEP.manage_s * 10)
    assert timing.start_rounds == UPKEEP.start_gossip_rounds == 10
    timing = dataclasses.replace(timing, start_gap_s=0.25)  # exact in binary, as the ticks
    net = FakeNet(_city_matrix(rng, n), n, 7, seeds_per_node=1, timing=timing)
    sent_at: dict[float, Counter[str]] = {}
    for step in range(0, 960):  # 120 real s, a tick every 0.125 s
        net.now = step / 8
        before = Counter({k: sum(c[k] for c in net.sent.values()) for k in ("m_gossip",
                                                                            "m_ring")})
        for name, ag in net.agents.items():
            for p in ag.peers:
                ag.measured(p, net.lat(name, p))
        net.run([(name, a) for name, ag in net.agents.items() for a in ag.tick(net.now)])
        after = Counter({k: sum(c[k] for c in net.sent.values()) for k in before})
        if after != before:
            sent_at[net.now] = after - before
    gossip_at = sorted(t for t, c in sent_at.items() if c["m_gossip"])
    assert len(gossip_at) == 12 and gossip_at[:10] == [0.25 * k for k in range(10)]
    assert gossip_at[10:] == pytest.approx([50.0, 100.0])
    assert all(sent_at[t]["m_gossip"] == n for t in gossip_at)
    ring_at = [t for t, c in sent_at.items() if c["m_ring"]]
    assert ring_at == [2.5]  # the start's management only, before 300 s
    for ag in net.agents.values():  # chosen a timeout after the reports were asked for
        assert len(ag.node.knows()) > 1  # gossip went past the one seed
        assert all(len(r.primary) <= ag.node.k for r in ag.node.rings)
    managed = [ag for ag in net.agents.values() if ag.reports]
    assert managed and all(len(r.primary) == ag.node.k for ag in managed
                           for r in ag.node.rings if len(r.members()) > ag.node.k)


def test_an_agent_starts_once_every_peer_is_measured_or_its_wait_is_over() -> None:
    """The simulated overlay starts with every node up: a live agent's start waits for
    an RTT to every peer (their daemons answer), at most `start_wait_s`."""
    rng = np.random.default_rng(3)
    timing = AgentTiming(gossip_s=50.0, manage_s=300.0, start_rounds=10, start_wait_s=5.0)
    net = FakeNet(_city_matrix(rng, 4), 4, 3, timing=timing)
    a, b = net.agents["f0"], net.agents["f1"]
    assert a.tick(0.0) == [] and a.started is None and a.unmeasured() == ["f1", "f2", "f3"]
    for p in a.peers:
        a.measured(p, net.lat("f0", p))
    assert a.tick(0.5) and a.started == 0.5  # gossip, to a measured seed
    assert b.tick(0.0) == [] and b.tick(4.9) == [] and b.started is None
    b.tick(5.0)
    assert b.started == 5.0  # nothing measured: it starts when its wait is over


def test_a_malformed_meridian_datagram_is_counted_and_ignored() -> None:
    net = FakeNet(_city_matrix(np.random.default_rng(0), 3), 3, 0)
    ag = net.agents["f0"]
    assert ag.message({"op": "m_ask", "qid": "x"}, 0.0) == []
    assert net.received["f0"]["malformed"] == 1
