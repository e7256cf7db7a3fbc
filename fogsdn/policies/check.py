"""Check a policy before running it: python -m fogsdn.policies.check FILE_OR_MODULE

Modelled on Gymnasium's environment checker (docs/policies.md). Exit status 0 when
nothing failed, 1 otherwise, 2 when the file cannot be loaded; warnings do not fail.
"""

from __future__ import annotations

import argparse
import math
import random
import reprlib
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from fogsdn.core.latency import DECISION_BUDGET_SHARE, decision_budget_real_ms
from fogsdn.core.scenario import (
    PolicySpec,
    Role,
    Scenario,
    ScenarioError,
    TaskClass,
    absolute_policy_module,
    load_scenario,
    parse_scenario,
)
from fogsdn.policies import (
    ClusterView,
    NodeView,
    Policy,
    PolicyError,
    Request,
    initial_view,
    is_per_request,
    make_policy,
    policy_failure,
    route_problems,
    user_policy_classes,
)
from fogsdn.policies.base import USER_CODE_ERRORS
from fogsdn.policies.watchdog import PolicyTimeout, user_call, watchdog


@dataclass
class Report:
    policy: str
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, msg: str) -> None:
        if msg not in self.failures:
            self.failures.append(msg)

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    def lines(self) -> list[str]:
        head = "FAIL" if self.failures else "ok"
        return ([f"{head}: policy {self.policy!r}"]
                + [f"  FAIL {m}" for m in self.failures]
                + [f"  warn {m}" for m in self.warnings]
                + [f"  {m}" for m in self.notes])


def default_scenario() -> Scenario:
    """Seed 000's cluster: one FN, one OFN, two clients."""
    return parse_scenario({
        "name": "check", "duration_ms": 100.0,
        "workload": {"lambda_hp": 0.3, "lambda_lp": 0.5, "clients": 2},
        "nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
                  {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10}],
    }, source="checker")


def larger_view_nodes() -> tuple[NodeView, ...]:
    """A cluster larger than seed 000's: a policy must not assume one FN and one OFN."""
    return (NodeView("fn1", Role.FN, True, 20, 1.0), NodeView("fn2", Role.FN, True, 10, 0.5),
            NodeView("ofn1", Role.OFN, True, 10, 0.3), NodeView("ofn2", Role.OFN, True, 5, 0.6),
            NodeView("ofn3", Role.OFN, True, 8, 0.2), NodeView("cloud", Role.CLOUD, True, 100, 2.0))


def generated_views(scenario: Scenario, rng: random.Random, count: int) -> list[ClusterView]:
    """The scenario's cluster with OFNs up and down, then random availability and loads
    (FNs always up, `in_system` sometimes unknown) in it and in a larger cluster."""
    views = [initial_view(scenario, True), initial_view(scenario, False)]
    bases = [initial_view(scenario).nodes, larger_view_nodes()]
    for i in range(count):
        base = bases[i % 2]
        known = rng.random() < 0.8
        views.append(ClusterView(tuple(
            NodeView(n.name, n.role, n.role is Role.FN or rng.random() < 0.6, n.capacity, n.mu,
                     rng.randint(0, n.capacity) if known else None)
            for n in base)))
    return views


def _request(rng: random.Random, clients: int) -> Request:
    return Request(rng.choice(list(TaskClass)), f"c{rng.randint(1, clients)}",
                   rng.expovariate(1.0) if rng.random() < 0.5 else None)


def check_policy(policy: Policy, scenario: Scenario, views: int = 200, timed: int = 2000,
                 seed: int = 1) -> Report:
    """The checks, each call of the policy's code under the time limit
    (fogsdn.policies.watchdog): a call that loops is a failure naming it."""
    with watchdog():
        return _check_policy(policy, scenario, views, timed, seed)


def _check_policy(policy: Policy, scenario: Scenario, views: int, timed: int,
                  seed: int) -> Report:
    rep = Report(policy.name)
    rng = random.Random(seed)
    clients = scenario.workload.clients
    per_request = is_per_request(policy)
    rep.notes.append("asked per request (proactive = False or its own decide)" if per_request
                     else "proactive: engines realise routes() as rules, per cluster change")
    if policy.proactive and type(policy).decide is not Policy.decide:
        rep.warn("overrides decide but leaves proactive = True: every engine asks it per "
                 "request; set proactive = False to say so")
    own = {n.name for n in scenario.nodes}
    for view in generated_views(scenario, rng, views):
        names = {n.name for n in view.nodes}
        # the checker's own larger cluster tests that a policy does not assume seed 000's
        # one FN and one OFN: what fails there is a warning naming that cluster, not a
        # failure (a policy may be written for its scenario's names)
        fail = rep.fail if names == own else partial(_elsewhere, rep, names)
        try:
            table = user_call(f"policy {policy.name!r}: routes", policy.routes, view)
        except PolicyTimeout as err:  # a loop: asking it again would only wait again
            rep.fail(policy_failure(policy, "routes", err))
            return rep
        except USER_CODE_ERRORS as err:
            fail(policy_failure(policy, "routes", err))
            continue
        for problem in route_problems(table, view):
            fail(f"routes: {problem}")
        for _ in range(4):
            req = _request(rng, clients)
            draw = rng.random()
            try:
                first = user_call(f"policy {policy.name!r}: decide", policy.decide, view, req,
                                  random.Random(draw))
                again = user_call(f"policy {policy.name!r}: decide", policy.decide, view, req,
                                  random.Random(draw))
            except PolicyTimeout as err:
                rep.fail(policy_failure(policy, "decide", err))
                return rep
            except USER_CODE_ERRORS as err:
                fail(policy_failure(policy, "decide", err))
                break
            if not isinstance(first, str) or first not in names:
                fail(f"decide returned {reprlib.repr(first)}, not a node of the view "
                     f"({', '.join(sorted(names))})")
            elif not view.node(first).available:
                rep.warn(f"decide chose {first}, which is down (the engines block the request)")
            if first != again:
                rep.warn("decide gave different answers for the same view, request and rng "
                         "seed: use only the rng it is given (no clocks, no global state)")
    if rep.failures:
        return rep
    try:
        mean, p99 = time_decide(policy, scenario, timed, rng)
    except USER_CODE_ERRORS as err:  # a fault (or a loop) only its later calls meet
        rep.fail(policy_failure(policy, "decide", err))
        return rep
    rep.notes.append(f"decide: mean {mean:.1f} us, p99 {p99:.1f} us over {timed} calls")
    over = decide_over_budget(scenario, p99) if per_request else None
    if over is not None:
        rep.warn(over)
    return rep


def _elsewhere(rep: Report, names: set[str], msg: str) -> None:
    rep.warn(f"on the checker's own larger cluster ({', '.join(sorted(names))}; not your "
             f"scenario's), so not a failure: {msg}")


def time_decide(policy: Policy, scenario: Scenario, calls: int, rng: random.Random
                ) -> tuple[float, float]:
    """Mean and p99 microseconds of `decide` on generated views and requests. Its first
    failure on the scenario's own cluster is raised: a policy that fails only from its
    n-th call on is not ok (on the checker's larger cluster failures are skipped, as the
    checks warn of them)."""
    timing_views = generated_views(scenario, rng, 50)
    own = {n.name for n in scenario.nodes}
    reqs = [_request(rng, scenario.workload.clients) for _ in range(calls)]
    dec_rng = random.Random(rng.random())
    samples = []
    for i, req in enumerate(reqs):
        view = timing_views[i % len(timing_views)]
        t0 = time.perf_counter()
        try:
            user_call(f"policy {policy.name!r}: decide", policy.decide, view, req, dec_rng)
        except PolicyTimeout:  # one loop is enough: asking again would only wait again
            raise
        except USER_CODE_ERRORS:
            if {n.name for n in view.nodes} == own:
                raise
            continue
        samples.append((time.perf_counter() - t0) * 1e6)
    if not samples:
        return math.nan, math.nan
    samples.sort()
    return statistics.fmean(samples), samples[int(0.99 * (len(samples) - 1))]


def decide_over_budget(scenario: Scenario, p99_us: float) -> str | None:
    """What to tell the user when `decide` alone takes more than the whole decision path
    may at the scenario's time scale (fogsdn.core.latency.decision_budget_real_ms)."""
    budget_us = decision_budget_real_ms(scenario) * 1000.0
    if p99_us <= budget_us:
        return None
    return (f"decide p99 {p99_us:.0f} us is over the {budget_us:.0f} us a decision may take "
            f"at time scale {scenario.time_scale:g} ({100 * DECISION_BUDGET_SHARE:.0f} % of "
            "the fastest node's mean service time): the live controller holds each new "
            "connection for it, so live response times run long by that much")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fogsdn.policies.check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("module", help="your policy: a .py file or an importable module name")
    ap.add_argument("--scenario", help="check on this scenario's cluster and policy params "
                                       "(default: seed 000's one FN and one OFN)")
    ap.add_argument("--name", help="check only this policy of the module")
    ap.add_argument("--views", type=int, default=200, help="generated cluster views")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    module = absolute_policy_module(a.module, Path.cwd())
    try:
        scenario = load_scenario(a.scenario) if a.scenario else default_scenario()
        classes = user_policy_classes(module)
        wanted = [c for c in classes if a.name in (None, c.name)]
        if not wanted:
            raise PolicyError(f"{module}: no policy named {a.name!r} "
                              f"(it defines {', '.join(c.name for c in classes)})")
        reports = []
        for cls in wanted:
            spec = PolicySpec(name=cls.name, alpha=scenario.policy.alpha,
                              params=scenario.policy.params, module=module)
            reports.append(check_policy(make_policy(spec), scenario, a.views, seed=a.seed))
    except (PolicyError, ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for rep in reports:
        print("\n".join(rep.lines()))
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
