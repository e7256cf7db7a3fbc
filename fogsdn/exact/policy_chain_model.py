"""The policy chain's description of a scenario run by a policy object (pure): the
nodes, rates, churn and the answers' kind (`PolicyModel`), and each node's service
rate at a count."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fogsdn.core.scenario import Discipline, LeaveMode, Role, Scenario, Servers
from fogsdn.exact.policy_probe import NodeSpecView, PolicyOutsideModel
from fogsdn.policies.base import Policy, is_per_request


@dataclass(frozen=True)
class PolicyModel:
    """Everything the chain depends on, from a scenario and a policy object."""

    policy: Policy
    nodes: tuple[NodeSpecView, ...]
    lam: tuple[float, float]  # (HP, LP) per model ms
    eta: float
    xi: float
    leave: LeaveMode
    deadline: float
    initial_available: bool
    per_request: bool

    @property
    def ofns(self) -> tuple[int, ...]:
        return tuple(k for k, n in enumerate(self.nodes) if n.role is Role.OFN)

    @property
    def handoff_target(self) -> int:
        return next(k for k, n in enumerate(self.nodes) if n.role is Role.FN)

    def availability_set(self) -> tuple[bool, ...]:
        """The availability states an OFN keeps visiting (the other is transient)."""
        if self.eta > 0 and self.xi > 0:
            return (True, False)
        if self.eta == 0 and self.xi == 0:
            return (self.initial_available,)
        return (True,) if self.eta == 0 else (False,)

    @property
    def churns(self) -> bool:
        return len(self.availability_set()) == 2 and bool(self.ofns)

    def p_available(self) -> float:
        s = self.availability_set()
        if len(s) == 1:
            return 1.0 if s[0] else 0.0
        return self.xi / (self.eta + self.xi)

    def phases(self, k: int) -> list[tuple[bool, int]]:
        """Node k's local states (available, count): an OFN out of range holds
        nothing unless it drains."""
        n = self.nodes[k]
        if n.role is not Role.OFN:
            return [(True, c) for c in range(n.capacity + 1)]
        out: list[tuple[bool, int]] = []
        for a in self.availability_set():
            top = n.capacity if (a or self.leave is LeaveMode.DRAIN) else 0
            out += [(a, c) for c in range(top + 1)]
        return out

    def n_states(self) -> int:
        return math.prod(len(self.phases(k)) for k in range(len(self.nodes)))

    def n_tagged(self) -> int:
        """Unknowns of the tagged-request chains (handoff with churn: per OFN, the joint
        states times the positions a request can hold there), else 0."""
        if not (self.leave is LeaveMode.HANDOFF and self.churns):
            return 0
        n = self.n_states()
        phases = [self.phases(k) for k in self.ofns]
        return sum(n * sum(c for a, c in ph if a) // len(ph) for ph in phases)

    def n_lumped(self) -> int:
        """States of the per-node chains when lumpable."""
        vecs = len(self.availability_set()) ** len(self.ofns)
        return sum(vecs * (n.capacity + 1) for n in self.nodes)

    def kill_rate(self, node: NodeSpecView) -> float:
        """The rate at which a request held at `node` is lost: an OFN's leave under
        `drop` while it churns, else 0."""
        churn_drop = self.leave is LeaveMode.DROP and self.churns
        return self.eta if node.role is Role.OFN and churn_drop else 0.0

    def lumpable(self) -> bool:
        """Each node's count with the availability vector is a chain of its own when
        routing depends on availability alone and no leave moves requests."""
        return (not self.per_request) and not (self.leave is LeaveMode.HANDOFF and self.churns)


def service_rate(node: NodeSpecView, count: np.ndarray) -> np.ndarray:
    return node.rate * (count if node.multi else (count >= 1))


def policy_model(scenario: Scenario, policy: Policy) -> PolicyModel:
    """The chain's description of `scenario` run by `policy`; ValueError with the reason
    where the scenario is outside any chain (sizes not exponential)."""
    size = scenario.workload.size
    if size.distribution != "exponential":
        raise PolicyOutsideModel(f"task sizes are {size.distribution}; the model needs "
                                 "exponential")
    for n in scenario.nodes:
        if n.discipline is not Discipline.FIFO:
            raise PolicyOutsideModel(f"nodes.{n.name}.discipline: {n.discipline.value}: the "
                                     "policy chain has FIFO nodes only; simulate it")
    nodes = tuple(NodeSpecView(n.name, n.role, n.capacity, n.mu, n.mu / size.mean,
                               n.servers is Servers.MULTI) for n in scenario.nodes)
    ch = scenario.churn
    return PolicyModel(
        policy=policy, nodes=nodes,
        lam=(scenario.workload.lambda_hp, scenario.workload.lambda_lp),
        eta=ch.eta, xi=ch.xi, leave=ch.leave, deadline=scenario.deadline_ms,
        initial_available=ch.initial != "unavailable", per_request=is_per_request(policy),
    )
