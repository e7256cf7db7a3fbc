"""Asking a policy object where each class goes, state by state, and checking that its
answer is a function of the chain's state alone (`PolicyOracle`; pure).

Poisoned view fields, a counting rng and states re-asked at random show a policy that
reads more than the state, samples other than its own weights, or keeps hidden memory;
`PolicyOutsideModel` says which (docs/model.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np

from fogsdn.core.scenario import Role, TaskClass
from fogsdn.exact.class_prediction import CLASSES
from fogsdn.policies.base import (
    USER_CODE_ERRORS,
    ClusterView,
    NodeView,
    Policy,
    Request,
    routes_for,
)
from fogsdn.policies.watchdog import user_call, watchdog

T = TypeVar("T")

# States re-asked at random at the end (hidden memory answers differently), and uniform
# draws fed to a `decide` that uses its rng (it qualifies if it only samples its weights).
RECHECK_STATES = 256
STRATA = 32
STATE_NODE_FIELDS = frozenset({"name", "role", "available", "capacity", "mu", "in_system"})
STATE_VIEW_FIELDS = frozenset({"nodes"})


class PolicyOutsideModel(ValueError):
    """The policy's answer is not a function of the chain's state; the message says why."""


def _poisoned(cls: type, allowed: frozenset[str], reads: set[str], extra: frozenset[str]) -> type:
    """A subclass of the frozen dataclass `cls` that records in `reads` the names of
    fields outside `allowed` (and of the names in `extra`) that are read."""
    watch = frozenset(f.name for f in fields(cls)) - allowed | extra
    if not watch:
        return cls

    def __getattribute__(self: Any, name: str) -> Any:  # noqa: N807
        if name in watch:
            reads.add(f"{cls.__name__}.{name}")
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
        self.reads: set[str] = set()  # attribute names a probed view or request was asked for
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
        return self._view_cls(tuple(
            self._node_view(k, bool(avail[k]), None if counts is None else int(counts[k]))
            for k in range(len(self.nodes))))

    def _where(self, view: ClusterView) -> str:
        return " ".join(
            f"{n.name}={'up' if n.available else 'down'}"
            + ("" if n.in_system is None else f"/{n.in_system}")
            for n in view.nodes)

    def _check_reads(self, view: ClusterView) -> None:
        if self.reads and not self.trusted:
            got = ", ".join(sorted(self.reads))
            raise PolicyOutsideModel(
                f"policy {self.policy.name!r} reads {got}, which the chain's state does not "
                f"hold (at {self._where(view)})")

    def _weights(self, view: ClusterView, cls: TaskClass) -> np.ndarray:
        try:
            table = self._user("routes", self.policy.routes, view)
            raw = {n: float(w) for n, w in table.get(cls, {}).items()}
        except USER_CODE_ERRORS as err:  # noqa: BLE001 - the user's code: name it, not crash
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

    def _user(self, what: str, call: Callable[..., T], *args: Any) -> T:
        """The policy's own code under the time limit (fogsdn.policies.watchdog): a loop
        in it is a one-line PolicyTimeout, not a prediction that never ends."""
        with watchdog():
            return user_call(f"policy {self.policy.name!r}: {what}", call, *args)

    def _decide(self, view: ClusterView, cls: TaskClass, rng: random.Random,
                client: str, size: float | None) -> int:
        try:
            name = self._user("decide", self.policy.decide, view,
                              self._req_cls(cls, client, size), rng)
        except USER_CODE_ERRORS as err:  # noqa: BLE001
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
            weights = routes_for(self._user("routes", self.policy.routes, view), cls)
        except USER_CODE_ERRORS as err:  # noqa: BLE001 - _weights has just succeeded
            raise PolicyOutsideModel(f"policy {self.policy.name!r}: {err}") from None
        names = list(weights)
        cum = np.cumsum([weights[n] for n in names])
        for i in range(STRATA):
            u = (i + 0.5) / STRATA
            rng = _CountingRandom([u])
            got = self._decide(view, cls, rng, "c1", 1.0)
            want = names[min(int(np.searchsorted(cum, u * cum[-1], side="right")), len(names) - 1)]
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
            self.reads.clear()
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
