"""The same model written the usual SimPy way, as a yardstick for `fogsdn.sim.engine`.

Only for `scripts/bench_sim.py` and cross-checks (the `bench` extra): proactive policies,
single-server FIFO nodes, drain churn; same streams and sinks as the engine, so its
statistics match, not its trace (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator
from typing import Any

from fogsdn.core.churn import churn_events
from fogsdn.core.scenario import LeaveMode, Role, Scenario, Servers
from fogsdn.core.streams import BLOCK, Stream, python_stream, replication_seed
from fogsdn.core.workload import arrival_blocks, hp_share
from fogsdn.policies import ClusterView, NodeView, make_policy, routes_for
from fogsdn.sim.rows import BLOCKED, CLASSES, OK, TIMEOUT, Row, RowSink, node_names


def simulate_simpy(scenario: Scenario, sink: RowSink, *, requests: int,
                   replication: int = 0) -> float:
    """Run `requests` arrivals through a SimPy model; returns wall seconds."""
    import simpy  # the `bench` extra

    if any(n.servers is Servers.MULTI for n in scenario.nodes):
        raise ValueError("the SimPy yardstick models single-server nodes only")
    if scenario.churn.eta > 0 and scenario.churn.leave is not LeaveMode.DRAIN:
        raise ValueError("the SimPy yardstick models drain churn only")
    wall0 = time.perf_counter()
    seed = replication_seed(scenario.seed, replication)
    env = simpy.Environment()
    names = node_names(scenario)
    nodes = scenario.nodes
    res = [simpy.Resource(env, capacity=1) for _ in nodes]
    avail = [True] * len(nodes)
    wl = scenario.workload
    p_hp = hp_share(wl)
    tmo = scenario.timeout_ms
    policy = make_policy(scenario.policy)
    route_rng = python_stream(seed, Stream.ROUTING)
    out: list[Row] = []
    in_flight = [0]
    cache: dict[tuple[bool, ...], list[tuple[list[int], list[float]]]] = {}
    index = {n: k for k, n in enumerate(names)}

    def table() -> list[tuple[list[int], list[float]]]:
        key = tuple(avail)
        if key not in cache:
            view = ClusterView(tuple(NodeView(n.name, n.role, avail[k], n.capacity, n.mu)
                                     for k, n in enumerate(nodes)))
            rt = policy.routes(view)
            cache[key] = [([index[n] for n in routes_for(rt, c)], list(routes_for(rt, c).values()))
                          for c in CLASSES]
        return cache[key]

    def serve(k: int, seq: int, c: int, cls: int, size: float, t: float
              ) -> Generator[Any, Any, None]:
        with res[k].request() as req:
            yield req
            svc = size / nodes[k].mu
            yield env.timeout(svc)
        done = env.now
        in_flight[0] -= 1
        if done - t > tmo:
            out.append((t + tmo, TIMEOUT, seq, c, cls, size, t, k, svc, svc, ""))
        else:
            out.append((done, OK, seq, c, cls, size, t, k, svc, svc))
        if len(out) >= 8192:
            sink(out.copy())
            out.clear()

    def arrivals() -> Generator[Any, Any, None]:
        blocks = arrival_blocks(wl, seed)
        cseq = [0] * wl.clients
        for n in range(requests):
            j = n % BLOCK
            if j == 0:
                b = next(blocks)
                ia, cu, cl, sz = b.interarrival, b.class_u, b.client, b.size
            yield env.timeout(ia[j])
            cls = 0 if cu[j] < p_hp else 1
            c = cl[j]
            seq = cseq[c]
            cseq[c] += 1
            idx, w = table()[cls]
            k = route_rng.choices(idx, weights=w)[0]
            r = res[k]
            if not avail[k] or r.count + len(r.queue) >= nodes[k].capacity:
                out.append((env.now, BLOCKED, seq, c, cls, sz[j], env.now, k, math.nan, math.nan))
            else:
                in_flight[0] += 1
                env.process(serve(k, seq, c, cls, sz[j], env.now))

    def churn() -> Generator[Any, Any, None]:
        events = churn_events(scenario.churn, [n.name for n in nodes if n.role is Role.OFN], seed)
        for tr in events:
            if tr.t_ms > env.now:
                yield env.timeout(tr.t_ms - env.now)
            avail[index[tr.node]] = tr.available

    env.process(churn())
    arr = env.process(arrivals())
    env.run(until=arr)
    while in_flight[0]:  # let in-flight requests finish
        env.step()
    if out:
        sink(out.copy())
    return time.perf_counter() - wall0
