"""Discrete-event engine for size-based assignment (seed 002b): SITA, TAGS, LWL, ...

`sim.engine.simulate` hands a scenario here when its policy is one of
`controller.policies.size_based`'s (or any policy that kills tasks at a stage limit,
needs the size or needs the hosts' remaining work). The same policy objects decide:

* `decide(view, Request(cls, client, size), rng)` picks the first host for every
  arrival; the view carries `in_system` and `work_left` (model ms) when the policy
  says it needs them (`needs_work_left`).
* A host serves FIFO, one task at a time; a task of size s at a host of rate mu
  needs s/mu. If s exceeds the host's `stage_limit`, the host serves it for
  limit/mu, kills it (that service is counted as wasted) and the task restarts from
  scratch at `next_stage` (TAGS), keeping its request id; every host visited is in
  the row's `hosts` column (`h1>h2`), the killed work in `wasted_ms`.

Arrivals, classes, clients and sizes are `fogsdn.workload.arrival_blocks`, as in the
main engine and the live clients: every engine and policy sees the same tasks for a seed.
A task that finds its host full is `blocked` (at a later TAGS stage too); a client
that gives up records `timeout` while the hosts still serve the task to the end, as
in the main engine. OFN churn is not modelled here (a clear error says so).

Row layout: the main engine's `ROW_FIELDS`, then `hosts` and `wasted`. `service`
is the host time the task used (killed work included); `nominal` is size / mu at
the host that completed it, so `node_ms - service` is the time it spent queueing.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from controller.policies import ClusterView, NodeView, Policy, Request
from fogsdn.scenario import Scenario
from fogsdn.streams import BLOCK, Stream, python_stream, replication_seed
from fogsdn.workload import arrival_blocks, client_names, hp_share
from sim.engine import BLOCKED, CLASSES, OK, TIMEOUT, Row, RowSink

NAN = math.nan


def uses_size_engine(policy: Policy) -> bool:
    """Whether a policy needs this engine (stage limits, remaining work, sizes)."""
    from controller.policies.size_based import SIZE_POLICIES

    return (policy.name in SIZE_POLICIES or policy.needs_work_left or policy.needs_size
            or type(policy).stage_limit is not Policy.stage_limit)


def simulate_size_based(
    scenario: Scenario,
    sink: RowSink,
    policy: Policy,
    *,
    stop_t: float,
    max_n: int,
    replication: int,
    availability: Callable[[float, str, bool], None] | None,
    flush_rows: int = 8192,
) -> tuple[int, int, float, float]:
    """Run one replication; returns (requests, effective seed, last arrival, end time)."""
    if scenario.churn.eta > 0 or scenario.churn.initial == "unavailable":
        raise ValueError(f"policy {policy.name}: the size-based engine has no OFN churn "
                         "(set churn.eta: 0 and churn.initial: available)")
    seed = replication_seed(scenario.seed, replication)
    wl = scenario.workload
    p_hp = hp_share(wl)
    n_clients = wl.clients
    tmo = scenario.timeout_ms
    nodes = scenario.nodes
    nn = len(nodes)
    cnames = client_names(scenario)
    names = tuple(n.name for n in nodes)
    index = {n: k for k, n in enumerate(names)}
    caps = [n.capacity for n in nodes]
    mus = [n.mu for n in nodes]
    inv_mu = [1.0 / m for m in mus]
    if availability is not None:
        for k in range(nn):
            availability(0.0, names[k], True)

    base = tuple(NodeView(names[k], nodes[k].role, True, caps[k], mus[k]) for k in range(nn))
    view0 = ClusterView(base)
    limits = [policy.stage_limit(view0, names[k]) for k in range(nn)]
    nexts = []
    for k in range(nn):
        nxt = policy.next_stage(view0, names[k])
        nexts.append(-1 if nxt is None else index[nxt])
    need_load = policy.needs_work_left
    decide = policy.decide

    blocks = arrival_blocks(wl, seed)  # the arrivals every engine draws for this seed
    route_rng = python_stream(seed, Stream.ROUTING)
    held: list[deque[float]] = [deque() for _ in range(nn)]  # completion times per host
    last = [0.0] * nn
    out: list[Row] = []
    push_row = out.append
    # forwarded (killed) tasks: (t, order, host, seq, client, cls, size, t_send, busy,
    # wasted, hosts)
    moved: list[tuple[Any, ...]] = []
    order = 0

    def view_at(t: float) -> ClusterView:
        for k in range(nn):
            h = held[k]
            while h and h[0] <= t:
                h.popleft()
        return ClusterView(tuple(
            NodeView(names[k], base[k].role, True, caps[k], mus[k], len(held[k]),
                     work_left=last[k] - t if last[k] > t else 0.0)
            for k in range(nn)))

    def arrive(t: float, k: int, seq: int, c: int, cls: int, size: float, t_send: float,
               busy: float, wasted: float, hosts: str) -> None:
        nonlocal order
        h = held[k]
        while h and h[0] <= t:
            h.popleft()
        hosts = names[k] if not hosts else hosts + ">" + names[k]
        if len(h) >= caps[k]:
            push_row((t, BLOCKED, seq, c, cls, size, t_send, k, NAN, NAN,
                      f"{names[k]} full", hosts, wasted))
            return
        start = last[k] if last[k] > t else t
        lim = limits[k]
        killed = size > lim and nexts[k] >= 0
        svc = (lim if killed else size) * inv_mu[k]
        done = start + svc
        last[k] = done
        h.append(done)
        busy += svc
        if killed:
            order += 1
            heapq.heappush(moved, (done, order, nexts[k], seq, c, cls, size, t_send, busy,
                                   wasted + svc, hosts))
            return
        nominal = size * inv_mu[k]
        if done - t_send > tmo:
            push_row((t_send + tmo, TIMEOUT, seq, c, cls, size, t_send, k, busy, nominal,
                      f"node finished at {done:.6f}", hosts, wasted))
        else:
            push_row((done, OK, seq, c, cls, size, t_send, k, busy, nominal, "", hosts, wasted))

    cseq = [0] * n_clients
    t = 0.0
    n = 0
    j = BLOCK
    ia: Sequence[float] = ()
    cu: Sequence[float] = ()
    cl: Sequence[int] = ()
    sz: Sequence[float] = ()
    last_arrival = 0.0
    while n < max_n:
        if j == BLOCK:
            block = next(blocks)
            ia, cu, cl, sz = block.interarrival, block.class_u, block.client, block.size
            j = 0
        t += ia[j]
        if t >= stop_t:
            break
        while moved and moved[0][0] <= t:
            ev = heapq.heappop(moved)
            arrive(ev[0], *ev[2:])
        cls = 0 if cu[j] < p_hp else 1
        c = cl[j]
        size = sz[j]
        j += 1
        seq = cseq[c]
        cseq[c] = seq + 1
        n += 1
        last_arrival = t
        view = view_at(t) if need_load else view0
        name = decide(view, Request(CLASSES[cls], cnames[c], size), route_rng)
        try:
            k = index[name]
        except KeyError:
            raise ValueError(f"policy {policy.name} chose unknown node {name!r}") from None
        arrive(t, k, seq, c, cls, size, t, 0.0, 0.0, "")
        if len(out) >= flush_rows:
            sink(out.copy())
            out.clear()
    while moved:
        ev = heapq.heappop(moved)
        arrive(ev[0], *ev[2:])
    end = max((r[0] for r in out), default=last_arrival)
    end = max(end, last_arrival, *last)
    if out:
        sink(out.copy())
        out.clear()
    return n, seed, last_arrival, end


__all__ = ["simulate_size_based", "uses_size_engine"]
