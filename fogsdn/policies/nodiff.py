"""Seed 000's conventional scheme: no class differentiation, alpha to the FN, beta to OFNs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import Role, TaskClass
from fogsdn.policies.base import ClusterView, Policy, RouteTable, even


@dataclass
class NoDiff(Policy):
    name: ClassVar[str] = "nodiff"

    def routes(self, view: ClusterView) -> RouteTable:
        fns, ofns = view.up(Role.FN), view.up(Role.OFN)
        alpha = self.spec.alpha
        if ofns and alpha < 1.0:
            split = {**even(fns, alpha), **even(ofns, 1.0 - alpha)}
        else:
            split = even(fns)
        return {TaskClass.HP: split, TaskClass.LP: split}
