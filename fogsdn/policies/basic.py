"""Seed 000's basic baseline: no OFN at all, everything to the FN."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import Role, TaskClass
from fogsdn.policies.base import ClusterView, Policy, RouteTable, even


@dataclass
class Basic(Policy):
    name: ClassVar[str] = "basic"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        return {TaskClass.HP: fns, TaskClass.LP: fns}
