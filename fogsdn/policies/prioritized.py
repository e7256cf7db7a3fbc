"""Seed 000's proposed scheme: HP to the static FN, LP to an OFN while one is in range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import Role, TaskClass
from fogsdn.policies.base import ClusterView, Policy, RouteTable, even


@dataclass
class Prioritized(Policy):
    name: ClassVar[str] = "prioritized"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        ofns = even(view.up(Role.OFN))
        return {TaskClass.HP: fns, TaskClass.LP: ofns or fns}


@dataclass
class PrioritizedCloud(Policy):
    """Seed 000's cloud offload: as `prioritized`, but LP goes to the cloud (not the FN)
    while no OFN is in range; with no cloud up, to the FN."""

    name: ClassVar[str] = "prioritized_cloud"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        lp = even(view.up(Role.OFN)) or even(view.up(Role.CLOUD)) or fns
        return {TaskClass.HP: fns, TaskClass.LP: lp}
