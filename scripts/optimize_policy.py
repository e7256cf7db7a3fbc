#!/usr/bin/env python3
"""The optimal state-based dispatch of a scenario, from the exact model (a constrained
MDP: one linear program on small chains, the Lagrangian method on large ones;
docs/policies.md).

    python scripts/optimize_policy.py --scenario scenarios/default.yaml \\
        --minimize all.W --subject-to "hp.W<=2.4" --json F --write-policy my_optimal.py
    python scripts/optimize_policy.py --scenario FILE --minimize "lp.blocking" \\
        --subject-to "hp.W<=2.4" --reject
    python scripts/optimize_policy.py --scenario FILE --minimize "all.N + 0.01*power"
    python scripts/optimize_policy.py --scenario scenarios/optimum_100k.yaml \
        --subject-to "hp.W<=2.4" --method lagrangian

Prints the optimum beside every built-in state-based policy, checks the written table on
the exact chain, and writes a policy file that every engine loads with --policy-module.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.core.scenario import ScenarioError, load_scenario  # noqa: E402
from fogsdn.core.summary import json_safe  # noqa: E402
from fogsdn.exact.joint_chain import MAX_STATES  # noqa: E402
from fogsdn.exact.objective import ObjectiveError, evaluate, parse_constraint, parse_expr  # noqa: E402
from fogsdn.exact.optimal_policy import (  # noqa: E402
    AUTO_LP_MAX_STATES,
    METHODS,
    OptimalPolicy,
    OptimizeError,
    baselines,
    best_of_families,
    optimize,
    policy_source,
    prediction_figures,
    table_policy_class,
)
from fogsdn.exact.policy_chain import predict_policy  # noqa: E402

SHOWN = ("W", "blocking", "outage", "N", "throughput")
# The 35 built-in chains take minutes above this many states
BASELINE_MAX_STATES = 20_000


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = bootstrap.OneLineParser(prog="optimize_policy.py",
                                 description="Optimal state-based dispatch from the exact model.")
    ap.add_argument("--scenario", type=Path, required=True)
    ap.add_argument("--minimize", "--objective", dest="minimize", default="all.W",
                    metavar="EXPR", help="e.g. all.W, lp.blocking, 'all.N + 0.01*power'")
    ap.add_argument("--subject-to", action="append", default=[], metavar="CONSTRAINT",
                    help="e.g. 'hp.W<=2.4', 'lp.blocking<=0.01' (repeatable)")
    ap.add_argument("--reject", action="store_true",
                    help="the policy may name a node that is down, which blocks the request "
                         "(admission control); by default it names nodes that are up")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the figures as JSON")
    ap.add_argument("--write-policy", type=Path, metavar="FILE.py")
    ap.add_argument("--method", choices=METHODS, default="auto",
                    help="lp: one linear program (exact, small chains); lagrangian: policy "
                         "iteration and the multipliers' search (large chains); auto: the LP "
                         f"up to {AUTO_LP_MAX_STATES:,} states")
    ap.add_argument("--policy-name", default="optimal")
    ap.add_argument("--no-baselines", action="store_true",
                    help="skip the built-in policies (skipped anyway above "
                         f"{BASELINE_MAX_STATES:,} states)")
    return ap.parse_args(argv)


def _classes(fig: dict[str, float]) -> dict[str, dict[str, float]]:
    return {cls: {k: fig[f"{cls}.{k}"] for k in SHOWN} for cls in ("hp", "lp", "all")}


def _gap(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def report(opt: OptimalPolicy, exact: dict[str, float], base: dict[str, object] | None,
           scenario: str) -> dict[str, object]:
    out: dict[str, object] = {
        "scenario": scenario,
        "objective": str(opt.objective),
        "constraints": [c.text for c in opt.constraints],
        "reject": opt.reject,
        "value": opt.value,
        "optimal": {**_classes(opt.figures), "power": opt.figures["power"]},
        "exact_check": {**_classes(exact), "power": exact["power"],
                        "max_rel_gap": max(_gap(exact[k], v) for k, v in opt.figures.items()
                                           if math.isfinite(v) and abs(v) > 1e-9)},
        "lp": {"states": opt.n_states, "variables": opt.n_variables, "rows": opt.n_rows,
               "randomised_decisions": opt.randomised, "seconds": opt.seconds,
               "method": "Charnes-Cooper" if opt.objective.ratio else "linear"},
        "solver": {"method": opt.method, "states": opt.n_states, "iterations": opt.iterations,
                   "evaluations": opt.evaluations, "duality_gap": opt.gap,
                   "seconds": opt.seconds},
    }
    if base is not None:
        out.update(base)
    return out


def main(argv: list[str] | None = None) -> int:
    ns = _args(argv)
    try:
        sc = load_scenario(ns.scenario)
        objective = parse_expr(ns.minimize)
        constraints = tuple(parse_constraint(c) for c in ns.subject_to)
        opt = optimize(sc, objective, constraints, reject=ns.reject, method=ns.method,
                       max_bytes=bootstrap.free_memory())
        cls = table_policy_class(opt, ns.policy_name)
        t0 = time.perf_counter()
        exact = prediction_figures(sc, predict_policy(sc, cls(), max_states=max(
            MAX_STATES, opt.n_states)))
        check_s = time.perf_counter() - t0
        base: dict[str, object] | None = None
        rows: list[tuple[str, dict[str, float], bool]] = []
        skip_base = ns.no_baselines or opt.n_states > BASELINE_MAX_STATES
        if not skip_base:
            points = baselines(sc, objective, constraints)
            best = best_of_families(points)
            base = {"baselines": {name: {**_classes(b.figures), "feasible": b.feasible,
                                         "setting": b.setting, "value": b.value,
                                         "label": b.label}
                                  for name, b in best.items()},
                    "baseline_points": [{"label": b.label, "feasible": b.feasible,
                                         "value": b.value} for b in points]}
            feas = [b for b in points if b.feasible]
            if feas:
                top = min(feas, key=lambda b: b.value)
                base["best_builtin"] = {"label": top.label, "value": top.value,
                                        "gain": (top.value - opt.value) / abs(top.value)
                                        if top.value else math.nan}
            rows = [(b.label, b.figures, b.feasible) for b in best.values()]
    except (ObjectiveError, OptimizeError, ScenarioError, ValueError) as err:
        return bootstrap.fail(f"optimize_policy.py: error: {err}")
    d = report(opt, exact, base, sc.name)
    if ns.write_policy is not None:
        ns.write_policy.write_text(policy_source(opt, sc.name, ns.policy_name))
        d["policy_file"] = str(ns.write_policy)
    cons = ", ".join(c.text for c in constraints) or "none"
    print(f"scenario={sc.name} minimise {objective} subject to {cons}"
          f"{' (admission control)' if ns.reject else ''}")
    gap = d["exact_check"]["max_rel_gap"]  # type: ignore[index]
    if opt.method == "lp":
        print(f"LP: {opt.n_states:,} states, {opt.n_variables:,} variables, {opt.n_rows:,} "
              f"rows, {opt.iterations:,} simplex iterations, {opt.seconds:.2f} s; "
              f"{opt.randomised} randomised decisions; exact chain of the table "
              f"{check_s:.2f} s, largest gap {gap:.1e}")
    else:
        print(f"Lagrangian: {opt.n_states:,} states, {opt.iterations} multiplier rounds, "
              f"{opt.evaluations} policy evaluations, {opt.seconds:.2f} s, duality gap "
              f"{opt.gap:.1e}; {opt.randomised} randomised decisions; exact chain of the "
              f"table {check_s:.2f} s, largest gap {gap:.1e}")
    if base is None and not ns.no_baselines:
        print(f"(built-in policies skipped above {BASELINE_MAX_STATES:,} states)")
    print(f"{'policy':<26}{'hp.W':>9}{'lp.W':>9}{'all.W':>9}{'all.block':>11}{'power':>9}  "
          f"{objective}  ok")
    for label, fig, ok in [("optimal", opt.figures, True)] + rows:
        print(f"{label:<26}{fig['hp.W']:>9.4f}{fig['lp.W']:>9.4f}{fig['all.W']:>9.4f}"
              f"{fig['all.blocking']:>11.2e}{fig['power']:>9.2f}  "
              f"{evaluate(objective, fig):.6g}  {'yes' if ok else 'no'}")
    if base is not None and "best_builtin" in base:
        bb = base["best_builtin"]
        assert isinstance(bb, dict)
        print(f"gain over the best feasible built-in ({bb['label']}): {100 * bb['gain']:.1f} %")
    if ns.write_policy is not None:
        print(f"policy written to {ns.write_policy} (name {ns.policy_name!r})")
    if ns.json is not None:
        ns.json.write_text(json.dumps(json_safe(d), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
