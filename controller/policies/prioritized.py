"""Seed 000's proposed scheme: HP to the static FN, LP to an OFN while one is in range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from controller.policies.base import ClusterView, Policy, RouteTable, even
from fogsdn.scenario import Role, TaskClass


@dataclass
class Prioritized(Policy):
    name: ClassVar[str] = "prioritized"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        ofns = even(view.up(Role.OFN))
        return {TaskClass.HP: fns, TaskClass.LP: ofns or fns}
