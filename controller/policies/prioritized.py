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


@dataclass
class PrioritizedCloud(Policy):
    """Seed 000's future work, offloading to the cloud: HP to the FN as in the proposed
    scheme, LP to an OFN while one is in range and to the cloud (not the FN) while none
    is, so the FN serves HP alone at any OFN status. With no cloud up, LP falls back to
    the FN as in the proposed scheme."""

    name: ClassVar[str] = "prioritized_cloud"

    def routes(self, view: ClusterView) -> RouteTable:
        fns = even(view.up(Role.FN))
        lp = even(view.up(Role.OFN)) or even(view.up(Role.CLOUD)) or fns
        return {TaskClass.HP: fns, TaskClass.LP: lp}
