"""A dispatch policy that is a decision table over the exact chain's states (pure).

`scripts/optimize_policy.py` writes a scenario's optimal policy as a subclass holding the
table (docs/policies.md, "The optimal policy"); a view the table does not cover falls
back to the up node with room with the shortest expected stay.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import TaskClass
from fogsdn.policies.base import ClusterView, NodeView, Policy, PolicyError, Request, RouteTable

# Per class, one character per state: the index of the chosen node ("0"-"9", then
# letters), MIXED_MARK where `MIXED` holds the probabilities, FALLBACK_MARK for a state
# the optimum never visits (the fallback decides there).
MIXED_MARK = "*"
FALLBACK_MARK = "-"
CODES = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def encode_choice(k: int) -> str:
    if not 0 <= k < len(CODES):
        raise ValueError(f"a table holds at most {len(CODES)} nodes, got index {k}")
    return CODES[k]


@dataclass
class StateTablePolicy(Policy):
    """Decisions read from a table indexed by the chain's state (mixed radix over each
    node's (available, count) phases, as `fogsdn.exact.joint_chain` enumerates them)."""

    name: ClassVar[str] = "state_table"
    proactive: ClassVar[bool] = False
    NODES: ClassVar[tuple[str, ...]] = ()
    # per node, its phases in chain order: (available, count)
    PHASES: ClassVar[tuple[tuple[tuple[bool, int], ...], ...]] = ()
    HP: ClassVar[str] = ""
    LP: ClassVar[str] = ""
    # (class "hp"/"lp", state index) -> {node name: probability}
    MIXED: ClassVar[Mapping[tuple[str, int], Mapping[str, float]]] = {}

    def __post_init__(self) -> None:
        n = math.prod(len(ph) for ph in self.PHASES)
        if len(self.PHASES) != len(self.NODES) or len(self.HP) != n or len(self.LP) != n:
            raise PolicyError(f"policy {self.name!r}: table of {len(self.HP)}/{len(self.LP)} "
                              f"entries for {n} states of {len(self.NODES)} nodes")
        self._index = [{ph: i for i, ph in enumerate(phases)} for phases in self.PHASES]
        self._strides = [math.prod(len(ph) for ph in self.PHASES[k + 1:])
                         for k in range(len(self.PHASES))]

    def _state(self, view: ClusterView) -> int | None:
        """The chain's state index of this view, or None where the table has none."""
        if tuple(n.name for n in view.nodes) != self.NODES:
            return None
        s = 0
        for k, node in enumerate(view.nodes):
            i = self._index[k].get((bool(node.available), node.in_system or 0))
            if i is None:
                return None
            s += i * self._strides[k]
        return s

    @staticmethod
    def _fallback(view: ClusterView) -> str:
        def stay(n: NodeView) -> float:
            return ((n.in_system or 0) + 1) / n.mu if n.mu > 0 else float("inf")

        room = [n for n in view.nodes if n.available and (n.in_system or 0) < n.capacity]
        pool = room or [n for n in view.nodes if n.available] or list(view.nodes)
        return min(pool, key=stay).name

    def _row(self, view: ClusterView, cls: TaskClass) -> dict[str, float]:
        s = self._state(view)
        if s is None:
            return {self._fallback(view): 1.0}
        key = "hp" if cls is TaskClass.HP else "lp"
        code = (self.HP if key == "hp" else self.LP)[s]
        if code == FALLBACK_MARK:
            return {self._fallback(view): 1.0}
        if code == MIXED_MARK:
            return dict(self.MIXED[(key, s)])
        return {self.NODES[CODES.index(code)]: 1.0}

    def routes(self, view: ClusterView) -> RouteTable:
        return {cls: self._row(view, cls) for cls in TaskClass}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        row = self._row(view, request.cls)
        if len(row) == 1:  # a deterministic decision draws nothing
            return next(iter(row))
        return rng.choices(list(row), weights=list(row.values()))[0]
