"""Meridian in a live fog daemon: rings, gossip, ring management and the closest-node
query forwarded between daemons, as events in and messages out (no sockets here).

The algorithm is `fogsdn.nodes.ncs.meridian`'s, run one datagram at a time: the daemon feeds
`measured`, `message`, `client_rtt` and `tick` and carries out what they return. The
`m_*` kinds are JSON datagrams, counted by kind where sent and received.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from fogsdn.core.summary import json_float, json_int, json_object
from fogsdn.core.timebase import Timebase
from fogsdn.nodes.ncs.meridian import (
    UPKEEP,
    MeridianConfig,
    MeridianNode,
    Messages,
    Upkeep,
    band_members,
    fallback_groups,
    next_step,
    within_cutoff,
)

Addr = tuple[str, int]


class QueryMessage(TypedDict):
    """A closest-node query (`m_query`) as the client sends it (`query_message`) and the
    daemons forward it: where to probe the client and to reply, the eligible nodes, the
    nodes visited, the best (node, RTT) so far, the last node's RTT to the client (None
    at the entry) and the hops so far."""

    op: str
    qid: str
    client: str
    probe: list[str | int]  # (ip, port)
    reply: list[str | int]
    ok: list[str]
    visited: list[str]
    best: tuple[str, float] | None
    d: float | None
    hops: int


@dataclass(frozen=True)
class Send:
    dest: Addr
    msg: Mapping[str, object]  # a JSON object: a query, or any other `m_*` message


@dataclass(frozen=True)
class Ping:
    """Probe the client at `dest` and report the RTT with `client_rtt(token, ...)`."""

    dest: Addr
    token: tuple[str, str]  # (query id, "self" or "ask")


Action = Send | Ping


@dataclass
class _Query:
    """A query while it is at this node."""

    msg: QueryMessage
    d: float | None
    deadline: float
    asked: set[str] = field(default_factory=set)
    answers: dict[str, float] = field(default_factory=dict)
    fallback: int = -1  # which fallback group is being asked (-1: the band)


@dataclass
class AgentTiming:
    """When things happen (real seconds) and how long a node waits for answers. An agent
    starts as the simulated overlay does (`fogsdn.nodes.ncs.meridian.Upkeep`): `start_rounds`
    rounds of gossip `start_gap_s` apart, then its rings managed (the members' reports
    asked for, the primaries chosen a `ping_timeout_s` later); then it gossips every
    `gossip_s` and manages every `manage_s` from its start. It starts once every peer
    is measured (the simulated overlay starts with all its nodes up), or `start_wait_s`
    after its first tick."""

    gossip_s: float = 2.0
    manage_s: float = 6.0
    ping_timeout_s: float = 1.0
    slack_s: float = 0.05  # on top of the latencies, for the daemons' own time
    timebase: Timebase = Timebase(1.0)  # the answers' latencies are model ms
    start_rounds: int = 0
    start_gap_s: float = 0.2
    # the start waits until every peer is measured (its daemon up), at most this long
    start_wait_s: float = 10.0

    @classmethod
    def on_model_clock(cls, timebase: Timebase, ping_timeout_s: float,
                       upkeep: Upkeep = UPKEEP) -> AgentTiming:
        """The simulator's schedule in this run's real seconds (until 2026-12-06 a live
        agent gossiped every 2 and managed every 6 real s whatever the time scale: at
        scale 10 some 37 times the simulator's upkeep messages)."""
        return cls(gossip_s=timebase.real_s(upkeep.gossip_s * 1000.0),
                   manage_s=timebase.real_s(upkeep.manage_s * 1000.0),
                   ping_timeout_s=ping_timeout_s, timebase=timebase,
                   start_rounds=upkeep.start_gossip_rounds)


class MeridianAgent:
    def __init__(self, name: str, peers: dict[str, Addr], config: MeridianConfig,
                 rng: random.Random, timing: AgentTiming, sent: Counter[str],
                 received: Counter[str], seeds_per_node: int = 2) -> None:
        self.name = name
        self.peers = {n: a for n, a in peers.items() if n != name}
        self.config = config
        n_nodes = len(self.peers) + 1
        k = config.primaries(n_nodes)
        self.node = MeridianNode(name, config, k, max(n_nodes - k, 0))
        self.rng = rng
        self.timing = timing
        self.sent, self.received = sent, received
        others = sorted(self.peers)
        # bootstrap: a few peers known from the start; gossip brings the rest
        self.known: set[str] = set(rng.sample(others, min(seeds_per_node, len(others))))
        self.latest: dict[str, float] = {}  # peer -> last RTT the daemon measured (model ms)
        self.reports: dict[str, dict[str, float]] = {}  # member -> its RTTs to others
        self.queries: dict[str, _Query] = {}
        self.asks: dict[str, tuple[str, float | None]] = {}  # qid -> (asker, d or None)
        self.first_tick: float | None = None
        self.started: float | None = None  # when the start's rounds began
        self.next_gossip = math.inf
        self.start_rounds_left = timing.start_rounds
        self.next_manage = math.inf
        self.choose_at = math.inf  # when the asked reports are in
        self.hops: list[int] = []  # per query this node finished: hops it made

    # -- membership -------------------------------------------------------------
    def measured(self, peer: str, rtt_ms: float) -> None:
        if peer not in self.peers or not math.isfinite(rtt_ms):
            return
        self.latest[peer] = rtt_ms
        if peer in self.known:
            self.node.file(peer, rtt_ms)

    def _learn(self, member: str) -> None:
        if member in self.peers and member not in self.known:
            self.known.add(member)
            if member in self.latest:
                self.node.file(member, self.latest[member])

    def _send(self, dest: Addr, msg: Mapping[str, object]) -> Send:
        self.sent[str(msg["op"])] += 1
        return Send(dest, msg)

    def tick(self, now: float) -> list[Action]:
        out: list[Action] = []
        t = self.timing
        if self.first_tick is None:
            self.first_tick = now
        if self.started is None and (self.unmeasured() and now < self.first_tick
                                     + t.start_wait_s):
            return out + self._expire_queries(now)
        if self.started is None:  # the start's rounds, then its rings
            self.started = now
            self.next_gossip = now if t.start_rounds else now + t.gossip_s
            self.next_manage = now + t.start_rounds * t.start_gap_s
        if now >= self.next_gossip:
            out += self._gossip()
            if self.start_rounds_left > 1:
                self.start_rounds_left -= 1
                done = t.start_rounds - self.start_rounds_left
                self.next_gossip = self.started + done * t.start_gap_s
            else:
                self.start_rounds_left = 0
                self.next_gossip = self._next_period(t.gossip_s, now)
        if now >= self.next_manage:
            self.next_manage = self._next_period(t.manage_s, now)
            self.choose_at = now + t.ping_timeout_s
            out += self._ask_reports()
        if now >= self.choose_at:
            self.choose_at = math.inf
            self._choose_primaries()
        return out + self._expire_queries(now)

    def unmeasured(self) -> list[str]:
        """The peers this node has no RTT to yet."""
        return [p for p in sorted(self.peers) if p not in self.latest]

    def _expire_queries(self, now: float) -> list[Action]:
        out: list[Action] = []
        for qid, q in list(self.queries.items()):
            if now >= q.deadline:
                out += self._decide(qid, q, now)
        return out

    def _gossip(self) -> list[Action]:
        known = sorted(self.node.knows())
        if not known:
            return []
        peer = self.rng.choice(known)
        members = [self.name] + [self.rng.choice(sorted(r.members()))
                                 for r in self.node.rings if r.members()]
        return [self._send(self.peers[peer], {"op": "m_gossip", "from": self.name,
                                              "members": members})]

    def _next_period(self, period_s: float, now: float) -> float:
        """The first of `started + k * period_s` after `now`."""
        assert self.started is not None
        return self.started + (math.floor((now - self.started) / period_s) + 1) * period_s

    def _choose_primaries(self) -> None:
        """Ring management from the members' reports (their RTTs to each other)."""
        self.node.manage_rings(lambda a, b: self.reports.get(a, {}).get(b, math.nan),
                               Messages())  # the datagrams are counted in `_ask_reports`

    def _ask_reports(self) -> list[Action]:
        """Each member of a ring with more members than primaries reports its RTTs to the
        others (one request and one report each, as the simulator counts them)."""
        out: list[Action] = []
        for ring in self.node.rings:
            members = sorted(ring.members())
            if len(members) <= self.node.k:
                continue
            for m in members:
                out.append(self._send(self.peers[m], {"op": "m_ring", "from": self.name,
                                                      "names": members}))
        return out

    # -- messages ---------------------------------------------------------------
    def message(self, msg: Mapping[str, object], now: float) -> list[Action]:
        kind = str(msg.get("op"))
        self.received[kind] += 1
        try:
            if kind == "m_gossip":
                for m in _list(msg["members"]):
                    self._learn(str(m))
                return []
            if kind == "m_ring":
                rtt = {n: self.latest[n] for n in _list(msg["names"])
                       if n in self.latest and isinstance(n, str)}
                return [self._send(self.peers[str(msg["from"])],
                                   {"op": "m_report", "from": self.name, "rtt": rtt})]
            if kind == "m_report":
                rtts = json_object(msg["rtt"], "rtt")
                self.reports[str(msg["from"])] = {str(k): json_float(v) for k, v in rtts.items()}
                return []
            if kind == "m_query":
                return self._query_in(_query(msg), now)
            if kind == "m_ask":
                d = None if msg["d"] is None else json_float(msg["d"])
                self.asks[str(msg["qid"])] = (str(msg["from"]), d)
                return [Ping(_addr(msg["probe"]), (str(msg["qid"]), "ask"))]
            if kind == "m_answer":
                q = self.queries.get(str(msg["qid"]))
                if q is not None and msg["node"] in q.asked:
                    q.answers[str(msg["node"])] = json_float(msg["rtt"])
                    if set(q.answers) == q.asked:
                        return self._decide(str(msg["qid"]), q, now)
                return []
        except (KeyError, TypeError, ValueError):
            self.received["malformed"] += 1
        return []

    def _query_in(self, msg: QueryMessage, now: float) -> list[Action]:
        qid = msg["qid"]
        d = msg["d"]
        q = _Query(msg, d, now + self.timing.ping_timeout_s)
        self.queries[qid] = q
        if d is None:  # the entry node: measure the client first
            return [Ping(_addr(msg["probe"]), (qid, "self"))]
        return self._ask_band(qid, q, now)

    def client_rtt(self, token: tuple[str, str], rtt_ms: float | None, now: float
                   ) -> list[Action]:
        qid, role = token
        if role == "ask":
            asker, d = self.asks.pop(qid, ("", None))
            if not asker or rtt_ms is None:
                return []
            if d is not None and not within_cutoff(self.config, d, rtt_ms):
                return []
            return [self._send(self.peers[asker], {"op": "m_answer", "qid": qid,
                                                   "node": self.name, "rtt": rtt_ms})]
        q = self.queries.get(qid)
        if q is None:
            return []
        if rtt_ms is None:  # the client did not answer: nothing to route by
            return self._finish(qid, q)
        q.d = rtt_ms
        if self.name in q.msg["ok"] and rtt_ms < _best(q.msg)[1]:
            q.msg["best"] = (self.name, rtt_ms)
        return self._ask_band(qid, q, now)

    def _ask(self, qid: str, q: _Query, members: list[str], d: float | None, now: float
             ) -> list[Action]:
        q.asked, q.answers = set(members), {}
        # an answer within the cutoff comes back within the way there and back plus
        # (2 beta + 1) d; without a cutoff (the fallback) we wait as for any probe
        q.deadline = now + self.timing.ping_timeout_s
        if d is not None:
            farthest = max((self.node.latency_to(m) or 0.0 for m in members), default=0.0)
            wait_ms = farthest + (2 * self.config.beta + 1) * d
            q.deadline = min(q.deadline, now + self.timing.timebase.real_s(wait_ms)
                             + self.timing.slack_s)
        return [self._send(self.peers[m], {"op": "m_ask", "qid": qid, "from": self.name,
                                           "probe": q.msg["probe"], "d": d})
                for m in members]

    def _ask_band(self, qid: str, q: _Query, now: float) -> list[Action]:
        assert q.d is not None
        visited = [*q.msg["visited"], self.name]
        q.msg["visited"] = visited
        ok = set(q.msg["ok"])
        members = band_members(self.node, q.d, visited, lambda m: m in ok)
        if not members:
            return self._decide(qid, q, now)
        return self._ask(qid, q, members, q.d, now)

    def _decide(self, qid: str, q: _Query, now: float) -> list[Action]:
        """All asked members answered, or the wait ran out."""
        if q.d is None:  # the entry's own probe to the client got no answer
            return self._finish(qid, q)
        if q.fallback < 0:
            step = next_step(self.config, q.d, q.answers)
            if step.nearest is not None and step.latency_ms < _best(q.msg)[1]:
                q.msg["best"] = (step.nearest, step.latency_ms)
            if step.nearest is not None and step.forward:
                del self.queries[qid]
                fwd: QueryMessage = {**q.msg, "d": step.latency_ms, "hops": q.msg["hops"] + 1}
                return [self._send(self.peers[step.nearest], fwd)]
        elif q.answers:
            step = next_step(self.config, math.inf, q.answers)
            assert step.nearest is not None
            q.msg["best"] = (step.nearest, step.latency_ms)
        if _best(q.msg)[0] is None:  # no eligible answer yet: ask all eligible members
            ok = set(q.msg["ok"])
            groups = fallback_groups(self.node, lambda m: m in ok)
            while q.fallback + 1 < len(groups):
                q.fallback += 1
                if groups[q.fallback]:
                    return self._ask(qid, q, groups[q.fallback], None, now)
        return self._finish(qid, q)

    def _finish(self, qid: str, q: _Query) -> list[Action]:
        self.queries.pop(qid, None)
        node, lat = _best(q.msg)
        self.hops.append(q.msg["hops"])
        return [self._send(_addr(q.msg["reply"]), {
            "op": "m_result", "qid": qid, "node": node,
            "rtt": lat if math.isfinite(lat) else None, "hops": q.msg["hops"],
            "by": self.name})]


# -- reading a datagram's fields: KeyError, TypeError or ValueError where malformed ----------
def _list(value: object) -> list[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"a list, got {type(value).__name__}")
    return list(value)


def _addr(value: object) -> Addr:
    ip, port = _list(value)[:2]
    return str(ip), json_int(port)


def _best_of(value: object) -> tuple[str, float] | None:
    """A query's best (node, RTT) so far; None: none yet."""
    if not value:
        return None
    node, *rest = _list(value)
    if node is None:
        return None
    rtt, *_ = rest
    return str(node), json_float(rtt)


def _query(msg: Mapping[str, object]) -> QueryMessage:
    """A received `m_query`, every field checked."""
    ok = [n for n in _list(msg["ok"]) if isinstance(n, str)]
    if len(ok) != len(_list(msg["ok"])):
        raise TypeError("ok: node names")
    d = msg.get("d")
    return {"op": "m_query", "qid": str(msg["qid"]), "client": str(msg["client"]),
            "probe": list(_addr(msg["probe"])), "reply": list(_addr(msg["reply"])), "ok": ok,
            "visited": [str(v) for v in _list(msg["visited"])],
            "best": _best_of(msg.get("best")), "d": None if d is None else json_float(d),
            "hops": json_int(msg["hops"])}


def _best(msg: QueryMessage) -> tuple[str | None, float]:
    best = msg["best"]
    return (None, math.inf) if best is None else best


def query_message(qid: str, client: str, probe: Addr, reply: Addr, eligible: list[str]
                  ) -> QueryMessage:
    """What a client sends its entry node."""
    return {"op": "m_query", "qid": qid, "client": client, "probe": list(probe),
            "reply": list(reply), "ok": sorted(eligible), "visited": [], "best": None,
            "d": None, "hops": 0}
