"""Pure dispatch policies. `make_policy` is the one way engines obtain one, so a user's
`policy.module` is loaded alike in every process (simulator, sweep workers, controller).
"""

from __future__ import annotations

import inspect
import math
import reprlib
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType

from fogsdn.core.errors import one_line
from fogsdn.core.scenario import PolicySpec, Role, Scenario, TaskClass, Workload
from fogsdn.core.stages import StagePlan
from fogsdn.policies.base import (
    USER_CODE_ERRORS,
    ClusterView,
    NodeView,
    Policy,
    PolicyError,
    Request,
    RouteTable,
    is_per_request,
    node_view,
    routes_for,
    safe_routes,
)
from fogsdn.policies.basic import Basic
from fogsdn.policies.greedy import LatencyGreedy, LeastLoaded, PowerGreedy
from fogsdn.policies.loader import error_line, load_policy_module
from fogsdn.policies.nodiff import NoDiff
from fogsdn.policies.path_budget import PathBudget
from fogsdn.policies.path_cpn import PathCpn
from fogsdn.policies.paths import (
    PathFewestSwitches,
    PathGoal,
    PathRank,
    PathRnn,
    PathShortest,
)
from fogsdn.policies.prioritized import Prioritized, PrioritizedCloud
from fogsdn.policies.rl import RlDqn, RlRnn
from fogsdn.policies.size_based import (
    LeastWorkLeft,
    RandomHost,
    RoundRobin,
    SitaE,
    SitaU,
    Tags,
)
from fogsdn.policies.threshold import Threshold
from fogsdn.policies.watchdog import user_call, watchdog

BUILT_IN_POLICIES: Mapping[str, type[Policy]] = MappingProxyType({
    p.name: p
    for p in (Prioritized, PrioritizedCloud, NoDiff, Basic, Threshold, SitaE, SitaU, Tags,
              RandomHost, RoundRobin, LeastWorkLeft,
              # the greedy baselines of the learning controller (issue 9) and its agents
              LeastLoaded, LatencyGreedy, PowerGreedy, RlDqn, RlRnn,
              # paths as the action (seed 002a)
              PathShortest, PathRank, PathFewestSwitches, PathGoal, PathRnn, PathCpn,
              PathBudget)
})

# what a spec can name without a module: the built-ins and this process's `register_policy`
POLICIES: dict[str, type[Policy]] = dict(BUILT_IN_POLICIES)


def refuse_built_in_name(cls: type[Policy], where: str) -> None:
    """A user's policy may not take a built-in's name: which ran would depend on the process."""
    if BUILT_IN_POLICIES.get(cls.name, cls) is not cls:
        raise PolicyError(f"{where}: policy name {cls.name!r} is a built-in policy's; "
                          "give yours another name")


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator for policies imported in this process (prefer `policy.module`,
    which every engine process loads)."""
    refuse_built_in_name(cls, policy_origin(cls))
    POLICIES[cls.name] = cls
    return cls


def user_policy_classes(module: str) -> tuple[type[Policy], ...]:
    """The policies a user's file or module defines, none named like a built-in."""
    classes = load_policy_module(module)
    for cls in classes:
        refuse_built_in_name(cls, module)
    return classes


def policy_class(spec: PolicySpec) -> type[Policy]:
    """The class a spec names: from its module when it has one, else a built-in."""
    known = ", ".join(sorted(POLICIES))
    if spec.module:
        classes = user_policy_classes(spec.module)
        by_name = {c.name: c for c in classes}
        if spec.name in by_name:
            return by_name[spec.name]
        if not spec.name and len(classes) == 1:
            return classes[0]
        if spec.name in POLICIES:  # a sweep comparing the user's policy with a built-in
            return POLICIES[spec.name]
        mine = ", ".join(sorted(by_name))
        if not spec.name:
            raise PolicyError(f"{spec.module}: defines several policies ({mine}); "
                              "set policy.name to one of them")
        raise PolicyError(f"policy.name: {spec.name!r} is neither in {spec.module} ({mine}) "
                          f"nor built in ({known})")
    try:
        return POLICIES[spec.name]
    except KeyError:
        raise PolicyError(f"policy.name: unknown policy {spec.name!r} (known: {known})") from None


def policy_origin(policy: Policy | type[Policy]) -> str:
    """Where a policy is written: its file, else its module's name."""
    cls = policy if isinstance(policy, type) else type(policy)
    try:
        return inspect.getsourcefile(cls) or cls.__module__
    except TypeError:
        return cls.__module__


def policy_failure(policy: Policy | type[Policy], what: str, err: BaseException) -> str:
    """One line naming the policy's file, the call that failed and the cause."""
    cls = policy if isinstance(policy, type) else type(policy)
    origin = policy_origin(cls)
    return (f"{origin}: policy {cls.name!r}: {what} raised {one_line(err)}"
            f"{error_line(err, origin)}")


def make_policy(spec: PolicySpec, workload: Workload | None = None) -> Policy:
    """The policy `spec` names; size-based policies also need the scenario's `workload`."""
    cls = policy_class(spec)
    try:  # a user's constructor is user code: under the time limit too
        with watchdog():
            return user_call(f"policy {cls.name!r}: building it",
                             partial(cls, spec=spec, workload=workload))
    except PolicyError as err:
        if spec.module:  # name the user's file
            raise PolicyError(f"{policy_origin(cls)}: {err}") from None
        raise
    except USER_CODE_ERRORS as err:
        raise PolicyError(policy_failure(cls, "building it", err)) from None


def route_problems(table: object, view: ClusterView) -> list[str]:
    """What is wrong with a route table for this view (empty when it is usable)."""
    if not isinstance(table, Mapping):
        return [f"routes returned {type(table).__name__}, not a mapping class -> weights"]
    names = {n.name for n in view.nodes}
    problems = []
    for cls in TaskClass:
        weights = table.get(cls)
        if not isinstance(weights, Mapping):
            problems.append(f"no weights for class {cls.value}")
            continue
        for node, w in weights.items():
            if node not in names:
                problems.append(f"class {cls.value}: unknown node {reprlib.repr(node)}")
            elif isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) \
                    or w < 0:
                problems.append(f"class {cls.value}: weight of {node} is {reprlib.repr(w)}, "
                                "not a finite number >= 0")
        if not any(isinstance(w, int | float) and w > 0 for w in weights.values()):
            problems.append(f"class {cls.value}: no node with positive weight")
    return problems


def probe_policy(policy: Policy, scenario: Scenario) -> None:
    """Ask `routes` once with the OFNs up and once down; one line on the first failure."""
    for ofn_up in (True, False):
        view = initial_view(scenario, ofn_available=ofn_up)
        try:
            with watchdog():
                table = user_call(f"policy {policy.name!r}: routes", policy.routes, view)
        except USER_CODE_ERRORS as err:
            raise PolicyError(policy_failure(policy, "routes", err)) from None
        problems = route_problems(table, view)
        if problems:
            state = "up" if ofn_up else "down"
            raise PolicyError(f"{policy_origin(policy)}: policy {policy.name!r}: routes with "
                              f"the OFNs {state}: {problems[0]}")


def initial_view(scenario: Scenario, ofn_available: bool = True) -> ClusterView:
    """The cluster as the scenario declares it, every FN up and OFNs as given."""
    return ClusterView(tuple(node_view(n, ofn_available if n.role is Role.OFN else True)
                             for n in scenario.nodes))


def stage_plan(scenario: Scenario) -> StagePlan:
    """The scenario's policy's `stages` with every node up (PolicyError: no cutoffs)."""
    policy = make_policy(scenario.policy, scenario.workload)
    try:
        return policy.stages(initial_view(scenario))
    except PolicyError:
        raise
    except USER_CODE_ERRORS as err:  # the user's code: one line naming its file
        raise PolicyError(policy_failure(policy, "stages", err)) from None


__all__ = ["BUILT_IN_POLICIES", "POLICIES", "Basic", "NoDiff", "Prioritized", "Threshold",
           "ClusterView", "NodeView", "Policy", "PolicyError", "Request", "RouteTable",
           "initial_view", "is_per_request", "make_policy", "node_view", "policy_class",
           "policy_failure", "policy_origin", "probe_policy", "route_problems",
           "refuse_built_in_name", "register_policy", "routes_for", "safe_routes", "stage_plan",
           "user_policy_classes"]
