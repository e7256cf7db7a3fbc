"""Discrete-event engine: the scenario's queues, OFN churn and policy in simulated time.

The hot path avoids per-event objects and a global event heap so pure Python runs
millions of requests a minute: FIFO nodes know each completion on acceptance and settle
lazily, arrivals come in numpy blocks, proactive route tables are cached per availability
state, and only kills need a heap. Semantics and the why in full: docs/simulator.md.
No I/O: rows (`fogsdn.sim.rows`) go to a sink in batches, close to but not exactly time order.
A `Simulator` runs a replication whole or in steps of model time; `simulate` runs it whole.
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fogsdn.controller.path_choice import path_router
from fogsdn.controller.rt_measure import PathStats
from fogsdn.core.churn import ofn_changes
from fogsdn.core.faults import cut_changes
from fogsdn.core.latency import node_net_ms
from fogsdn.core.scenario import Discipline, LeaveMode, Role, Scenario, Servers, scenario_graph
from fogsdn.core.streams import BLOCK, Stream, draw_capacities, python_stream, replication_seed
from fogsdn.core.workload import arrival_blocks, client_names, hp_share
from fogsdn.models.network_power import PathOption
from fogsdn.models.service_queue import ClassQueue
from fogsdn.policies import (
    ClusterView,
    NodeView,
    Policy,
    Request,
    is_per_request,
    make_policy,
    node_view,
)
from fogsdn.sim.policy_tables import PolicyTables, guarded
from fogsdn.sim.rows import (
    BLOCKED,
    CLASSES,
    LOST,
    OK,
    TIMEOUT,
    AvailabilitySink,
    Row,
    RowSink,
    node_names,
)

KILLED = 4  # held at a host that will kill it at its stage limit; never a row

FLUSH_ROWS = 8192
NO_LIMIT = 1 << 62  # requests: no limit
NAN = math.nan
INF = math.inf


@dataclass(frozen=True)
class SimResult:
    seed: int  # the effective seed (scenario seed + replication)
    requests: int  # arrivals generated, each of which produced exactly one row
    last_arrival_ms: float
    end_ms: float  # when the last in-flight request was settled
    transitions: int  # OFN availability changes after t = 0
    per_request: bool  # whether the policy was asked per request
    wall_s: float


class Simulator:
    """One replication, run whole (`run`) or in steps of model time (`step`): between
    steps every piece of state is kept, so a caller (the Gymnasium env) can change the
    policy and go on, in its own thread. Arguments as `simulate`'s; nothing runs before
    the first step.

    The event loop is a generator that yields only where a step's limit falls, so the
    hot loop is the whole run's (the same locals, the same two tests per arrival)."""

    def __init__(
        self,
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
        paths: dict[tuple[int, int], PathOption] | None = None,
    ) -> None:
        if requests is not None and requests < 0:
            raise ValueError("requests must be >= 0")
        if flush_rows < 1:
            raise ValueError("flush_rows must be >= 1")
        self.arrivals = 0  # requests arrived so far: each gives exactly one row
        self.next_arrival_ms = 0.0  # the arrival the run waits before (inf: none left)
        self.result: SimResult | None = None  # once the run has ended
        self._sink = sink
        self._until = INF  # the current step's limits: model time, requests arrived
        self._until_requests = NO_LIMIT
        self._tables: PolicyTables | None = None
        self._events = self._loop(scenario, requests, duration_ms, replication, availability,
                                  per_request, policy, flush_rows, paths)

    def run(self) -> SimResult:
        """The whole run (stopping as docs/simulator.md says), or the rest of it."""
        result = self.step()
        assert result is not None
        return result

    def step(self, until: float = INF, *, requests: int | None = None) -> SimResult | None:
        """Go on until model time `until`, or until `requests` requests in all have
        arrived, whichever comes first; the result once the run has ended, else None.

        The run then waits before its next arrival (`next_arrival_ms`, at or after
        `until`); churn and kills between the last arrival and that one happen when the
        run goes on, as in a whole run, and completions are settled lazily, so the rows
        handed to the sink by then are those of the requests settled so far. Once the
        arrivals are over it waits before the next churn, kill or last completion at or
        after `until`. Stepping after the end returns the result again."""
        if self.result is None:
            self._until = until
            self._until_requests = NO_LIMIT if requests is None else requests
            try:
                next(self._events)
            except StopIteration as done:
                self.result = done.value
                self.arrivals, self.next_arrival_ms = self.result.requests, INF
        return self.result

    def policy_changed(self) -> None:
        """Forget the routes and stages asked of the policy so far: the next step asks it
        again (after a caller changed, say, its route weights)."""
        if self._tables is not None:
            self._tables.forget()

    def _hold(self, out: list[Row], n: int, next_arrival: float) -> Iterator[None]:
        """Wait for the next step, the rows so far handed to the sink."""
        if out:
            self._sink(out.copy())
            out.clear()
        self.arrivals, self.next_arrival_ms = n, next_arrival
        yield

    def _loop(
        self,
        scenario: Scenario,
        requests: int | None,
        duration_ms: float | None,
        replication: int,
        availability: AvailabilitySink | None,
        per_request: bool | None,
        policy: Policy | None,
        flush_rows: int,
        paths: dict[tuple[int, int], PathOption] | None,
    ) -> Generator[None, None, SimResult]:
        """The run, yielding where a step's limit falls (`step`)."""
        wall0 = time.perf_counter()
        if requests is None and duration_ms is None:
            duration_ms = scenario.duration_ms
        stop_t = INF if duration_ms is None else float(duration_ms)
        max_n = requests if requests is not None else NO_LIMIT
        sink = self._sink

        seed = replication_seed(scenario.seed, replication)
        scenario = draw_capacities(scenario, replication)
        policy = policy if policy is not None else make_policy(scenario.policy, scenario.workload)
        fast = not (per_request if per_request is not None else is_per_request(policy))
        reads_load = policy.reads_load or policy.needs_work_left
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
        # a single node that does not serve in arrival order is a ClassQueue (shared with
        # the worker); its completions are known only when each request starts
        ordered = [n.discipline is not Discipline.FIFO for n in nodes]
        special = [multi[k] or ordered[k] for k in range(nn)]  # not the inlined FIFO path
        held: list[Any] = [[] if multi[k] else ClassQueue(caps[k], nodes[k].discipline)
                           if ordered[k] else deque() for k in range(nn)]
        # what a view tells policies besides load: power figures and each path's network time
        net = node_net_ms(scenario, policy.paths(scenario_graph(scenario)))
        base_view = [node_view(nodes[k], True, net.get(names[k])) for k in range(nn)]
        idle_w = [v.power_idle_w for v in base_view]
        max_w = [v.power_max_w for v in base_view]
        net_ms = [v.net_ms for v in base_view]
        last = [0.0] * nn  # single server: when its last accepted request completes
        # seed 002a: each request's path among the k shortest (fogsdn.controller.path_choice)
        router = path_router(scenario, policy)
        chosen: dict[tuple[int, int], PathOption] = paths if paths is not None else {}
        fn0 = next(k for k in range(nn) if roles[k] is Role.FN)  # handoff target

        blocks = arrival_blocks(wl, seed)
        route_rng = python_stream(seed, Stream.ROUTING)
        rnd = route_rng.random

        out: list[Row] = []
        out_append = out.append

        # -- availability and churn (fogsdn.core.churn: the same events the live run replays) ----
        churn = scenario.churn
        avail = [True] * nn
        ofns = [k for k in range(nn) if roles[k] is Role.OFN]
        initial, changes = ofn_changes(churn, len(ofns), seed)
        if scenario.faults:  # cut_ofn: the scheduled forced departures (fogsdn.core.faults)
            initial, changes = cut_changes(initial, changes, [names[k] for k in ofns],
                                           scenario.faults)
        for j, k in enumerate(ofns):
            avail[k] = initial[j]
        if availability is not None:
            for k in range(nn):
                availability(0.0, names[k], avail[k])
        pending = next(changes, None)  # (t, OFN number, new state) of the next change

        # -- what the policy says per availability state: routes, stages, a view ----------
        tables = PolicyTables(policy, base_view, index)
        self._tables = tables

        # every row of a policy with stages (SITA, TAGS) carries hosts and wasted, as live
        staged = tables.stages(ClusterView(tuple(base_view)))[2]
        kill_at, next_at, has_stages = tables.stages(tables.view(avail))
        staged = staged or has_stages
        if staged and any(ordered):
            k = ordered.index(True)
            raise ValueError(f"nodes.{names[k]}.discipline: {nodes[k].discipline.value} cannot be "
                             f"simulated with policy {policy.name}, which kills and restarts "
                             "tasks (only fifo can)")

        # -- kills: (t, event id, next node, seq, client, cls, size, t_send, busy, wasted,
        #    hosts), in time order; a kill the churn made void is in `void` ----------------
        kills: list[tuple[Any, ...]] = []
        void: set[int] = set()
        kill_ids = 0

        # -- settling ------------------------------------------------------------------
        # the response time a per-request policy sees measured (NodeView.measured_rt_ms),
        # taken as the controller takes it live: each answered request's SYN-to-FIN span,
        # its sojourn plus its path's network time, known once it completes
        # (fogsdn.controller.rt_measure)
        measured = PathStats() if reads_load else None

        # a per-request learner (seed 002a's CPN-style path RNN) hears of each request as
        # it completes: the reward of the path it chose for it
        answered = policy.answered if policy.learns_per_request else None

        def settle(rec: Row) -> None:
            if rec[1]:  # KILLED: its restart is a kill event, not a row
                return
            if rec[0] - rec[6] > tmo:
                out_append((rec[6] + tmo, TIMEOUT, *rec[2:10], f"node finished at {rec[0]:.6f}",
                            *rec[11:]))
                if answered is not None:
                    answered(cnames[rec[3]], names[rec[7]], chosen.get((rec[3], rec[2])), tmo)
            else:
                out_append(rec)
                if measured is not None:
                    net = chosen[rec[3], rec[2]].delay_ms if router else (net_ms[rec[7]] or 0.0)
                    measured.add(names[rec[7]], rec[0] - rec[6] + net)
                    if answered is not None:
                        answered(cnames[rec[3]], names[rec[7]], chosen.get((rec[3], rec[2])),
                                 rec[0] - rec[6] + net)

        def advance(k: int, t: float) -> None:
            """Settle node k's completions up to time t."""
            h = held[k]
            if multi[k]:
                while h and h[0][0] <= t:
                    settle(heapq.heappop(h))
            elif ordered[k]:
                h.advance(t)
                if h.done:
                    for job in h.take_done():
                        settle((job.end, *job.payload))
            else:
                while h and h[0][0] <= t:
                    settle(h.popleft())

        def put(k: int, t: float, rec_tail: tuple[Any, ...]) -> float:
            """Queue a request at node k's tail at time t; its completion time. rec_tail is
            the row from `outcome` on; its `nominal` is the service it needs here."""
            svc = rec_tail[8]
            if multi[k]:
                done = t + svc
                heapq.heappush(held[k], (done, *rec_tail))
            elif ordered[k]:  # not staged (refused above): its end is not needed
                held[k].admit(t, rec_tail[3] == 0, svc, rec_tail)
                done = NAN
            else:
                start = last[k] if last[k] > t else t
                done = start + svc
                last[k] = done
                held[k].append((done, *rec_tail))
            return done

        def arrive(t: float, k: int, seq: int, c: int, cls: int, size: float, t_send: float,
                   busy: float, wasted: float, hosts: str) -> None:
            """A task of a staged policy reaches node k at time t (first stage or restart):
            blocked, served, or served up to k's stage limit and killed."""
            nonlocal kill_ids
            advance(k, t)
            hosts = hosts + ">" + names[k] if hosts else names[k]
            h = held[k]
            if len(h) >= caps[k] or not avail[k]:
                out_append((t, BLOCKED, seq, c, cls, size, t_send, k, NAN, NAN,
                            "" if avail[k] else "node unavailable", hosts, wasted))
                return
            lim = kill_at[k]
            if size > lim:
                svc = lim * inv_mu[k]
                kill_ids += 1
                done = put(k, t, (KILLED, seq, c, cls, size, t_send, k, busy + svc, svc, "", hosts,
                                  wasted, kill_ids))
                heapq.heappush(kills, (done, kill_ids, next_at[k], seq, c, cls, size, t_send,
                                       busy + svc, wasted + svc, hosts))
            else:
                svc = size * inv_mu[k]
                put(k, t, (OK, seq, c, cls, size, t_send, k, busy + svc, svc, "", hosts, wasted))

        def restart() -> None:
            """The earliest kill: its task starts again at its next stage."""
            ev = heapq.heappop(kills)
            if ev[1] in void:
                void.discard(ev[1])
            else:
                arrive(ev[0], ev[2], *ev[3:])

        def next_kill() -> float:
            return kills[0][0] if kills else INF

        transitions = 0

        def restage() -> None:
            """The stage plan for the availability now."""
            nonlocal kill_at, next_at
            kill_at, next_at, _ = tables.stages(tables.view(avail))

        def change() -> None:
            """The pending churn event: its OFN changes availability."""
            nonlocal transitions, pending
            assert pending is not None
            t, k = pending[0], ofns[pending[1]]
            transitions += 1
            advance(k, t)
            up = not avail[k]
            avail[k] = up
            if availability is not None:
                availability(t, names[k], up)
            pending = next(changes, None)
            if staged:
                restage()
            if up or churn.leave is LeaveMode.DRAIN:
                return
            h = held[k]
            if ordered[k]:  # each with the work it has left, as if in service: t + left
                recs = [(t + job.work, *job.payload) for job in h.clear(t)]
            else:
                recs = sorted(h, key=lambda r: r[6]) if multi[k] else list(h)
                h.clear()
            last[k] = t
            for r in recs:
                if r[1]:  # it would have been killed here and restarted: no longer
                    void.add(r[13])
            if churn.leave is LeaveMode.DROP:
                for r in recs:
                    out_append((t, LOST, *r[2:7], k, NAN, r[9], f"{names[k]} left (drop)",
                                *r[11:13]))
                return
            advance(fn0, t)
            note = f"handoff from {names[k]} at {t:.6f}"
            for i, r in enumerate(recs):
                in_service = i == 0 or special[k]
                left_here = max(0.0, r[0] - t) if in_service else r[9]
                if r[1]:  # killed at this stage: all the work it has left moves
                    svc = (r[5] - (r[9] - left_here) * mus[k]) * inv_mu[fn0]
                elif in_service:  # in service: the work it has left moves with it
                    svc = left_here * mus[k] * inv_mu[fn0]
                else:
                    svc = r[5] * inv_mu[fn0]
                if len(held[fn0]) >= caps[fn0]:
                    out_append((t, LOST, *r[2:7], k, NAN, r[9],
                                f"handoff from {names[k]}: {names[fn0]} full", *r[11:13]))
                elif len(r) > 11:  # staged: the host time it used so far, hosts, wasted
                    put(fn0, t, (OK, *r[2:7], fn0, r[8] - left_here + svc, svc, note,
                                 f"{r[11]}>{names[fn0]}", r[12]))
                else:
                    put(fn0, t, (OK, *r[2:7], fn0, svc, svc, note))

        def next_churn() -> float:
            return pending[0] if pending is not None else INF

        # -- per-request decisions ----------------------------------------------------
        def decide(t: float, cls: int, c: int, size: float, seq: int) -> int:
            if reads_load:
                for k in range(nn):
                    advance(k, t)
                view = ClusterView(
                    tuple(
                        NodeView(names[k], roles[k], avail[k], caps[k], mus[k], len(held[k]),
                                 multi_server=multi[k], power_idle_w=idle_w[k],
                                 power_max_w=max_w[k], net_ms=net_ms[k],
                                 work_left=sum(r[0] - t for r in held[k]) if multi[k]
                                 else held[k].work_left(t) if ordered[k]
                                 else (last[k] - t if last[k] > t else 0.0),
                                 measured_rt_ms=measured.recent(names[k]) if measured else None)
                        for k in range(nn)
                    )
                )
            else:
                view = tables.view(avail)
            request = Request(CLASSES[cls], cnames[c], size, t_ms=t)
            name = guarded(policy, "decide", policy.decide, view, request, route_rng)
            if router is not None and name in index:
                chosen[c, seq] = guarded(
                    policy, "choose_path", router.choose,
                    lambda menu: policy.choose_path(view, request, name, menu), cnames[c], name, t)
            try:
                return index[name]
            except KeyError:
                raise ValueError(f"policy {policy.name} chose unknown node {name!r}") from None

        # -- main loop ---------------------------------------------------------------------
        table = tables.routes(avail) if fast else []
        t_churn = next_churn()
        t_next = t_churn  # the next churn or kill event
        cseq = [0] * n_clients
        t = 0.0
        last_arrival = 0.0
        n = 0
        j = BLOCK
        ia: Sequence[float] = ()
        cu: Sequence[float] = ()
        cl: Sequence[int] = ()
        sz: Sequence[float] = ()
        popleft_of = [None if special[k] else held[k].popleft for k in range(nn)]
        # a step's limits within the run's: where the loop stops or waits for the next step
        lim_t, lim_n = min(stop_t, self._until), min(max_n, self._until_requests)
        while True:
            if j == BLOCK:
                block = next(blocks)
                ia, cu, cl, sz = block.interarrival, block.class_u, block.client, block.size
                j = 0
            t += ia[j]
            if t >= lim_t or n >= lim_n:
                if t >= stop_t or n >= max_n:
                    break
                while t >= lim_t or n >= lim_n:  # wait before the arrival at t
                    yield from self._hold(out, n, t)
                    lim_t, lim_n = min(stop_t, self._until), min(max_n, self._until_requests)
                # what the policy says now, should the caller have changed it
                if fast:
                    table = tables.routes(avail)
                if staged:
                    restage()
            while t_next <= t:
                if next_kill() <= t_churn:
                    restart()
                else:
                    change()
                    t_churn = next_churn()
                    if fast:
                        table = tables.routes(avail)
                t_next = min(t_churn, next_kill())
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
                k = decide(t, cls, c, size, seq)
            h = held[k]
            if staged:
                arrive(t, k, seq, c, cls, size, t, 0.0, 0.0, "")
                if kills and kills[0][0] < t_next:
                    t_next = kills[0][0]
            elif special[k]:
                if multi[k]:
                    while h and h[0][0] <= t:
                        settle(heapq.heappop(h))
                else:
                    advance(k, t)
                if len(h) >= caps[k] or not avail[k]:
                    out_append((t, BLOCKED, seq, c, cls, size, t, k, NAN, NAN,
                                "" if avail[k] else "node unavailable"))
                elif multi[k]:
                    svc = size * inv_mu[k]
                    heapq.heappush(h, (t + svc, OK, seq, c, cls, size, t, k, svc, svc))
                else:
                    svc = size * inv_mu[k]
                    h.admit(t, cls == 0, svc, (OK, seq, c, cls, size, t, k, svc, svc))
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

        # -- let in-flight requests finish (churn and kills go on meanwhile) ---------------
        end = last_arrival
        while any(held):
            t_kill = next_kill()
            if t_kill <= t_churn:
                # when the next kill, or with no more events the last completion, happens
                t_event = t_kill if t_kill < INF else max(
                    h.last_end() if ordered[k] else max(r[0] for r in h)
                    for k, h in enumerate(held) if h)
            else:
                t_event = t_churn
            while t_event >= self._until:
                yield from self._hold(out, n, INF)
            if t_kill <= t_churn:
                if t_kill == INF:  # no more events: every node finishes what it holds
                    end = max(end, t_event)
                    for k in range(nn):
                        advance(k, INF)
                    break
                end = max(end, t_kill)
                restart()
            else:
                for k in range(nn):
                    advance(k, t_churn)
                if not any(held):
                    break
                end = t_churn
                change()
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
    paths: dict[tuple[int, int], PathOption] | None = None,
) -> SimResult:
    """Run one replication (stopping as docs/simulator.md says). `per_request=True` forces
    `policy.decide` per request (same trace; for tests); `flush_rows`: rows per sink call;
    `paths` gets a path-choosing policy's path per (client index, seq) for the sinks."""
    return Simulator(scenario, sink, requests=requests, duration_ms=duration_ms,
                     replication=replication, availability=availability,
                     per_request=per_request, policy=policy, flush_rows=flush_rows,
                     paths=paths).run()
