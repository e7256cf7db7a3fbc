"""Time and peak memory of the exact model as capacities grow, beside a naive solve
(figures: docs/model.md; the cases and modes: docs/benchmarks.md).

    python scripts/bench_analytic.py [--sizes 20x10,100x50,...] [--naive-max 260000]
    python scripts/bench_analytic.py --policy-chain [--clusters 20x10x1,20x10x2,...]
    python scripts/bench_analytic.py --solvers [--sizes 10x5,...] [--split 1000x500]
    python scripts/bench_analytic.py --optimizer [--clusters 20x10x1,...] [--lp-max 3100]
        [--lp-methods highs]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from tools.bench.common import ROOT, script

if TYPE_CHECKING:  # the measured imports stay in the functions that measure
    import numpy as np

    from fogsdn.core.scenario import Scenario
    from fogsdn.exact.ctmc import Leave, ModelParams
    from fogsdn.exact.linsolve import Chain

T = TypeVar("T")

DEFAULT_SIZES = "20x10,100x50,250x125,500x250,1000x500"
# C_F x C_O x OFNs, for --policy-chain
DEFAULT_CLUSTERS = "20x10x1,20x10x2,40x20x2,20x10x3"
# --optimizer: 462, 1,584, 3,024, 10,164, 100,172 (one OFN) and 101,528 (three) states
OPTIMIZER_CLUSTERS = "20x10x1,10x5x2,20x5x2,20x10x2,316x157x1,36x6x3"


def _params(cf: int, co: int, leave: str) -> ModelParams:
    from fogsdn.exact.ctmc import ModelParams

    # a mode named on the command line: ModelParams names a wrong one (ModelError)
    return ModelParams("proposed", 0.3, 0.5, 1.0, 0.3, cf, co, 1 / 3, 1 / 3,
                       leave=cast("Leave", leave))


def _naive_pi(chain: Chain) -> np.ndarray:
    """The stationary vector by scipy's spsolve in its default (COLAMD) order."""
    import numpy as np
    from scipy.sparse.linalg import spsolve

    from fogsdn.exact.linsolve import generator

    At = generator(chain).T.tocsc()
    x = spsolve(At[1:, 1:].tocsc(), -np.asarray(At[1:, 0].toarray()).ravel())
    pi = np.concatenate([[1.0], x])
    return pi / pi.sum()


def _table(hdr: str, leaves: str, specs: str) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Print a table's header, then give each leave mode with each "AxB[xC]" spec."""
    print(hdr)
    print("-" * len(hdr))
    for leave in leaves.split(","):
        for spec in specs.split(","):
            yield leave, tuple(int(x) for x in spec.lower().split("x"))


def _spawn(flag: str, args: list[object], timeout: float) -> dict[str, Any]:
    """One measurement in a fresh process: its JSON line, or {"error": why}."""
    cmd = [sys.executable, str(script("bench_analytic.py")), flag, json.dumps(args)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f">{timeout:.0f}s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def one(case: str, cf: int, co: int, leave: str) -> dict[str, object]:
    """Run one measurement in this process and report it."""
    import numpy as np  # noqa: F401  (imports are not timed)
    import scipy.sparse  # noqa: F401

    from fogsdn.exact.ctmc import build_chain, predict

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    p = _params(cf, co, leave)
    t0 = time.perf_counter()
    if case == "naive":
        chain = build_chain(p, cf, co, "ofn")
        float(_naive_pi(chain) @ chain.k)  # mean at the FN, to have used the answer
        method = "spsolve/COLAMD"
    else:
        pr = predict(p, "sparse" if case == "joint/means" else "auto")
        pr.means()
        if case == "ours/full":
            for c in (pr.hp, pr.lp):
                _ = c.outage, c.percentiles()
        method = pr.stationary.method
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"case": case, "cf": cf, "co": co, "leave": leave, "states": p.n_states(),
            "method": method, "seconds": dt, "peak_mb": peak / 1024,
            "delta_mb": (peak - base) / 1024}


def _cluster(cf: int, co: int, ofns: int, leave: str) -> Scenario:
    from fogsdn.core.scenario import load_scenario, parse_scenario

    sc = load_scenario(ROOT / "scenarios" / "threshold.yaml")
    d = sc.to_dict()
    d["nodes"] = [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": cf}] + [
        {"name": f"ofn{i + 1}", "role": "ofn", "mu": 0.3, "capacity": co} for i in range(ofns)]
    d["churn"]["leave"] = leave
    d["sweep"] = None
    return parse_scenario(d)


def one_policy_chain(cf: int, co: int, ofns: int, leave: str) -> dict[str, object]:
    """Build and solve the threshold policy's joint chain in this process."""
    import numpy as np  # noqa: F401  (imports are not timed)

    from fogsdn.exact.joint_chain import build_joint, joint_stationary
    from fogsdn.exact.policy_chain import predict_policy
    from fogsdn.exact.policy_chain_model import policy_model
    from fogsdn.exact.policy_probe import PolicyOracle
    from fogsdn.policies import make_policy

    sc = _cluster(cf, co, ofns, leave)
    policy = make_policy(sc.policy)
    m = policy_model(sc, policy)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    oracle = PolicyOracle(policy, m.nodes, m.per_request)
    jc = build_joint(m, oracle)
    t1 = time.perf_counter()
    pi, method = joint_stationary(jc.Q)
    t2 = time.perf_counter()
    pred = predict_policy(sc, policy, max_states=10**9)
    t3 = time.perf_counter()
    _ = [(c.outage, c.percentiles()) for c in (pred.hp, pred.lp)]
    t4 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"cf": cf, "co": co, "ofns": ofns, "leave": leave, "states": jc.size,
            "method": method, "build_s": t1 - t0, "solve_s": t2 - t1,
            "predict_s": t3 - t2, "full_s": t4 - t2, "peak_mb": peak / 1024,
            "delta_mb": (peak - base) / 1024, "W_lp": pred.lp.W, "mean_pi": float(pi.max())}


def one_optimizer(cf: int, co: int, ofns: int, method: str, lp_method: str
                  ) -> dict[str, object]:
    """Minimise all.W subject to hp.W at most the proposed (prioritized) scheme's own, by
    `method`, in this process."""
    from fogsdn.core.scenario import PolicySpec
    from fogsdn.exact.model_params import exact_prediction
    from fogsdn.exact.objective import parse_constraint, parse_expr
    from fogsdn.exact.optimal_policy import optimize

    sc = _cluster(cf, co, ofns, "drain").model_copy(
        update={"policy": PolicySpec(name="prioritized")})
    bound = float(exact_prediction(sc).hp.W)
    opt = optimize(sc, parse_expr("all.W"), (parse_constraint(f"hp.W<={bound!r}"),),
                   method=method, lp_method=lp_method)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"states": opt.n_states, "variables": opt.n_variables, "seconds": opt.seconds,
            "value": opt.value, "randomised": opt.randomised, "iterations": opt.iterations,
            "evaluations": opt.evaluations, "duality_gap": opt.gap, "peak_mb": peak / 1024,
            "hp_W": opt.figures["hp.W"], "bound": bound}


def optimizer_main(ns: argparse.Namespace) -> int:
    """The LP (each HiGHS variant asked for, up to --lp-max states) beside the
    Lagrangian method on each cluster, each case in its own process."""
    hdr = (f"{'C_F x C_O x OFNs':<18}{'states':>9}  {'method':<17}{'seconds':>9}"
           f"{'iterations':>12}{'evals':>7}{'all.W':>15}{'vs LP':>10}{'dual gap':>10}"
           f"{'rand':>5}{'peak MB':>9}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for spec in ns.clusters.split(","):
        cf, co, ofns = (int(v) for v in spec.split("x"))
        states = (cf + 1) * (2 * (co + 1)) ** ofns
        runs = [("lp", m) for m in ns.lp_methods.split(",")] + [("lagrangian", "highs")]
        ref: float | None = None
        for method, lp_method in runs:
            label = f"lp/{lp_method}" if method == "lp" else method
            if method == "lp" and states > ns.lp_max:
                print(f"{spec:<18}{states:>9,}  {label:<17}skipped: above --lp-max "
                      f"{ns.lp_max:,} states", flush=True)
                continue
            r = {"cluster": spec, "method": label,
                 **_spawn("--one-optimizer", [cf, co, ofns, method, lp_method], ns.timeout)}
            rows.append(r)
            if "error" in r:
                print(f"{spec:<18}{states:>9,}  {label:<17}{r['error']}", flush=True)
                continue
            if method == "lp" and ref is None:
                ref = float(r["value"])
            vs = (f"{abs(float(r['value']) - ref) / abs(ref):>10.1e}"
                  if ref is not None and method != "lp" else f"{'':>10}")
            r["rel_gap_vs_lp"] = (abs(float(r["value"]) - ref) / abs(ref)
                                  if ref is not None and method != "lp" else None)
            dgap = f"{float(r['duality_gap']):>10.1e}" if method != "lp" else f"{'':>10}"
            evals = f"{r['evaluations']:>7}" if method != "lp" else f"{'':>7}"
            print(f"{spec:<18}{r['states']:>9,}  {label:<17}{r['seconds']:>9.2f}"
                  f"{r['iterations']:>12,}{evals}{r['value']:>15.10f}{vs}{dgap}"
                  f"{r['randomised']:>5}{r['peak_mb']:>9.0f}", flush=True)
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    return 0


def policy_chain_main(ns: argparse.Namespace) -> int:
    hdr = (f"{'leave':<8}{'C_F':>5}{'C_O':>5}{'OFNs':>5}{'states':>10}  {'method':<10}"
           f"{'build s':>9}{'solve s':>9}{'predict s':>10}{'+dist s':>9}{'peak MB':>9}")
    rows = []
    for leave, (cf, co, ofns) in _table(hdr, ns.leaves, ns.clusters):
        g = _spawn("--one-policy", [cf, co, ofns, leave], ns.timeout)
        if "error" in g:
            print(f"{leave:<8}{cf:>5}{co:>5}{ofns:>5}  error: {g['error']}", flush=True)
            continue
        rows.append(g)
        print(f"{leave:<8}{cf:>5}{co:>5}{ofns:>5}{g['states']:>10}  {g['method']:<10}"
              f"{g['build_s']:>9.2f}{g['solve_s']:>9.2f}{g['predict_s']:>10.2f}"
              f"{g['full_s'] - g['predict_s']:>9.2f}{g['peak_mb']:>9.0f}", flush=True)
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    return 0


SOLVER_SIZES = "10x5,20x10,40x20,60x30,100x50,140x70,200x100,300x150,500x250"


def _best(fn: Callable[[], T], repeat: int) -> tuple[float, T | None]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def solvers_main(ns: argparse.Namespace) -> int:
    """Chosen route vs GTH vs plain spsolve, per chain kind and size; then the split."""
    import numpy as np

    from fogsdn.exact.ctmc import build_chain, gth_flops, lumpable, solve_stationary
    from fogsdn.exact.linsolve import checked_sparse, gth_levels

    hdr = (f"{'leave':<8}{'C_F':>6}{'C_O':>5}{'states':>9}  {'chosen':<10}{'chosen s':>9}"
           f"{'gth s':>9}{'spsolve s':>10}{'spsolve/chosen':>15}{'check':>9}{'|dE n_O|':>10}")
    for leave, (cf, co) in _table(hdr, ns.leaves, ns.sizes):
        p = _params(cf, co, leave)
        by: Literal["fn", "ofn"] = "ofn" if (not lumpable(p) or cf < co) else "fn"
        chain = build_chain(p, cf, co, by)
        rep = ns.repeat if p.n_states() < 50_000 else 1
        t_ch, got = _best(lambda: solve_stationary(p, "joint"), rep)  # noqa: B023
        method = str(getattr(got, "method", "?"))
        flops = gth_flops(p, by)
        t_g = _best(lambda: gth_levels(chain), rep)[0] if flops <= 1e9 else None  # noqa: B023
        # the naive route builds the chain too, as the chosen one does
        t_n, pn = _best(lambda: _naive_pi(build_chain(p, cf, co, by)), rep)  # noqa: B023
        pi, err = checked_sparse(chain)[:2] if method != "gth" else (gth_levels(chain), 0.0)
        w_diff = abs(float(pi @ chain.n) - float(np.asarray(pn) @ chain.n))
        gs = f"{t_g:9.4f}" if t_g is not None else f"{'-':>9}"
        print(f"{leave:<8}{cf:>6}{co:>5}{p.n_states():>9}  {method:<10}{t_ch:>9.4f}{gs}"
              f"{t_n:>10.4f}{t_n / t_ch:>14.1f}x{err:>9.0e}{w_diff:>10.0e}", flush=True)
    if ns.split:
        cf, co = (int(x) for x in ns.split.lower().split("x"))
        split_main(cf, co, compare_lu=not ns.no_lu)
    return 0


def split_main(cf: int, co: int, compare_lu: bool = True) -> None:
    """Where the time of the largest joint chain (drain, forced joint) goes, and how
    the two-level solve compares with the LU (nested dissection) it replaced there."""
    from fogsdn.exact import linsolve
    from fogsdn.exact.ctmc import build_chain, predict
    from fogsdn.exact.linsolve import checked_sparse, checked_stationary, coarse_grid, generator

    p = _params(cf, co, "drain")
    by: Literal["fn", "ofn"] = "ofn" if cf < co else "fn"
    t0 = time.process_time()
    chain = build_chain(p, cf, co, by)
    G = generator(chain)
    t1 = time.process_time()
    coarse_grid(chain)
    t2 = time.process_time()
    pi, err, route = checked_sparse(chain)
    t3 = time.process_time()
    pr = predict(p, "sparse")
    w = (pr.hp.W, pr.lp.W)
    t4 = time.process_time()
    res = float(abs(pi @ G).max())
    print(f"\njoint chain drain {cf}x{co}, {p.n_states():,} states, CPU s: build "
          f"{t1 - t0:.2f}, coarse grid {t2 - t1:.2f}, solve ({route}) {t3 - t2:.2f}, "
          f"whole predict(sparse) {t4 - t3:.2f}; ||pi Q|| {res:.0e}", flush=True)
    if compare_lu:
        t5 = time.process_time()
        ref, _ = checked_stationary(G, linsolve.nd_order(chain))
        t6 = time.process_time()
        saved = linsolve.TWO_LEVEL_MIN_STATES
        linsolve.TWO_LEVEL_MIN_STATES = 10**12
        pr_lu = predict(p, "sparse")
        linsolve.TWO_LEVEL_MIN_STATES = saved
        t7 = time.process_time()
        dw = max(abs(a - b) / b for a, b in zip(w, (pr_lu.hp.W, pr_lu.lp.W), strict=True))
        print(f"the LU (nested dissection) on it: solve {t6 - t5:.2f}, whole predict "
              f"{t7 - t6:.2f}; ||pi Q|| {float(abs(ref @ G).max()):.0e}; "
              f"max |pi - pi_LU| {float(abs(pi - ref).max()):.0e}; W of HP, LP differ by "
              f"{dw:.0e} relative")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="CFxCO,CFxCO,...")
    ap.add_argument("--leaves", default="drain,handoff")
    ap.add_argument("--naive-max", type=int, default=260_000,
                    help="run the naive solve only up to this many states")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--policy-chain", action="store_true",
                    help="measure the chain built from the policy object instead")
    ap.add_argument("--clusters", default=DEFAULT_CLUSTERS, help="CFxCOxOFNS,...")
    ap.add_argument("--one-policy", help=argparse.SUPPRESS)
    ap.add_argument("--solvers", action="store_true",
                    help="chosen stationary solve vs GTH vs plain spsolve, per size")
    ap.add_argument("--split", default="", help="with --solvers: CFxCO of the time split")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-lu", action="store_true",
                    help="with --split: skip the LU it is compared with (~30 s at 1M)")
    ap.add_argument("--optimizer", action="store_true",
                    help="the optimum by the LP beside the Lagrangian method, per cluster")
    ap.add_argument("--lp-methods", default="highs",
                    help="with --optimizer: HiGHS variants (highs,highs-ds,highs-ipm)")
    ap.add_argument("--lp-max", type=int, default=3_100,
                    help="with --optimizer: run the LP only up to this many states")
    ap.add_argument("--one-optimizer", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    # a child of _spawn: one measurement, its arguments a JSON list
    for child, fn in ((ns.one_optimizer, one_optimizer), (ns.one_policy, one_policy_chain),
                      (ns.one, one)):
        if child:
            print(json.dumps(fn(*json.loads(child))))
            return 0
    if ns.optimizer:
        if ns.clusters == DEFAULT_CLUSTERS:
            ns.clusters = OPTIMIZER_CLUSTERS
        return optimizer_main(ns)
    if ns.solvers:
        if ns.sizes == DEFAULT_SIZES:
            ns.sizes = SOLVER_SIZES
        return solvers_main(ns)
    if ns.policy_chain:
        return policy_chain_main(ns)
    rows: list[dict[str, object]] = []
    hdr = (f"{'leave':<8}{'C_F':>6}{'C_O':>5}{'states':>10}  {'case':<12}{'method':<15}"
           f"{'seconds':>9}{'peak MB':>9}{'+MB':>8}{'naive/this':>11}")
    for leave, (cf, co) in _table(hdr, ns.leaves, ns.sizes):
        states = _params(cf, co, leave).n_states()
        cases = ["ours/means", "ours/full"]
        if leave == "drain":
            cases.append("joint/means")
        if states <= ns.naive_max:
            cases.append("naive")
        got: dict[str, dict[str, Any]] = {
            c: {"case": c, "cf": cf, "co": co, "leave": leave,
                **_spawn("--one", [c, cf, co, leave], ns.timeout)} for c in cases}
        naive = got.get("naive", {})
        for c in cases:
            r = got[c]
            rows.append(r)
            if "error" in r:
                print(f"{leave:<8}{cf:>6}{co:>5}{states:>10}  {c:<12}{r['error']}")
                continue
            ratio = ""
            if "seconds" in naive and c != "naive":
                ratio = f"{float(naive['seconds']) / float(r['seconds']):.1f}x"
            print(f"{leave:<8}{cf:>6}{co:>5}{states:>10}  {c:<12}{r['method']!s:<15}"
                  f"{float(r['seconds']):>9.3f}{float(r['peak_mb']):>9.0f}"
                  f"{float(r['delta_mb']):>8.0f}{ratio:>11}", flush=True)
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    return 0

