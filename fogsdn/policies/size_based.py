"""Size-based task assignment (seed 002b) and its size-unaware baselines, as pure policies.

The hosts are the view's available nodes in scenario order, whatever their roles
(docs/size_based.md).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import ClassVar

from fogsdn.core.scenario import TaskClass, Workload
from fogsdn.core.stages import StageKind, StagePlan
from fogsdn.models.size_assignment import (
    SizeModelError,
    parse_cutoffs,
    partial_moment,
    sita_e_cutoffs,
    sita_u_cutoffs,
    support,
    tags_cutoffs,
)
from fogsdn.policies.base import ClusterView, NodeView, Policy, PolicyError, Request, RouteTable


def hosts_of(view: ClusterView) -> tuple[NodeView, ...]:
    hosts = tuple(n for n in view.nodes if n.available)
    if not hosts:
        raise PolicyError("no host is available")
    return hosts


@dataclass
class _Cutoffs(Policy):
    """Policies defined by h - 1 size cutoffs over the h available hosts."""

    proactive: ClassVar[bool] = False
    state_based: ClassVar[bool | None] = False  # reads the size (or kills): no CTMC
    reads_load: ClassVar[bool] = False
    # the cutoffs' meaning live and in the simulator: size intervals, or kill and restart
    stage_kind: ClassVar[StageKind] = "sita"
    _cache: dict[tuple[str, ...], tuple[float, ...]] = field(default_factory=dict, repr=False)
    # the last view asked about, its hosts and cutoffs (engines reuse one view object)
    _last: tuple[ClusterView, tuple[NodeView, ...], tuple[float, ...]] | None = field(
        default=None, repr=False)

    def _workload(self) -> Workload:
        if self.workload is None:
            raise PolicyError(f"policy {self.name!r} needs the scenario's workload (sizes, rate)")
        return self.workload

    def _compute(self, hosts: tuple[NodeView, ...]) -> tuple[float, ...]:
        raise NotImplementedError

    def hosts_and_cutoffs(self, view: ClusterView
                          ) -> tuple[tuple[NodeView, ...], tuple[float, ...]]:
        last = self._last
        if last is not None and last[0] is view:
            return last[1], last[2]
        hosts, cut = hosts_of(view), self.cutoffs(view)
        self._last = (view, hosts, cut)
        return hosts, cut

    def cutoffs(self, view: ClusterView) -> tuple[float, ...]:
        """s_1 < ... < s_(h-1) for the available hosts (cached per set of hosts)."""
        hosts = hosts_of(view)
        key = tuple(h.name for h in hosts)
        got = self._cache.get(key)
        if got is None:
            try:
                got = self._compute(hosts) if len(hosts) > 1 else ()
            except SizeModelError as err:
                raise PolicyError(f"policy {self.name!r}: {err}") from None
            self._cache[key] = got
        return got

    def intervals(self, view: ClusterView) -> list[tuple[str, float, float]]:
        """(host, low, high) per host: its size interval (SITA) or cutoffs (TAGS)."""
        lo, hi = support(self._workload().size)
        edges = [lo, *self.cutoffs(view), hi]
        return [(h.name, edges[i], edges[i + 1]) for i, h in enumerate(hosts_of(view))]

    def routes(self, view: ClusterView) -> RouteTable:
        """The share of tasks each host receives first (decisions are per request)."""
        share = self.first_shares(view)
        return {TaskClass.HP: share, TaskClass.LP: share}

    def first_shares(self, view: ClusterView) -> dict[str, float]:
        raise NotImplementedError

    def stages(self, view: ClusterView) -> StagePlan:
        hosts, cut = self.hosts_and_cutoffs(view)
        return StagePlan(self.stage_kind, tuple(h.name for h in hosts), cut)


@dataclass
class _Sita(_Cutoffs):
    needs_size: ClassVar[bool] = True

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if request.size is None:
            raise PolicyError(f"policy {self.name!r} needs the request's size")
        hosts, cut = self.hosts_and_cutoffs(view)
        return hosts[bisect_left(cut, request.size)].name

    def first_shares(self, view: ClusterView) -> dict[str, float]:
        size = self._workload().size
        return {name: partial_moment(size, 0, low if i else -1.0, high)
                for i, (name, low, high) in enumerate(self.intervals(view))}


@dataclass
class SitaE(_Sita):
    """Size intervals that give every host the same load (closed form)."""

    name: ClassVar[str] = "sita_e"

    def _compute(self, hosts: tuple[NodeView, ...]) -> tuple[float, ...]:
        return sita_e_cutoffs(self._workload().size, [h.mu for h in hosts])


@dataclass
class SitaU(_Sita):
    """Size intervals minimising mean slowdown (numerically, per-host P-K)."""

    name: ClassVar[str] = "sita_u"

    def _compute(self, hosts: tuple[NodeView, ...]) -> tuple[float, ...]:
        wl = self._workload()
        return sita_u_cutoffs(wl.lambda_hp + wl.lambda_lp, wl.size, [h.mu for h in hosts])


@dataclass
class Tags(_Cutoffs):
    """Task Assignment by Guessing Size: run at host i up to s_i, then kill the task and
    restart it from scratch at host i + 1. Cutoffs from `policy.params.cutoffs`
    ("s1,s2,...") or chosen to minimise the approximate mean response time."""

    name: ClassVar[str] = "tags"
    stage_kind: ClassVar[StageKind] = "tags"  # kill and restart

    def _compute(self, hosts: tuple[NodeView, ...]) -> tuple[float, ...]:
        wl = self._workload()
        given = self.spec.params.get("cutoffs")
        if given is not None:
            return parse_cutoffs(str(given), len(hosts), wl.size)
        return tags_cutoffs(wl.lambda_hp + wl.lambda_lp, wl.size, [h.mu for h in hosts])

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        return self.hosts_and_cutoffs(view)[0][0].name

    def first_shares(self, view: ClusterView) -> dict[str, float]:
        return {hosts_of(view)[0].name: 1.0}  # every task starts at the first stage


@dataclass
class _EvenShare(Policy):
    def routes(self, view: ClusterView) -> RouteTable:
        """Each host's share in the long run: even (identical hosts, for least-work-left;
        decisions are per request where the policy says so)."""
        hosts = hosts_of(view)
        even = {h.name: 1.0 / len(hosts) for h in hosts}
        return {TaskClass.HP: even, TaskClass.LP: even}


@dataclass
class RandomHost(_EvenShare):
    """Each task to a host chosen uniformly at random (a select group live)."""

    name: ClassVar[str] = "random"
    reads_load: ClassVar[bool] = False

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        hosts = hosts_of(view)  # one draw, as sampling the even route table would
        return hosts[min(int(rng.random() * len(hosts)), len(hosts) - 1)].name


@dataclass
class RoundRobin(_EvenShare):
    """Tasks to the available hosts in turn."""

    name: ClassVar[str] = "round_robin"
    proactive: ClassVar[bool] = False
    state_based: ClassVar[bool | None] = False  # its turn is state the chain does not have
    reads_load: ClassVar[bool] = False
    _turn: int = field(default=0, repr=False)

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        hosts = hosts_of(view)
        pick = hosts[self._turn % len(hosts)]
        self._turn += 1
        return pick.name


@dataclass
class LeastWorkLeft(_EvenShare):
    """Each task to the host with the least remaining work (the first such host on ties)."""

    name: ClassVar[str] = "least_work_left"
    proactive: ClassVar[bool] = False
    state_based: ClassVar[bool | None] = False  # reads the remaining work, not counts
    needs_work_left: ClassVar[bool] = True

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        hosts = hosts_of(view)
        if any(h.work_left is None for h in hosts):
            raise PolicyError("policy 'least_work_left' needs each host's work_left")
        return min(hosts, key=lambda h: h.work_left or 0.0).name


SIZE_POLICIES: tuple[str, ...] = ("sita_e", "sita_u", "tags", "random", "round_robin",
                                  "least_work_left")

__all__ = ["SIZE_POLICIES", "LeastWorkLeft", "RandomHost", "RoundRobin", "SitaE", "SitaU",
           "Tags", "hosts_of"]
