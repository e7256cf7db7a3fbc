"""Discrete-event engine: the scenario's queues, OFN churn and policy in simulated time.

Why it looks the way it does: a sweep or an RL run wants millions of requests per
minute from pure Python, so the hot path avoids per-event objects and a global
event heap:

* Arrivals are one merged Poisson stream (rate lambda_hp + lambda_lp; each arrival
  is HP with probability lambda_hp / lambda and comes from a uniformly chosen client),
  which has the same law as independent per-client, per-class streams of rate
  lambda / clients. Inter-arrival times, classes, clients and sizes are drawn in
  numpy blocks from separate seeded streams (`fogsdn.streams`).
* A single-server FIFO node knows each request's completion the moment it is
  accepted (max(arrival, previous completion) + size / mu), so nodes keep their
  requests in a deque of finished-by times and settle completions lazily, when the
  node is next looked at (an arrival routed there, a churn event, the end of the
  run). A `multi` node (C servers, no waiting) keeps a small heap instead.
* Proactive policies' route tables are computed once per availability state and
  sampled exactly as `Policy.decide` would (the same single `rng.random()` and
  bisection as `random.choices`), so the trace is identical to calling `decide` per
  request, only faster. Per-request policies (`proactive = False`, or any policy
  overriding `decide`) get a fresh `ClusterView` with `in_system` for every request.

Semantics (shared with the testbed and the CTMC): an arrival that finds its chosen
node full (or down) is `blocked` at once and never re-routed. When an OFN leaves,
`drain` lets it finish what it holds, `handoff` moves its requests (the one in
service first, then the waiting ones in order) to the tail of the first FN, the
one in service with the work it has left (as the live worker does; for exponential
sizes that is, in distribution, the CTMC's fresh service at the FN), and those that
do not fit are `lost`; `drop` loses them all. A request not answered
within `timeout_ms` is recorded `timeout`, but the node still serves it to the end:
the client gave up, the worker did not, so it does not free capacity early.

The engine does no I/O: finished rows go to a sink in batches (`Row` tuples, see
`ROW_FIELDS`), availability transitions to a callback. Rows come out in the order
the engine settles them, which is close to, but not exactly, time order.
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

from controller.policies import (
    ClusterView,
    NodeView,
    Policy,
    PolicyError,
    Request,
    is_per_request,
    make_policy,
    node_view,
    policy_failure,
    routes_for,
)
from fogsdn.churn import ofn_changes
from fogsdn.latency import node_net_ms
from fogsdn.scenario import LeaveMode, Role, Scenario, Servers, TaskClass, scenario_graph
from fogsdn.streams import BLOCK, Stream, python_stream, replication_seed
from fogsdn.workload import arrival_blocks, client_names, hp_share

OK, BLOCKED, TIMEOUT, LOST = 0, 1, 2, 3
OUTCOME_NAMES: tuple[str, ...] = ("ok", "blocked", "timeout", "lost")
CLASSES: tuple[TaskClass, ...] = (TaskClass.HP, TaskClass.LP)

# A row is a plain tuple: (t_done, outcome, seq, client, cls, size, t_send, node,
# service, nominal[, note]). client/cls/node are indices into client_names(),
# CLASSES and node_names(); seq counts per client; service is the achieved service
# time at the final node (NaN if never served), nominal what was asked of it; the
# optional note (no commas) explains blocked/lost/timeout/handoff rows.
ROW_FIELDS: tuple[str, ...] = (
    "t_done", "outcome", "seq", "client", "cls", "size", "t_send", "node",
    "service", "nominal", "note",
)
Row = tuple[Any, ...]
RowSink = Callable[[list[Row]], None]
AvailabilitySink = Callable[[float, str, bool], None]

FLUSH_ROWS = 8192
NAN = math.nan
INF = math.inf


def node_names(scenario: Scenario) -> tuple[str, ...]:
    return tuple(n.name for n in scenario.nodes)


@dataclass(frozen=True)
class SimResult:
    seed: int  # the effective seed (scenario seed + replication)
    requests: int  # arrivals generated, each of which produced exactly one row
    last_arrival_ms: float
    end_ms: float  # when the last in-flight request was settled
    transitions: int  # OFN availability changes after t = 0
    per_request: bool  # whether the policy was asked per request
    wall_s: float


def simulate(
    scenario: Scenario,
    sink: RowSink,
    *,
    requests: int | None = None,
    duration_ms: float | None = None,
    replication: int = 0,
    availability: AvailabilitySink | None = None,
    per_request: bool | None = None,
    policy: Policy | None = None,
    flush_rows: int = FLUSH_ROWS,
) -> SimResult:
    """Run one replication; stop arrivals at `duration_ms` or after `requests` (whichever
    comes first; the scenario's duration when neither is given), then let in-flight
    requests finish. `per_request=True` forces `policy.decide` for every request (the
    trace is the same; it exists to test that). `flush_rows` is how many rows the sink
    gets at a time (1: each as soon as it is settled, for a caller that learns from them)."""
    wall0 = time.perf_counter()
    if requests is None and duration_ms is None:
        duration_ms = scenario.duration_ms
    stop_t = INF if duration_ms is None else float(duration_ms)
    max_n = requests if requests is not None else (1 << 62)
    if requests is not None and requests < 0:
        raise ValueError("requests must be >= 0")
    if flush_rows < 1:
        raise ValueError("flush_rows must be >= 1")

    seed = replication_seed(scenario.seed, replication)
    policy = policy if policy is not None else make_policy(scenario.policy, scenario.workload)
    from sim.size_engine import simulate_size_based, uses_size_engine

    if uses_size_engine(policy):  # size-based assignment (seed 002b): its own engine
        n, seed, last_t, end_t = simulate_size_based(
            scenario, sink, policy, stop_t=stop_t, max_n=max_n, replication=replication,
            availability=availability, flush_rows=FLUSH_ROWS)
        return SimResult(seed=seed, requests=n, last_arrival_ms=last_t, end_ms=end_t,
                         transitions=0, per_request=True, wall_s=time.perf_counter() - wall0)
    fast = not (per_request if per_request is not None else is_per_request(policy))
    wl = scenario.workload
    p_hp = hp_share(wl)
    n_clients = wl.clients
    tmo = scenario.timeout_ms

    nodes = scenario.nodes
    nn = len(nodes)
    names = node_names(scenario)
    cnames = client_names(scenario)
    index = {n: k for k, n in enumerate(names)}
    roles = [n.role for n in nodes]
    caps = [n.capacity for n in nodes]
    mus = [n.mu for n in nodes]
    inv_mu = [1.0 / n.mu for n in nodes]
    multi = [n.servers is Servers.MULTI for n in nodes]
    held: list[Any] = [[] if multi[k] else deque() for k in range(nn)]
    # what a view tells policies besides load: power figures and each path's network time
    net = node_net_ms(scenario, policy.paths(scenario_graph(scenario)))
    base_view = [node_view(nodes[k], True, net.get(names[k])) for k in range(nn)]
    idle_w = [v.power_idle_w for v in base_view]
    max_w = [v.power_max_w for v in base_view]
    net_ms = [v.net_ms for v in base_view]
    last = [0.0] * nn  # single server: when its last accepted request completes
    fn0 = next(k for k in range(nn) if roles[k] is Role.FN)  # handoff target

    blocks = arrival_blocks(wl, seed)
    route_rng = python_stream(seed, Stream.ROUTING)
    rnd = route_rng.random

    out: list[Row] = []
    out_append = out.append

    # -- availability and churn (fogsdn.churn: the same events the live run replays) ----
    churn = scenario.churn
    avail = [True] * nn
    ofns = [k for k in range(nn) if roles[k] is Role.OFN]
    initial, changes = ofn_changes(churn, len(ofns), seed)
    for j, k in enumerate(ofns):
        avail[k] = initial[j]
    if availability is not None:
        for k in range(nn):
            availability(0.0, names[k], avail[k])
    pending = next(changes, None)  # (t, OFN number, new state) of the next change

    # -- routing ----------------------------------------------------------------
    table_cache: dict[tuple[bool, ...], list[tuple[list[int], list[float], float, int]]] = {}

    def route_table() -> list[tuple[list[int], list[float], float, int]]:
        key = tuple(avail)
        got = table_cache.get(key)
        if got is None:
            view = ClusterView(
                tuple(replace(base_view[k], available=avail[k]) for k in range(nn))
            )
            try:
                table = policy.routes(view)
            except Exception as err:  # the user's code: one line naming its file
                raise PolicyError(policy_failure(policy, "routes", err)) from None
            got = []
            for cls in CLASSES:
                weights = routes_for(table, cls)
                try:
                    idx = [index[n] for n in weights]
                except KeyError as err:
                    raise ValueError(f"policy {policy.name} routed to unknown node {err}") from None
                cum = list(accumulate(weights.values()))
                got.append((idx, cum, cum[-1] + 0.0, len(idx) - 1))
            table_cache[key] = got
        return got

    # -- settling ------------------------------------------------------------------
    def settle(rec: Row) -> None:
        if rec[0] - rec[6] > tmo:
            out_append((rec[6] + tmo, TIMEOUT, *rec[2:10], f"node finished at {rec[0]:.6f}"))
        else:
            out_append(rec)

    def advance(k: int, t: float) -> None:
        """Settle node k's completions up to time t."""
        h = held[k]
        if multi[k]:
            while h and h[0][0] <= t:
                settle(heapq.heappop(h))
        else:
            while h and h[0][0] <= t:
                settle(h.popleft())

    def accept(k: int, t: float, rec_tail: tuple[Any, ...], svc: float, note: str) -> bool:
        """Put a moved request at node k's tail at time t (handoff); False if full."""
        h = held[k]
        if len(h) >= caps[k]:
            return False
        if multi[k]:
            heapq.heappush(h, (t + svc, OK, *rec_tail, k, svc, svc, note))
        else:
            start = last[k] if last[k] > t else t
            last[k] = start + svc
            h.append((start + svc, OK, *rec_tail, k, svc, svc, note))
        return True

    transitions = 0

    def change(k: int, t: float) -> None:
        """OFN k changes availability at time t (the pending churn event)."""
        nonlocal transitions, pending
        transitions += 1
        advance(k, t)
        up = not avail[k]
        avail[k] = up
        if availability is not None:
            availability(t, names[k], up)
        pending = next(changes, None)
        if up or churn.leave is LeaveMode.DRAIN:
            return
        h = held[k]
        recs = sorted(h, key=lambda r: r[6]) if multi[k] else list(h)
        h.clear()
        last[k] = t
        if churn.leave is LeaveMode.DROP:
            for r in recs:
                out_append((t, LOST, *r[2:7], k, NAN, r[9], f"{names[k]} left (drop)"))
            return
        advance(fn0, t)
        note = f"handoff from {names[k]} at {t:.6f}"
        for i, r in enumerate(recs):
            if i == 0 or multi[k]:  # in service: the work it has left moves with it
                svc = max(0.0, r[0] - t) * mus[k] * inv_mu[fn0]
            else:
                svc = r[5] * inv_mu[fn0]
            if not accept(fn0, t, r[2:7], svc, note):
                out_append(
                    (t, LOST, *r[2:7], k, NAN, r[9], f"handoff from {names[k]}: {names[fn0]} full")
                )

    def next_churn() -> float:
        return pending[0] if pending is not None else INF

    def pending_node() -> int:
        assert pending is not None
        return ofns[pending[1]]

    # -- per-request decisions ----------------------------------------------------
    def decide(t: float, cls: int, c: int, size: float) -> int:
        for k in range(nn):
            advance(k, t)
        view = ClusterView(
            tuple(
                NodeView(names[k], roles[k], avail[k], caps[k], mus[k], len(held[k]),
                         multi_server=multi[k], power_idle_w=idle_w[k], power_max_w=max_w[k],
                         net_ms=net_ms[k])
                for k in range(nn)
            )
        )
        try:
            name = policy.decide(view, Request(CLASSES[cls], cnames[c], size, t_ms=t), route_rng)
        except Exception as err:  # the user's code: one line naming its file
            raise PolicyError(policy_failure(policy, "decide", err)) from None
        try:
            return index[name]
        except KeyError:
            raise ValueError(f"policy {policy.name} chose unknown node {name!r}") from None

    # -- main loop ---------------------------------------------------------------------
    table = route_table() if fast else []
    t_churn = next_churn()
    cseq = [0] * n_clients
    t = 0.0
    last_arrival = 0.0
    n = 0
    j = BLOCK
    ia: Sequence[float] = ()
    cu: Sequence[float] = ()
    cl: Sequence[int] = ()
    sz: Sequence[float] = ()
    popleft_of = [None if multi[k] else held[k].popleft for k in range(nn)]
    while n < max_n:
        if j == BLOCK:
            block = next(blocks)
            ia, cu, cl, sz = block.interarrival, block.class_u, block.client, block.size
            j = 0
        t += ia[j]
        if t >= stop_t:
            break
        while t_churn <= t:
            change(pending_node(), t_churn)
            t_churn = next_churn()
            if fast:
                table = route_table()
        cls = 0 if cu[j] < p_hp else 1
        c = cl[j]
        size = sz[j]
        j += 1
        seq = cseq[c]
        cseq[c] = seq + 1
        n += 1
        last_arrival = t
        if fast:
            idx, cum, total, hi = table[cls]
            if hi:
                k = idx[bisect_right(cum, rnd() * total, 0, hi)]
            else:
                rnd()  # random.choices draws even from one node; keep the stream in step
                k = idx[0]
        else:
            k = decide(t, cls, c, size)
        h = held[k]
        if multi[k]:
            while h and h[0][0] <= t:
                settle(heapq.heappop(h))
            if len(h) >= caps[k] or not avail[k]:
                out_append((t, BLOCKED, seq, c, cls, size, t, k, NAN, NAN,
                            "" if avail[k] else "node unavailable"))
            else:
                svc = size * inv_mu[k]
                heapq.heappush(h, (t + svc, OK, seq, c, cls, size, t, k, svc, svc))
        else:
            if h and h[0][0] <= t:
                pop = popleft_of[k]
                while h and h[0][0] <= t:
                    rec = pop()  # type: ignore[misc]
                    if rec[0] - rec[6] > tmo:
                        settle(rec)
                    else:
                        out_append(rec)
            if len(h) >= caps[k] or not avail[k]:
                out_append((t, BLOCKED, seq, c, cls, size, t, k, NAN, NAN,
                            "" if avail[k] else "node unavailable"))
            else:
                svc = size * inv_mu[k]
                start = last[k]
                if start < t:
                    start = t
                done = start + svc
                last[k] = done
                h.append((done, OK, seq, c, cls, size, t, k, svc, svc))
        if len(out) >= flush_rows:
            sink(out.copy())
            out.clear()

    # -- let in-flight requests finish (churn goes on meanwhile) ----------------------
    end = last_arrival
    while any(held):
        if t_churn == INF:
            end = max(end, max(max(r[0] for r in h) for h in held if h))
            for k in range(nn):
                advance(k, INF)
            break
        for k in range(nn):
            advance(k, t_churn)
        if not any(held):
            break
        end = t_churn
        change(pending_node(), t_churn)
        t_churn = next_churn()
    if out:
        end = max(end, max(r[0] for r in out))
        sink(out.copy())
        out.clear()
    return SimResult(
        seed=seed,
        requests=n,
        last_arrival_ms=last_arrival,
        end_ms=end,
        transitions=transitions,
        per_request=not fast,
        wall_s=time.perf_counter() - wall0,
    )


__all__ = [
    "BLOCKED",
    "CLASSES",
    "LOST",
    "OK",
    "OUTCOME_NAMES",
    "ROW_FIELDS",
    "TIMEOUT",
    "AvailabilitySink",
    "Row",
    "RowSink",
    "SimResult",
    "client_names",
    "is_per_request",
    "node_names",
    "simulate",
]
