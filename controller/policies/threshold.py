"""Worked example of a per-request policy (see docs/policies.md).

HP always goes to the static FN. LP goes to an OFN only while the FN is busy, i.e.
holds more than `threshold` requests (`policy.params.threshold`, default 5), and
only to an OFN that is up; otherwise LP stays on the FN. Because the choice depends
on the FN's queue at the moment a request arrives, the policy is not proactive: the
engines call `decide` for every request with a fresh view that has `in_system` set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from controller.policies.base import ClusterView, NodeView, Policy, PolicyError, Request, RouteTable
from fogsdn.scenario import Role, TaskClass

DEFAULT_THRESHOLD = 5


@dataclass
class Threshold(Policy):
    name: ClassVar[str] = "threshold"
    proactive: ClassVar[bool] = False

    def __post_init__(self) -> None:
        raw = self.spec.params.get("threshold", DEFAULT_THRESHOLD)
        if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0 or raw != int(raw):
            raise PolicyError(f"policy.params.threshold: a whole number >= 0, got {raw!r}")
        self.threshold = int(raw)

    @staticmethod
    def _least_loaded(nodes: tuple[NodeView, ...]) -> NodeView:
        # an engine that does not know a node's load reports None: count it as empty
        return min(nodes, key=lambda n: n.in_system or 0)  # first one wins ties

    def _targets(self, view: ClusterView) -> tuple[str, str]:
        """(HP node, LP node) in this view."""
        fns = view.up(Role.FN)
        if not fns:
            raise PolicyError("threshold: no FN is up")
        fn = self._least_loaded(fns)
        ofns = view.up(Role.OFN)
        busy = fn.in_system is not None and fn.in_system > self.threshold
        lp = self._least_loaded(ofns).name if ofns and busy else fn.name
        return fn.name, lp

    def routes(self, view: ClusterView) -> RouteTable:
        """The decision for each class in this view (where the FN's load is unknown,
        LP stays on the FN)."""
        hp, lp = self._targets(view)
        return {TaskClass.HP: {hp: 1.0}, TaskClass.LP: {lp: 1.0}}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        hp, lp = self._targets(view)
        return hp if request.cls is TaskClass.HP else lp
