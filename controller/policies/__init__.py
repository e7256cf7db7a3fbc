"""Pure dispatch policies. `make_policy` is the one way engines obtain one."""

from __future__ import annotations

from controller.policies.base import (
    ClusterView,
    NodeView,
    Policy,
    PolicyError,
    Request,
    RouteTable,
    routes_for,
)
from controller.policies.basic import Basic
from controller.policies.nodiff import NoDiff
from controller.policies.prioritized import Prioritized
from controller.policies.threshold import Threshold
from fogsdn.scenario import PolicySpec, Scenario

POLICIES: dict[str, type[Policy]] = {p.name: p for p in (Prioritized, NoDiff, Basic, Threshold)}


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator for user policies: `@register_policy class Mine(Policy): ...`."""
    POLICIES[cls.name] = cls
    return cls


def make_policy(spec: PolicySpec) -> Policy:
    try:
        cls = POLICIES[spec.name]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise PolicyError(f"policy.name: unknown policy {spec.name!r} (known: {known})") from None
    return cls(spec=spec)


def initial_view(scenario: Scenario, ofn_available: bool = True) -> ClusterView:
    """The cluster as the scenario declares it, every FN up and OFNs as given."""
    from fogsdn.scenario import Role

    return ClusterView(
        tuple(
            NodeView(n.name, n.role, ofn_available if n.role is Role.OFN else True,
                     n.capacity, n.mu)
            for n in scenario.nodes
        )
    )


__all__ = [
    "POLICIES",
    "ClusterView",
    "NodeView",
    "Policy",
    "PolicyError",
    "Request",
    "RouteTable",
    "initial_view",
    "make_policy",
    "register_policy",
    "routes_for",
]
