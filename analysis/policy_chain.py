"""Exact CTMC built by asking a policy object where each class goes, state by state.

The state is the availability of each OFN and the count at each node. For every
state the policy gets the `ClusterView` of that state (`in_system` filled in) and
says where each class goes: the weights of `routes` for a proactive policy (asked
once per availability vector, with `in_system` None, as the engines ask it), or
the node `decide` returns for a per-request one. The answers make the generator;
the stationary vector and the tagged-request analysis of `analysis.ctmc` and
`analysis.response_time` give means, blocking, outage and the response-time CDF.

A policy qualifies when its answer is a function of that state alone; `probe_policy`
finds out, and `PolicyOutsideModel` says why not (see docs/model.md). Structure is
used where it exists: with routing that depends on availability only and no
handoff, each node's count with the availability vector is a Markov chain of its
own (exactly lumpable), solved by level reduction at any size; otherwise the joint
chain, by GTH when small and a sparse LU when large. Pure: no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from itertools import product
from typing import Any

import numpy as np
import scipy.sparse as sp

from analysis import linsolve
from analysis.ctmc import (
    CLASSES,
    Chain,
    ClassPrediction,
    gth_dense,
    gth_levels,
)
from analysis.response_time import (
    AbsorbingChain,
    ClassResponse,
    Component,
    ErlangMixture,
    TransientChain,
)
from controller.policies.base import (
    ClusterView,
    NodeView,
    Policy,
    PolicyError,
    Request,
    routes_for,
)
from fogsdn.scenario import LeaveMode, Role, Scenario, Servers, TaskClass

# Chains above this many states (joint states, plus the unknowns of the tagged chains
# under handoff) are refused: measured on this machine kind (2 cores, shared) by
# scripts/bench_analytic.py --policy-chain, 223,608 joint states of a per-request
# policy took 54 s (44 s asking the policy, 10 s solving) and 67 s for the whole
# prediction, so the limit sits below that; a handoff chain of
# 19,844 states with 2 x 189,000 tagged unknowns 88 s (docs/model.md).
MAX_STATES = 200_000
# Dense GTH (subtraction-free, O(N^3)) below this many states; sparse LU above.
GTH_MAX_STATES = 1_500
# States re-asked at random at the end: a policy whose answers drift (hidden memory)
# answers differently the second time.
RECHECK_STATES = 256
# Uniform draws fed to a `decide` that uses its rng, to see whether it only samples
# the route weights (it then qualifies, with those weights).
STRATA = 32

STATE_NODE_FIELDS = frozenset({"name", "role", "available", "capacity", "mu", "in_system"})
STATE_VIEW_FIELDS = frozenset({"nodes"})


class PolicyOutsideModel(ValueError):
    """The policy's answer is not a function of the chain's state; the message says why."""


class StateSpaceTooLarge(ValueError):
    """More states than this machine solves in under a minute; the message gives both."""


def too_large_message(n: int, limit: int = MAX_STATES) -> str:
    return (f"{n:,} states: above the {limit:,} this machine solves in under a minute "
            "(scripts/bench_analytic.py --policy-chain)")


# -- probing the policy --------------------------------------------------------------


class _Reads:
    """Attribute names a probed view or request was asked for."""

    def __init__(self) -> None:
        self.names: set[str] = set()


def _poisoned(cls: type, allowed: frozenset[str], reads: _Reads, extra: frozenset[str]
              ) -> type:
    """A subclass of the frozen dataclass `cls` that records reads of fields outside
    `allowed` (and of the names in `extra`)."""
    watch = frozenset(f.name for f in fields(cls)) - allowed | extra
    if not watch:
        return cls

    def __getattribute__(self: Any, name: str) -> Any:  # noqa: N807
        if name in watch:
            reads.names.add(f"{cls.__name__}.{name}")
        return object.__getattribute__(self, name)

    return type(f"Probe{cls.__name__}", (cls,), {"__getattribute__": __getattribute__})


class _CountingRandom(random.Random):
    """An rng that counts what is drawn from it and, when given draws, returns those."""

    def __init__(self, draws: Sequence[float] = ()) -> None:
        super().__init__(0)
        self.count = 0
        self._draws = list(draws)

    def random(self) -> float:
        self.count += 1
        if self._draws:
            return self._draws[(self.count - 1) % len(self._draws)]
        return super().random()

    def getrandbits(self, k: int) -> int:
        self.count += 1
        return super().getrandbits(k)


@dataclass(frozen=True)
class NodeSpecView:
    """What the chain knows of one node: the scenario's static facts."""

    name: str
    role: Role
    capacity: int
    mu: float  # per model ms for a task of size 1 (the view's mu)
    rate: float  # service rate of the chain: mu / mean size
    multi: bool


class PolicyOracle:
    """Asks a policy where each class goes in a state, and checks it may be asked.

    `route(avail, counts)` returns, per class, the probability of each node (a row
    over the scenario's nodes). Proactive policies are asked once per availability
    vector (in_system None); per-request ones once per state, through probed views
    and requests that record what the policy reads.
    """

    def __init__(self, policy: Policy, nodes: Sequence[NodeSpecView],
                 per_request: bool, poison: frozenset[str] = frozenset()) -> None:
        self.policy = policy
        self.nodes = tuple(nodes)
        self.per_request = per_request
        self.index = {n.name: k for k, n in enumerate(self.nodes)}
        self.declared = policy.state_based
        if self.declared is False:
            raise PolicyOutsideModel(
                f"policy {policy.name!r} declares itself not state-based (state_based = False)")
        self.trusted = self.declared is True
        self.reads = _Reads()
        self._node_cls = _poisoned(NodeView, STATE_NODE_FIELDS - poison, self.reads, poison)
        self._view_cls = _poisoned(ClusterView, STATE_VIEW_FIELDS, self.reads, frozenset())
        self._req_cls = _poisoned(Request, frozenset({"cls"}), self.reads, frozenset())
        self._cache: dict[tuple[bool, ...], np.ndarray] = {}
        # node views are frozen: one object per (node, available, count), shared by views
        self._node_views: dict[tuple[int, bool, int | None], NodeView] = {}
        self._rng = _CountingRandom()
        self.calls = 0

    def _node_view(self, k: int, available: bool, count: int | None) -> NodeView:
        key = (k, available, count)
        nv = self._node_views.get(key)
        if nv is None:
            n = self.nodes[k]
            nv = self._node_views[key] = self._node_cls(n.name, n.role, available, n.capacity,
                                                        n.mu, count)
        return nv

    def _view(self, avail: Sequence[bool], counts: Sequence[int] | None) -> ClusterView:
        nv = self._node_view
        if counts is None:
            return self._view_cls(tuple(nv(k, bool(avail[k]), None)
                                        for k in range(len(self.nodes))))
        return self._view_cls(tuple(nv(k, bool(avail[k]), int(counts[k]))
                                    for k in range(len(self.nodes))))

    def _where(self, view: ClusterView) -> str:
        return " ".join(
            f"{n.name}={'up' if n.available else 'down'}"
            + ("" if n.in_system is None else f"/{n.in_system}")
            for n in view.nodes)

    def _check_reads(self, view: ClusterView) -> None:
        if self.reads.names and not self.trusted:
            got = ", ".join(sorted(self.reads.names))
            raise PolicyOutsideModel(
                f"policy {self.policy.name!r} reads {got}, which the chain's state does not "
                f"hold (at {self._where(view)})")

    def _weights(self, view: ClusterView, cls: TaskClass) -> np.ndarray:
        try:
            table = self.policy.routes(view)
            raw = {n: float(w) for n, w in table.get(cls, {}).items()}
        except Exception as err:  # noqa: BLE001 - the user's code: name it, not crash
            raise PolicyOutsideModel(f"policy {self.policy.name!r}: routes raised "
                                     f"{type(err).__name__}: {err} (at {self._where(view)})"
                                     ) from None
        row = np.zeros(len(self.nodes))
        for name, w in raw.items():
            if not (math.isfinite(w) and w >= 0):
                raise PolicyOutsideModel(f"policy {self.policy.name!r}: weight {w!r} for "
                                         f"{name} (at {self._where(view)})")
            if w > 0:
                if name not in self.index:
                    raise PolicyOutsideModel(f"policy {self.policy.name!r} routes {cls} to "
                                             f"unknown node {name!r}")
                row[self.index[name]] += w
        total = row.sum()
        if total <= 0:
            raise PolicyOutsideModel(f"policy {self.policy.name!r}: no node with positive "
                                     f"weight for {cls} (at {self._where(view)})")
        return row / total

    def _decide(self, view: ClusterView, cls: TaskClass, rng: random.Random,
                client: str, size: float | None) -> int:
        try:
            name = self.policy.decide(view, self._req_cls(cls, client, size), rng)
        except Exception as err:  # noqa: BLE001
            raise PolicyOutsideModel(f"policy {self.policy.name!r}: decide raised "
                                     f"{type(err).__name__}: {err} (at {self._where(view)})"
                                     ) from None
        if name not in self.index:
            raise PolicyOutsideModel(f"policy {self.policy.name!r} chose unknown node {name!r}")
        return self.index[name]

    def _sampled_row(self, view: ClusterView, cls: TaskClass) -> np.ndarray:
        """A `decide` that draws from its rng qualifies only when, fed a grid of uniform
        draws, it answers as `random.choices` over the route weights would."""
        row = self._weights(view, cls)
        try:
            weights = routes_for(self.policy.routes(view), cls)
        except Exception as err:  # noqa: BLE001 - _weights has just succeeded
            raise PolicyOutsideModel(f"policy {self.policy.name!r}: {err}") from None
        names = list(weights)
        cum = np.cumsum([weights[n] for n in names])
        for i in range(STRATA):
            u = (i + 0.5) / STRATA
            rng = _CountingRandom([u])
            got = self._decide(view, cls, rng, "c1", 1.0)
            want = names[min(int(np.searchsorted(cum, u * cum[-1], side="right")),
                             len(names) - 1)]
            if rng.count > 1 or got != self.index[want]:
                raise PolicyOutsideModel(
                    f"policy {self.policy.name!r}: decide draws random numbers beyond the "
                    f"route weights (at {self._where(view)})")
        return row

    def _ask(self, avail: Sequence[bool], counts: Sequence[int] | None) -> np.ndarray:
        """One answer per class, as rows over the nodes (not cached)."""
        out = np.zeros((len(CLASSES), len(self.nodes)))
        self.calls += 1
        for c, name in enumerate(CLASSES):
            cls = TaskClass(name)
            self.reads.names.clear()
            view = self._view(avail, counts)
            if not self.per_request:
                out[c] = self._weights(view, cls)
                again = self._weights(self._view(avail, counts), cls)
                if not np.array_equal(out[c], again):
                    raise PolicyOutsideModel(f"policy {self.policy.name!r}: answers to the "
                                             f"same view differ (at {self._where(view)})")
                self._check_reads(view)
                continue
            rng = self._rng
            rng.count = 0
            k = self._decide(view, cls, rng, "c1", 1.0)
            self._check_reads(view)
            if rng.count:
                out[c] = self._sampled_row(view, cls)
                continue
            other = ("c1", 1.0) if self.trusted else ("c2", 2.0)
            k2 = self._decide(self._view(avail, counts), cls, rng, *other)
            if k2 != k:
                raise PolicyOutsideModel(f"policy {self.policy.name!r}: answers to the same "
                                         f"view differ (at {self._where(view)})")
            out[c, k] = 1.0
        return out

    def route(self, avail: Sequence[bool], counts: Sequence[int]) -> np.ndarray:
        if not self.per_request:
            key = tuple(bool(a) for a in avail)
            got = self._cache.get(key)
            if got is None:
                got = self._cache[key] = self._ask(avail, None)
            return got
        return self._ask(avail, counts)

    def recheck(self, avail: np.ndarray, counts: np.ndarray, rows: np.ndarray,
                seed: int = 0) -> None:
        """Ask some states again at the end: a policy with hidden memory drifts."""
        n = avail.shape[0]
        pick = np.random.default_rng(seed).choice(n, size=min(n, RECHECK_STATES), replace=False)
        for s in pick:
            got = self._ask(avail[s], counts[s] if self.per_request else None)
            if not np.allclose(got, rows[:, s, :], rtol=0, atol=1e-12):
                view = self._view(avail[s], counts[s])
                raise PolicyOutsideModel(f"policy {self.policy.name!r}: answers to the same "
                                         f"view differ when asked again (at "
                                         f"{self._where(view)})")


# -- the model's description of a scenario -------------------------------------------


@dataclass(frozen=True)
class PolicyModel:
    """Everything the chain depends on, from a scenario and a policy object."""

    policy: Policy
    nodes: tuple[NodeSpecView, ...]
    lam: tuple[float, float]  # (HP, LP) per model ms
    eta: float
    xi: float
    leave: LeaveMode
    deadline: float
    initial_available: bool
    per_request: bool

    @property
    def ofns(self) -> tuple[int, ...]:
        return tuple(k for k, n in enumerate(self.nodes) if n.role is Role.OFN)

    @property
    def handoff_target(self) -> int:
        return next(k for k, n in enumerate(self.nodes) if n.role is Role.FN)

    def availability_set(self) -> tuple[bool, ...]:
        """The availability states an OFN keeps visiting (the other is transient)."""
        if self.eta > 0 and self.xi > 0:
            return (True, False)
        if self.eta == 0 and self.xi == 0:
            return (self.initial_available,)
        return (True,) if self.eta == 0 else (False,)

    @property
    def churns(self) -> bool:
        return len(self.availability_set()) == 2 and bool(self.ofns)

    def p_available(self) -> float:
        s = self.availability_set()
        if len(s) == 1:
            return 1.0 if s[0] else 0.0
        return self.xi / (self.eta + self.xi)

    def phases(self, k: int) -> list[tuple[bool, int]]:
        """Node k's local states (available, count): an OFN out of range holds
        nothing unless it drains."""
        n = self.nodes[k]
        if n.role is not Role.OFN:
            return [(True, c) for c in range(n.capacity + 1)]
        out: list[tuple[bool, int]] = []
        for a in self.availability_set():
            top = n.capacity if (a or self.leave is LeaveMode.DRAIN) else 0
            out += [(a, c) for c in range(top + 1)]
        return out

    def n_states(self) -> int:
        return math.prod(len(self.phases(k)) for k in range(len(self.nodes)))

    def n_tagged(self) -> int:
        """Unknowns of the tagged-request chains (handoff with churn: per OFN, the joint
        states times the positions a request can hold there), else 0."""
        if not (self.leave is LeaveMode.HANDOFF and self.churns):
            return 0
        n = self.n_states()
        total = 0
        for k in self.ofns:
            ph = self.phases(k)
            total += n * sum(c for a, c in ph if a) // len(ph)
        return total

    def n_lumped(self) -> int:
        """States of the per-node chains when lumpable."""
        vecs = len(self.availability_set()) ** len(self.ofns)
        return sum(vecs * (n.capacity + 1) for n in self.nodes)

    def lumpable(self) -> bool:
        """Each node's count with the availability vector is a chain of its own when
        routing depends on availability alone and no leave moves requests."""
        return (not self.per_request) and not (self.leave is LeaveMode.HANDOFF and self.churns)


def service_rate(node: NodeSpecView, count: np.ndarray) -> np.ndarray:
    return node.rate * (count if node.multi else (count >= 1))


# -- joint chain -------------------------------------------------------------------------


@dataclass
class JointChain:
    """The joint state space in mixed radix over the nodes' local phases."""

    dims: tuple[int, ...]
    strides: np.ndarray
    avail: np.ndarray  # [N, K] bool
    count: np.ndarray  # [N, K] int
    phase: np.ndarray  # [N, K] local phase index
    tables: list[dict[tuple[bool, int], int]]  # per node: (available, count) -> phase
    routes: np.ndarray  # [2, N, K] class c's probability of node k in state s
    Q: sp.csr_matrix  # off-diagonal rates

    @property
    def size(self) -> int:
        return int(self.avail.shape[0])


def _enumerate(m: PolicyModel) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray,
                                        np.ndarray, list[dict[tuple[bool, int], int]]]:
    K = len(m.nodes)
    ph = [m.phases(k) for k in range(K)]
    dims = tuple(len(p) for p in ph)
    n = math.prod(dims)
    strides = np.array([math.prod(dims[k + 1:]) for k in range(K)], dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    phase = np.stack([(idx // strides[k]) % dims[k] for k in range(K)], axis=1)
    pa = [np.array([a for a, _ in p]) for p in ph]
    pc = [np.array([c for _, c in p]) for p in ph]
    avail = np.stack([pa[k][phase[:, k]] for k in range(K)], axis=1)
    count = np.stack([pc[k][phase[:, k]] for k in range(K)], axis=1)
    tables = [{st: i for i, st in enumerate(p)} for p in ph]
    return dims, strides, avail, count, phase, tables


def _phase_map(tables: list[dict[tuple[bool, int], int]], k: int,
               fn: Callable[[bool, int], tuple[bool, int] | None]) -> np.ndarray:
    """Local phase -> local phase after an event (-1: the event cannot happen)."""
    out = np.full(len(tables[k]), -1, dtype=np.int64)
    for (a, c), i in tables[k].items():
        got = fn(a, c)
        if got is not None and got in tables[k]:
            out[i] = tables[k][got]
    return out


def _transitions(m: PolicyModel, dims: tuple[int, ...], strides: np.ndarray,
                 avail: np.ndarray, count: np.ndarray, phase: np.ndarray,
                 tables: list[dict[tuple[bool, int], int]], routes: np.ndarray,
                 skip_ofn_events: int | None = None
                 ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(source, destination, rate) arrays of every transition of the joint chain.

    `skip_ofn_events=i` leaves out OFN i's completions and its leave (the tagged-request
    chain adds those itself)."""
    N = avail.shape[0]
    s = np.arange(N, dtype=np.int64)
    lam = np.asarray(m.lam)
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for k, node in enumerate(m.nodes):
        cap = node.capacity

        def arrive(a: bool, c: int, cap: int = cap) -> tuple[bool, int] | None:
            return (a, c + 1) if a and c < cap else None

        up = _phase_map(tables, k, arrive)
        down = _phase_map(tables, k, lambda a, c: (a, c - 1) if c >= 1 else None)
        pk = phase[:, k]
        rate = lam @ routes[:, :, k]
        dst = up[pk]
        ok = (dst >= 0) & (rate > 0)
        out.append((s[ok], s[ok] + (dst[ok] - pk[ok]) * strides[k], rate[ok]))
        if k != skip_ofn_events:
            rate = service_rate(node, count[:, k])
            dst = down[pk]
            ok = (dst >= 0) & (rate > 0)
            out.append((s[ok], s[ok] + (dst[ok] - pk[ok]) * strides[k], rate[ok]))
        if node.role is not Role.OFN or not m.churns:
            continue
        back = _phase_map(tables, k, lambda a, c: (True, c) if not a else None)
        dst = back[pk]
        ok = dst >= 0
        out.append((s[ok], s[ok] + (dst[ok] - pk[ok]) * strides[k], np.full(int(ok.sum()), m.xi)))
        if k == skip_ofn_events:
            continue
        if m.leave is LeaveMode.DRAIN:
            leave = _phase_map(tables, k, lambda a, c: (False, c) if a else None)
        else:
            leave = _phase_map(tables, k, lambda a, c: (False, 0) if a else None)
        dst = leave[pk]
        ok = dst >= 0
        target = s[ok] + (dst[ok] - pk[ok]) * strides[k]
        if m.leave is LeaveMode.HANDOFF:
            f = m.handoff_target
            cap = m.nodes[f].capacity
            moved = np.minimum(count[ok, f] + count[ok, k], cap)
            # FN phases are the counts themselves
            target = target + (moved - count[ok, f]) * strides[f]
        out.append((s[ok], target, np.full(int(ok.sum()), m.eta)))
    return out


def _routes_for_states(m: PolicyModel, oracle: PolicyOracle, avail: np.ndarray,
                       count: np.ndarray) -> np.ndarray:
    N, K = avail.shape
    routes = np.zeros((len(CLASSES), N, K))
    for s in range(N):
        routes[:, s, :] = oracle.route(avail[s], count[s])
    oracle.recheck(avail, count, routes)
    return routes


def build_joint(m: PolicyModel, oracle: PolicyOracle) -> JointChain:
    dims, strides, avail, count, phase, tables = _enumerate(m)
    routes = _routes_for_states(m, oracle, avail, count)
    N = avail.shape[0]
    parts = _transitions(m, dims, strides, avail, count, phase, tables, routes)
    r = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    v = np.concatenate([p[2] for p in parts])
    Q = sp.csr_matrix((v, (r, c)), shape=(N, N))
    Q.sum_duplicates()
    Q.setdiag(0.0)
    Q.eliminate_zeros()
    return JointChain(dims, strides, avail, count, phase, tables, routes, Q)


def joint_stationary(Q: sp.csr_matrix) -> tuple[np.ndarray, str]:
    """Stationary vector of a chain in which every state reaches state 0."""
    N = Q.shape[0]
    if N <= GTH_MAX_STATES:
        return gth_dense(Q.toarray()), "gth"
    out = np.asarray(Q.sum(axis=1)).ravel()
    At = (Q - sp.diags(out)).T.tocsc()
    B = At[1:, 1:].tocsc()
    rhs = -np.asarray(At[1:, 0].toarray()).ravel()
    pi = np.zeros(N)
    pi[0] = 1.0
    pi[1:] = np.maximum(linsolve.solve(B, rhs), 0.0)
    return pi / pi.sum(), "sparse" if N <= linsolve.DIRECT_MAX else "bicgstab"


# -- lumped per-node chains -------------------------------------------------------------


def _avail_vectors(m: PolicyModel) -> list[tuple[bool, ...]]:
    return list(product(m.availability_set(), repeat=len(m.ofns)))


def lumped_node(m: PolicyModel, k: int, routes_by_avail: dict[tuple[bool, ...], np.ndarray]
                ) -> np.ndarray:
    """P(availability vector, n_k) by level reduction over n_k; rows follow
    `_avail_vectors(m)`."""
    vecs = _avail_vectors(m)
    node = m.nodes[k]
    ofns = m.ofns
    mine = ofns.index(k) if k in ofns else -1
    P = len(vecs)
    C = node.capacity
    lam = np.asarray(m.lam)
    # state = level n * P + phase v; an OFN out of range holds nothing unless it drains
    valid = np.ones((C + 1, P), dtype=bool)
    if mine >= 0 and m.leave is not LeaveMode.DRAIN:
        for v, vec in enumerate(vecs):
            if not vec[mine]:
                valid[1:, v] = False
    order = np.flatnonzero(valid.ravel())
    index = np.full(valid.size, -1, dtype=np.int64)
    index[order] = np.arange(order.size)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def add(n: int, v: int, n2: int, v2: int, rate: float) -> None:
        if rate > 0:
            rows.append(int(index[n * P + v]))
            cols.append(int(index[n2 * P + v2]))
            vals.append(rate)

    vpos = {vec: i for i, vec in enumerate(vecs)}
    for v, vec in enumerate(vecs):
        up_k = mine < 0 or vec[mine]
        arr = float(lam @ routes_by_avail[vec][:, k]) if up_k else 0.0
        for n in range(C + 1):
            if not valid[n, v]:
                continue
            if n < C:
                add(n, v, n + 1, v, arr)
            if n >= 1:
                add(n, v, n - 1, v, float(service_rate(node, np.array(n))))
            if not m.churns:
                continue
            for j in range(len(ofns)):
                flip = list(vec)
                flip[j] = not vec[j]
                v2 = vpos[tuple(flip)]
                if vec[j]:
                    n2 = 0 if (j == mine and m.leave is not LeaveMode.DRAIN) else n
                    add(n, v, n2, v2, m.eta)
                else:
                    add(n, v, n, v2, m.xi)
    size = order.size
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(size, size))
    Q.sum_duplicates()
    lev = order // P
    starts = np.searchsorted(lev, np.arange(C + 2))
    hub = mine >= 0 and m.leave is not LeaveMode.DRAIN and m.churns
    chain = Chain(Q=Q, a=np.zeros(size, dtype=np.int64), k=lev, n=np.zeros(size, dtype=np.int64),
                  starts=starts, hub=hub)
    pi = gth_levels(chain) if C >= 1 else gth_dense(Q.toarray())
    out = np.zeros((P, C + 1))
    out[order % P, lev] = pi
    return out


# -- tagged request under handoff ---------------------------------------------------------


def handoff_components(m: PolicyModel, jc: JointChain, pi: np.ndarray, k: int
                       ) -> list[AbsorbingChain | None]:
    """A request accepted by OFN k under handoff, followed with the whole state.

    Transient states: (joint state with it at OFN k, j requests ahead of it there), and
    its position at the handoff FN after a leave (FIFO: later arrivals never matter).
    """
    node = m.nodes[k]
    f = m.handoff_target
    fn = m.nodes[f]
    N = jc.size
    cnt = jc.count
    at_ofn = jc.avail[:, k] & (cnt[:, k] >= 1)
    src_states = np.flatnonzero(at_ofn)
    # transient index of (s, j) for j < n_k(s)
    n_here = cnt[src_states, k]
    offs = np.zeros(N + 1, dtype=np.int64)
    offs_states = np.zeros(N, dtype=np.int64)
    offs_states[src_states] = n_here
    offs[1:] = np.cumsum(offs_states)
    n_ofn = int(offs[-1])
    n_fn = 1 if fn.multi else fn.capacity
    size = n_ofn + n_fn
    if n_ofn == 0:
        return [None] * len(CLASSES)
    s_of = np.repeat(src_states, n_here)
    j_of = np.arange(n_ofn) - offs[s_of]
    # background transitions of the state, OFN k's own completions and leave left out
    parts = _transitions(m, jc.dims, jc.strides, jc.avail, cnt, jc.phase, jc.tables,
                         jc.routes, skip_ofn_events=k)
    bg_r = np.concatenate([p[0] for p in parts])
    bg_c = np.concatenate([p[1] for p in parts])
    bg_v = np.concatenate([p[2] for p in parts])
    bg = sp.csr_matrix((bg_v, (bg_r, bg_c)), shape=(N, N))
    bg.sum_duplicates()
    bg = bg[src_states]  # rows: source states that hold the tagged request
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    out_rate = np.zeros(size)
    done = np.zeros(size)
    drop = np.zeros(size)
    # background moves keep j; an arrival at OFN k lands behind it
    coo = bg.tocoo()
    s_src = src_states[coo.row]
    for j in range(int(n_here.max()) if n_here.size else 0):
        sel = cnt[s_src, k] > j
        rows.append(offs[s_src[sel]] + j)
        cols.append(offs[coo.col[sel]] + j)
        vals.append(coo.data[sel])
    bg_out = np.asarray(bg.sum(axis=1)).ravel()
    out_rate[:n_ofn] += np.repeat(bg_out, n_here)
    # OFN k's completions: the tagged one, those ahead (j -> j-1), those behind
    n_s = cnt[s_of, k]
    if node.multi:
        ahead = j_of * node.rate
        behind = (n_s - 1 - j_of) * node.rate
        mine = np.full(n_ofn, node.rate)
    else:
        ahead = np.where(j_of >= 1, node.rate, 0.0)
        behind = np.zeros(n_ofn)
        mine = np.where(j_of == 0, node.rate, 0.0)
    stride = jc.strides[k]
    # OFN k's local phase of count n is n while available (phases list A first)
    m_ahead = ahead > 0
    tgt = s_of[m_ahead] - stride
    rows.append(np.flatnonzero(m_ahead))
    cols.append(offs[tgt] + j_of[m_ahead] - 1)
    vals.append(ahead[m_ahead])
    m_behind = behind > 0
    tgt = s_of[m_behind] - stride
    rows.append(np.flatnonzero(m_behind))
    cols.append(offs[tgt] + j_of[m_behind])
    vals.append(behind[m_behind])
    done[:n_ofn] = mine
    out_rate[:n_ofn] += ahead + behind + mine
    # OFN k leaves: the j ahead and then it join the FN's tail
    if m.churns:
        pos = cnt[s_of, f] + j_of + 1
        fits = pos <= fn.capacity
        tgt_fn = n_ofn + (np.zeros_like(pos) if fn.multi else pos - 1)
        rows.append(np.flatnonzero(fits))
        cols.append(tgt_fn[fits])
        vals.append(np.full(int(fits.sum()), m.eta))
        drop[:n_ofn] = np.where(fits, 0.0, m.eta)
        out_rate[:n_ofn] += m.eta
    # at the FN: position p -> p - 1, done from position 1 (multi: one stage)
    if fn.multi:
        done[n_ofn] = fn.rate
    else:
        if n_fn > 1:
            rows.append(np.arange(n_ofn + 1, size))
            cols.append(np.arange(n_ofn, size - 1))
            vals.append(np.full(n_fn - 1, fn.rate))
        done[n_ofn] = fn.rate
    out_rate[n_ofn:] = fn.rate
    T = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(size, size))
    T.sum_duplicates()
    chain = TransientChain(T, out_rate, done, drop)
    # initial weights: an arrival in state s routed to k and accepted is at (s + e_k, n_k)
    acc = jc.avail[:, k] & (cnt[:, k] < node.capacity)
    comps: list[AbsorbingChain | None] = []
    for cls in range(len(CLASSES)):
        s0 = np.flatnonzero(acc & (jc.routes[cls, :, k] > 0))
        w = np.zeros(size)
        if s0.size:
            np.add.at(w, offs[s0 + stride] + cnt[s0, k], pi[s0] * jc.routes[cls, s0, k])
        comps.append(AbsorbingChain(chain, w) if w.sum() > 0 else None)
    return comps


# -- predictions -------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyPrediction:
    """The policy chain's answer, with the interface of `analysis.ctmc.Prediction`."""

    model: PolicyModel
    hp: ClassPrediction
    lp: ClassPrediction
    node_means: dict[str, float]
    n_states: int  # of the joint chain
    method: str
    solved_states: int  # what was solved: the joint chain, or the per-node chains
    # per node, the mean share of its servers busy: P(n > 0), or E[n]/C with `multi`
    # (exact server power, models/power_model.py)
    node_busy: dict[str, float] = field(default_factory=dict)

    @property
    def p_available(self) -> float:
        return self.model.p_available()

    @property
    def mean_fn(self) -> float:
        return sum(v for k, v in self.node_means.items()
                   if self._role(k) is not Role.OFN)

    @property
    def mean_ofn(self) -> float:
        return sum(v for k, v in self.node_means.items() if self._role(k) is Role.OFN)

    def _role(self, name: str) -> Role:
        return next(n.role for n in self.model.nodes if n.name == name)

    def cls(self, name: str) -> ClassPrediction:
        if name not in CLASSES:
            raise ValueError(f"class must be hp or lp, got {name!r}")
        return self.hp if name == "hp" else self.lp

    def cdf(self, cls: str, t: np.ndarray | list[float], among: Any = "completed"
            ) -> np.ndarray:
        return self.cls(cls).cdf(np.asarray(t, dtype=float), among)

    def _common(self) -> dict[str, object]:
        return {"p_available": self.p_available, "mean_fn": self.mean_fn,
                "mean_ofn": self.mean_ofn, "mean_in_system": dict(self.node_means),
                "model": {"chain": "policy", "policy": self.model.policy.name,
                          "states": self.n_states, "method": self.method,
                          "solved_states": self.solved_states}}

    def means(self) -> dict[str, object]:
        return {"hp": self.hp.means(), "lp": self.lp.means(), **self._common()}

    def to_dict(self) -> dict[str, object]:
        return {"hp": self.hp.to_dict(), "lp": self.lp.to_dict(), **self._common()}


def _class_responses(m: PolicyModel, weights: list[list[np.ndarray]],
                     blocking: list[float], extra: list[list[Component]]
                     ) -> tuple[ClassPrediction, ClassPrediction]:
    """weights[c][k][n]: P(class-c arrival accepted at node k finding n there)."""
    preds = []
    for c, name in enumerate(CLASSES):
        comps: list[Component] = list(extra[c])
        for k, node in enumerate(m.nodes):
            w = weights[c][k]
            if w.size == 0 or w.sum() <= 0:
                continue
            kill = m.eta if (node.role is Role.OFN and m.leave is LeaveMode.DROP
                             and m.churns) else 0.0
            ww = np.array([w.sum()]) if node.multi else w
            comps.append(ErlangMixture(ww, node.rate, kill))
        resp = ClassResponse(comps, blocking[c])
        preds.append(ClassPrediction(name, m.lam[c], resp, m.deadline))
    return preds[0], preds[1]


def solve(m: PolicyModel, oracle: PolicyOracle, max_states: int = MAX_STATES
          ) -> PolicyPrediction:
    """Exact prediction; PolicyOutsideModel or StateSpaceTooLarge where it cannot."""
    K = len(m.nodes)
    n_joint = m.n_states()
    handoff_churn = m.leave is LeaveMode.HANDOFF and m.churns
    if m.lumpable():
        if m.n_lumped() > max_states:
            raise StateSpaceTooLarge(too_large_message(m.n_lumped(), max_states))
        vecs = _avail_vectors(m)
        routes_by = {vec: _route_avail(m, oracle, vec) for vec in vecs}
        p_vec = np.array([math.prod((m.p_available() if a else 1 - m.p_available())
                                    for a in vec) for vec in vecs]) if m.churns \
            else np.ones(len(vecs))
        weights: list[list[np.ndarray]] = [[np.zeros(0)] * K for _ in CLASSES]
        blocking = [0.0, 0.0]
        node_means: dict[str, float] = {}
        node_busy: dict[str, float] = {}
        for k, node in enumerate(m.nodes):
            pk = lumped_node(m, k, routes_by)  # [P, C+1]
            node_means[node.name] = float(pk.sum(axis=0) @ np.arange(node.capacity + 1))
            node_busy[node.name] = (node_means[node.name] / node.capacity if node.multi
                                    else float(1.0 - pk.sum(axis=0)[0]))
            mine = m.ofns.index(k) if k in m.ofns else -1
            for c in range(len(CLASSES)):
                w = np.zeros(node.capacity)
                for v, vec in enumerate(vecs):
                    r = routes_by[vec][c, k]
                    if r <= 0:
                        continue
                    if mine >= 0 and not vec[mine]:
                        blocking[c] += r * p_vec[v]
                        continue
                    w += r * pk[v, :-1]
                    blocking[c] += r * pk[v, -1]
                weights[c][k] = w
        hp, lp = _class_responses(m, weights, blocking, [[], []])
        return PolicyPrediction(m, hp, lp, node_means, n_joint, "lumped", m.n_lumped(),
                                node_busy)
    if n_joint > max_states:
        raise StateSpaceTooLarge(too_large_message(n_joint, max_states))
    if n_joint + m.n_tagged() > max_states:
        raise StateSpaceTooLarge(
            f"{n_joint:,} states and {m.n_tagged():,} in the chains of a request handed off: "
            f"{n_joint + m.n_tagged():,} above the {max_states:,} this machine solves in "
            "under a minute (scripts/bench_analytic.py --policy-chain)")
    jc = build_joint(m, oracle)
    pi, method = joint_stationary(jc.Q)
    weights = [[np.zeros(0)] * K for _ in CLASSES]
    blocking = [0.0, 0.0]
    extra: list[list[Component]] = [[], []]
    node_means = {}
    node_busy = {}
    for k, node in enumerate(m.nodes):
        node_means[node.name] = float(pi @ jc.count[:, k])
        node_busy[node.name] = (node_means[node.name] / node.capacity if node.multi
                                else float(pi @ (jc.count[:, k] > 0)))
        full = (~jc.avail[:, k]) | (jc.count[:, k] >= node.capacity)
        handed = (handoff_components(m, jc, pi, k)
                  if node.role is Role.OFN and handoff_churn else None)
        for c in range(len(CLASSES)):
            r = jc.routes[c, :, k] * pi
            blocking[c] += float(r[full].sum())
            if handed is not None:
                comp = handed[c]
                if comp is not None:
                    extra[c].append(comp)
                weights[c][k] = np.zeros(0)
                continue
            w = np.zeros(node.capacity)
            ok = ~full
            np.add.at(w, jc.count[ok, k], r[ok])
            weights[c][k] = w
    hp, lp = _class_responses(m, weights, blocking, extra)
    return PolicyPrediction(m, hp, lp, node_means, n_joint, method, n_joint, node_busy)


def _route_avail(m: PolicyModel, oracle: PolicyOracle, vec: tuple[bool, ...]) -> np.ndarray:
    avail = [True] * len(m.nodes)
    for j, k in enumerate(m.ofns):
        avail[k] = vec[j]
    return oracle.route(avail, [0] * len(m.nodes))


# -- from a scenario ---------------------------------------------------------------------


def is_per_request(policy: Policy) -> bool:
    """Whether the engines ask `decide` per request (the same test as sim.engine's)."""
    return (not policy.proactive) or type(policy).decide is not Policy.decide


def policy_model(scenario: Scenario, policy: Policy) -> PolicyModel:
    """The chain's description of `scenario` run by `policy`; ValueError with the reason
    where the scenario is outside any chain (sizes not exponential)."""
    size = scenario.workload.size
    if size.distribution != "exponential":
        raise PolicyOutsideModel(f"task sizes are {size.distribution}; the model needs "
                                 "exponential")
    nodes = tuple(NodeSpecView(n.name, n.role, n.capacity, n.mu, n.mu / size.mean,
                               n.servers is Servers.MULTI) for n in scenario.nodes)
    ch = scenario.churn
    return PolicyModel(
        policy=policy, nodes=nodes,
        lam=(scenario.workload.lambda_hp, scenario.workload.lambda_lp),
        eta=ch.eta, xi=ch.xi, leave=ch.leave, deadline=scenario.deadline_ms,
        initial_available=ch.initial != "unavailable", per_request=is_per_request(policy),
    )


def predict_policy(scenario: Scenario, policy: Policy, max_states: int = MAX_STATES,
                   poison: frozenset[str] = frozenset()) -> PolicyPrediction:
    """Exact prediction of `scenario` under the policy object `policy`."""
    m = policy_model(scenario, policy)
    try:
        oracle = PolicyOracle(policy, m.nodes, m.per_request, poison)
    except PolicyError as err:
        raise PolicyOutsideModel(str(err)) from None
    return solve(m, oracle, max_states)


__all__ = [
    "MAX_STATES",
    "PolicyModel",
    "PolicyOracle",
    "PolicyOutsideModel",
    "PolicyPrediction",
    "StateSpaceTooLarge",
    "policy_model",
    "predict_policy",
    "too_large_message",
]
