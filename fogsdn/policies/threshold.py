"""Worked example of a per-request policy (docs/policies.md): HP to the FN; LP to the
least-loaded OFN that is up only while the FN holds more than `policy.params.threshold`
requests (default 5), else to the FN.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import Role, TaskClass
from fogsdn.policies.base import ClusterView, NodeView, Policy, PolicyError, Request, RouteTable

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
        return min(nodes, key=lambda n: n.in_system or 0)  # unknown: empty; first wins ties

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
        """The decision for each class (the FN's load unknown: LP stays on the FN)."""
        hp, lp = self._targets(view)
        return {TaskClass.HP: {hp: 1.0}, TaskClass.LP: {lp: 1.0}}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        hp, lp = self._targets(view)
        return hp if request.cls is TaskClass.HP else lp
