"""Seed 000's basic baseline: no OFN at all, everything to the FN."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from controller.policies.base import ClusterView, Policy, RouteTable, even
from fogsdn.scenario import Role, TaskClass


@dataclass
class Basic(Policy):
    name: ClassVar[str] = "basic"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        return {TaskClass.HP: fns, TaskClass.LP: fns}
