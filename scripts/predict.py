"""Exact CTMC prediction, from flags (seed 000's FN + OFN) or a scenario file.

    python scripts/predict.py --scheme proposed --lam-hp 0.3 --lam-lp 0.5 --mu-f 1 \
        --mu-of 0.3 --cap-f 20 --cap-o 10 --eta 0.333 --xi 0.333 [--json]
    python scripts/predict.py --scenario scenarios/default.yaml [--json]
    python scripts/predict.py --scenario FILE --optimum all.W --subject-to "hp.W<=2.4"
    python scripts/predict.py --scenario scenarios/default.yaml --printed  # beside the
        # seed's chain as printed (its eqs. 1-10: fogsdn/exact/printed_chain.py)

With --scenario, any state-based policy gets the chain built from the policy object
(docs/model.md); a state space too large to solve here in a minute is refused.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.core.scenario import Scenario, ScenarioError, load_scenario  # noqa: E402
from fogsdn.core.summary import json_safe  # noqa: E402
from fogsdn.exact.class_prediction import ModelError  # noqa: E402
from fogsdn.exact.ctmc import ModelParams, predict  # noqa: E402
from fogsdn.exact.model_params import (  # noqa: E402
    OutsideModel,
    capacity_mean_prediction,
    timed_prediction,
)
from fogsdn.exact.network import network_share  # noqa: E402
from fogsdn.measure.comparison import predicted_power_block  # noqa: E402


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = bootstrap.OneLineParser(prog="predict.py",
                                 description="Exact prediction of the FN/OFN CTMC (seed 000).")
    ap.add_argument("--scenario", type=Path, help="scenario YAML (instead of the flags)")
    ap.add_argument("--scheme", choices=["proposed", "nodiff", "basic"])
    ap.add_argument("--lam-hp", type=float)
    ap.add_argument("--lam-lp", type=float)
    ap.add_argument("--mu-f", type=float)
    ap.add_argument("--mu-of", type=float, default=0.0)
    ap.add_argument("--cap-f", type=int)
    ap.add_argument("--cap-o", type=int, default=0)
    ap.add_argument("--eta", type=float, default=0.0)
    ap.add_argument("--xi", type=float, default=0.0)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--leave", choices=["drain", "handoff", "drop"], default="drain")
    ap.add_argument("--servers", choices=["single", "multi"], default="single")
    ap.add_argument("--discipline", default="fifo",
                    choices=["fifo", "round_robin", "priority", "priority_preemptive"],
                    help="the FN's order (docs/simulator.md; drain and drop only)")
    ap.add_argument("--deadline", type=float, default=30.0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--policy-module", metavar="FILE_OR_MODULE",
                    help="with --scenario: the scenario's policy is yours (outside the "
                         "model, which says so)")
    ap.add_argument("--optimum", metavar="EXPR",
                    help="with --scenario: also the optimum of this objective over every "
                         "state-based policy (e.g. all.W), and this policy's distance from it")
    ap.add_argument("--subject-to", action="append", default=[], metavar="CONSTRAINT",
                    help="with --optimum: a constraint, e.g. 'hp.W<=2.4' (repeatable)")
    ap.add_argument("--reject", action="store_true",
                    help="with --optimum: the optimum may block on purpose (admission control)")
    ap.add_argument("--printed", action="store_true",
                    help="with --scenario: W beside the seed's chain as printed (seed 000's "
                         "model only: one FN, one OFN, exponential sizes, a built-in scheme)")
    return ap.parse_args(argv)


def optimum_block(sc: object, pred: object, ns: argparse.Namespace) -> dict[str, object]:
    """The optimum for --optimum/--subject-to and this policy's distance from it; where
    the optimiser cannot (more memory than is free, infeasible), why, beside the
    prediction."""
    from fogsdn.exact.objective import evaluate, parse_constraint, parse_expr
    from fogsdn.exact.optimal_policy import OptimizeError, optimize, prediction_figures

    objective = parse_expr(ns.optimum)
    constraints = tuple(parse_constraint(c) for c in ns.subject_to)
    try:
        opt = optimize(sc, objective, constraints, reject=ns.reject,  # type: ignore[arg-type]
                       max_bytes=bootstrap.free_memory())
    except OptimizeError as err:
        return {"objective": str(objective), "error": str(err)}
    mine = prediction_figures(sc, pred)  # type: ignore[arg-type]
    value = evaluate(objective, mine)
    meets = {c.text: c.holds(evaluate(c.expr, mine)) for c in constraints}
    return {"objective": str(objective), "constraints": [c.text for c in constraints],
            "optimum": opt.value, "policy_value": value, "distance": value - opt.value,
            "relative": (value - opt.value) / abs(opt.value) if opt.value else math.nan,
            "policy_meets": meets, "states": opt.n_states, "seconds": opt.seconds,
            "optimal": dict(opt.figures)}


def optimum_lines(o: dict[str, object]) -> str:
    if "error" in o:
        return f"optimum {o['objective']}: not computed: {o['error']}"
    cons = ", ".join(o["constraints"]) or "none"  # type: ignore[arg-type]
    meets = o["policy_meets"]
    assert isinstance(meets, dict)
    ok = "; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in meets.items())
    return (f"optimum {o['objective']} = {_fmt(o['optimum'])} subject to {cons} "
            f"({o['states']:,} states, {_fmt(o['seconds'])} s; scripts/optimize_policy.py)\n"
            f"this policy: {o['objective']} = {_fmt(o['policy_value'])}, "
            f"{_fmt(o['distance'])} from the optimum "
            f"({100 * float(o['relative']):+.1f} %){'; ' + ok if ok else ''}")  # type: ignore[arg-type]


def _params(ns: argparse.Namespace) -> ModelParams:
    missing = [f"--{n.replace('_', '-')}" for n in ("scheme", "lam_hp", "lam_lp", "mu_f", "cap_f")
               if getattr(ns, n) is None]
    if missing:
        raise ModelError(f"missing {', '.join(missing)} (or give --scenario)")
    return ModelParams(scheme=ns.scheme, lam_hp=ns.lam_hp, lam_lp=ns.lam_lp, mu_f=ns.mu_f,
                       mu_of=ns.mu_of, cap_f=ns.cap_f, cap_o=ns.cap_o, eta=ns.eta, xi=ns.xi,
                       alpha=ns.alpha, leave=ns.leave, servers_f=ns.servers,
                       servers_o=ns.servers, deadline=ns.deadline, discipline_f=ns.discipline)


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else f"{x:.6g}"
    return str(x)


def header(p: ModelParams) -> str:
    order = f" discipline={p.discipline_f}" if p.discipline_f != "fifo" else ""
    return (f"scheme={p.scheme} leave={p.leave} servers={p.servers_f}/{p.servers_o}{order} "
            f"deadline={p.deadline:g} ms")


def chain_line(d: dict[str, object], seconds: float) -> str:
    """The chain's size and how long it took (the prediction's `model` block)."""
    m = d.get("model")
    assert isinstance(m, dict)
    return (f"{m['chain']} chain ({m.get('policy') or m.get('scheme')}): {m['states']:,} states, "
            f"{m['method']}, {seconds:.2f} s")


def table(d: dict[str, object], head: str) -> str:
    """Readable two-column table of a prediction dict."""
    keys = ["W", "blocking", "throughput", "N", "drop_prob", "outage", "outage_accepted"]
    lines = [head, f"{'metric':<18}{'HP':>14}{'LP':>14}"]
    hp, lp = d["hp"], d["lp"]
    assert isinstance(hp, dict) and isinstance(lp, dict)
    for k in keys:
        lines.append(f"{k:<18}{_fmt(hp[k]):>14}{_fmt(lp[k]):>14}")
    for k in ("p50", "p90", "p95", "p99"):
        lines.append(f"{k + ' (ms)':<18}{_fmt(hp['percentiles'][k]):>14}"
                     f"{_fmt(lp['percentiles'][k]):>14}")
    for k in ("p_available", "mean_fn", "mean_ofn"):
        lines.append(f"{k:<18}{_fmt(d[k]):>14}")
    pw = d.get("power")
    if isinstance(pw, dict):  # a scenario's prediction: exact server power (docs/power.md)
        busy = pw["utilization"]
        for name, w in pw["nodes"].items():
            lines.append(f"{'power ' + name + ' (W)':<18}{_fmt(w):>14}  busy {_fmt(busy[name])}")
        for name, w in pw["switches"].items():
            lines.append(f"{'power ' + name + ' (W)':<18}{_fmt(w):>14}  (estimate)")
        lines.append(f"{'power total (W)':<18}{_fmt(pw['total_W']):>14}")
    return "\n".join(lines)


def _size_based(ns: argparse.Namespace) -> int | None:
    """Size-based scenarios (seed 002b): per-host M/G/1; None for any other scenario."""
    from fogsdn.measure.size_compare import is_size_scenario, predict_scenario

    if ns.scenario is None:
        return None
    sc = load_scenario(ns.scenario)
    if not is_size_scenario(sc):
        return None
    d = predict_scenario(sc).to_dict()
    if ns.json:
        print(json.dumps(json_safe(d)))
        return 0
    o = d["overall"]
    assert isinstance(o, dict)
    print(f"{d['policy']}: {d['model']}\noverall: W {o['W']:.6g} ms, wait {o['wait']:.6g} ms, "
          f"slowdown {o['slowdown']:.6g}")
    hosts = d["hosts"]
    assert isinstance(hosts, list)
    for h in hosts:
        print(f"  {h['name']:<8} ({h['low']:.6g}, {h['high']:.6g}]  lambda {h['lambda']:.6g}  "
              f"rho {h['rho']:.4f}  W {h['W']:.6g}  wait {h['wait']:.6g}")
    for note in d["notes"]:  # type: ignore[attr-defined]
        print(f"note: {note}")
    return 0


def _capacity_mean(sc: Scenario, as_json: bool) -> int:
    mean = capacity_mean_prediction(sc)
    if isinstance(mean, str):
        return bootstrap.fail(f"predict.py: error: {mean}")
    if as_json:
        print(json.dumps(json_safe(mean)))
        return 0
    ranges = ", ".join(f"{n.name} {n.capacity_range[0]}-{n.capacity_range[1]}"
                       for n in sc.nodes if n.capacity_range is not None)
    print(f"scenario={sc.name} policy={sc.policy.name}: capacities drawn per replication "
          f"({ranges}); {mean['basis']} ({mean['combinations']} combinations)")
    print(f"{'metric':<18}{'HP':>14}{'LP':>14}")
    hp, lp = mean["hp"], mean["lp"]
    assert isinstance(hp, dict) and isinstance(lp, dict)
    for k in ("W", "blocking", "throughput", "N", "outage"):
        print(f"{k:<18}{_fmt(hp[k]):>14}{_fmt(lp[k]):>14}")
    return 0


def _printed(ns: argparse.Namespace) -> int:
    """Our exact W beside the seed's chain as printed (fogsdn/exact/printed_chain.py)."""
    from fogsdn.exact.printed_chain import LABEL, SHOWN, OutsidePrintedModel, printed_figures

    if ns.scenario is None:
        return bootstrap.fail("predict.py: error: --printed needs --scenario")
    try:
        sc = load_scenario(ns.scenario)
        printed = printed_figures(sc)
        ours = timed_prediction(sc)[0].to_dict()
    except (OutsidePrintedModel, OutsideModel, ModelError, ScenarioError, ValueError) as err:
        return bootstrap.fail(f"predict.py: error: --printed: {err}")
    if ns.json:
        print(json.dumps(json_safe({"exact": ours, "printed": printed.to_dict()})))
        return 0
    hp, lp = ours["hp"], ours["lp"]
    assert isinstance(hp, dict) and isinstance(lp, dict)
    print(f"scenario={sc.name} policy={sc.policy.name}")
    print(f"{'W (ms)':<8}{'ours (exact)':>16}{LABEL:>32}")
    print(f"{'HP':<8}{_fmt(hp['W']):>16}{_fmt(printed.W_hp):>32}")
    print(f"{'LP':<8}{_fmt(lp['W']):>16}{_fmt(printed.W_lp):>32}")
    print(f"printed: eqs. 1 and 3-8 as the seed prints them ({SHOWN.label()}; "
          "docs/model.md); no blocking, no outage")
    return 0


def main(argv: list[str] | None = None) -> int:
    ns = _args(argv)
    if ns.printed:
        return _printed(ns)
    try:
        done = _size_based(ns)
        if done is not None:
            return done
        if ns.scenario is not None:
            if ns.policy_module:
                from fogsdn.policies.resolve import resolve_scenario

                sc = resolve_scenario(ns.scenario, policy_module=ns.policy_module)
            else:
                sc = load_scenario(ns.scenario)
            if sc.capacity_drawn:  # the mean over the capacities' distribution
                if ns.optimum:
                    raise ValueError("--optimum: the capacities are drawn per replication; "
                                     "the optimiser takes fixed ones")
                return _capacity_mean(sc, ns.json)
            pred, seconds = timed_prediction(sc)
            d = pred.to_dict()
            d["power"] = predicted_power_block(sc, pred)  # exact mean server power
            share = network_share(sc, pred)
            head = (f"scenario={sc.name} policy={sc.policy.name} leave={sc.churn.leave} "
                    f"deadline={sc.deadline_ms:g} ms\n{chain_line(d, seconds)}")
            if ns.optimum:
                d["optimum"] = optimum_block(sc, pred, ns)
        else:
            if ns.optimum:
                raise ModelError("--optimum needs --scenario")
            params = _params(ns)
            d = predict(params).to_dict()
            head = header(params)
            share = None
    except (ModelError, OutsideModel, ScenarioError, ValueError) as err:
        return bootstrap.fail(f"predict.py: error: {err}")
    if share is not None:  # the topology's share of the end-to-end response
        d["network"] = share.to_dict()
        for cls in ("hp", "lp"):
            block = d[cls]
            assert isinstance(block, dict)
            block["W_e2e"] = share.e2e(float(block["W"]), cls)
    if ns.json:
        print(json.dumps(json_safe(d)))
    else:
        print(table(d, head))
        if share is not None:
            e2e = [d[c]["W_e2e"] for c in ("hp", "lp")]  # type: ignore[index]
            print(f"{'W_e2e':<18}{_fmt(e2e[0] if e2e[0] is not None else math.nan):>14}"
                  f"{_fmt(e2e[1] if e2e[1] is not None else math.nan):>14}")
            print(f"network: {share.why}")
        if "optimum" in d:
            print(optimum_lines(d["optimum"]))  # type: ignore[arg-type]
    optimum = d.get("optimum")
    if isinstance(optimum, dict) and "error" in optimum:
        # the prediction stands, but what --optimum asked for was not computed
        return bootstrap.fail(f"predict.py: error: --optimum {optimum['objective']}: "
                              f"{optimum['error']}", 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
