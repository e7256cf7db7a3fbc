"""Seed 002b's six claims as one table: model tables, the simulator's jobs and the rows
with verdicts (pure: no I/O; `scripts/reproduce_seed002b.py` runs the jobs and writes).

The claims are the abstract's sentences (the seed is the abstract only). TAGS has no
cutoffs in the abstract, so every ratio is given for two readings: **fixed** (TAGS at
SITA-E's cutoffs) and **response-optimal** (our `tags` policy: cutoffs minimising the
model's mean response time, which in light traffic stop killing), each with its own
verdict. Every claim row says where its setting comes from (the seed's text, another
paper, or our choice). docs/size_based.md, "Seed 002b's claims".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from fogsdn.core.scenario import Scenario, SizeSpec
from fogsdn.core.summary import json_float, json_object
from fogsdn.measure.metrics import replications_ci
from fogsdn.measure.size_compare import bounded_pareto, overall, size_scenario
from fogsdn.models.size_assignment import (
    moment,
    partial_moment,
    predict_sita,
    predict_tags,
    sita_e_cutoffs,
    tags_cutoffs,
)
from fogsdn.models.size_light import (
    TAGS_READINGS,
    QosDesign,
    SizeClass,
    alpha1_fixed_limit,
    light_ratio,
    qos_design,
)

# light traffic: the model's limit, and the simulator at a small load
LIGHT_LOAD = 0.01
SIM_HIGH = 100.0  # H / L of the simulated light-traffic points (L = 1)
I_HIGHS = (1e2, 1e4, 1e6, 1e10)
I_HOSTS = (2, 3, 4, 8)
II_ALPHAS = (0.5, 1.5)
II_HIGHS = (1e2, 1e4)
II_HOSTS = (2, 4, 8, 16, 32, 64)
II_SIM_HOSTS = (2, 4, 8, 16)
OPT_SIM_MAX_HOSTS = 8  # Nelder-Mead finds no-kill cutoffs up to 8 hosts (16: a local one)
# claim 3: two hosts, alpha = 1, at fixed loads, and with lambda H fixed below 1 (the
# condition under which Bachmat and Doncel, MASCOTS 2020, arXiv 2012.03695, state the
# same two-server result in their abstract)
TWO_LOADS = (0.1, 0.01, 0.001)
TWO_HIGHS = tuple(10.0 ** (k / 4) for k in range(4, 41))  # 10 .. 1e10, 4 per decade
TWO_LAMBDA_H = 0.5
# the QoS design (our example: the seed gives no numbers)
QOS_SIZE = (1.5, 1.0, 1000.0)
QOS_LAMBDA = 0.3
QOS_TARGETS: dict[str, tuple[SizeClass, ...]] = {
    "tight": (SizeClass(10.0, "slowdown", 2.0), SizeClass(100.0, "slowdown", 3.0),
              SizeClass(1000.0, "slowdown", 4.0)),
    "loose": (SizeClass(10.0, "W", 15.0), SizeClass(100.0, "slowdown", 3.0),
              SizeClass(1000.0, "slowdown", 3.0)),
}
VARIANTS = ("sita_e", "tags_fixed", "tags_opt")


def cutoff_text(cut: Sequence[float]) -> str:
    return ",".join(f"{c:.12g}" for c in cut)


# -- light traffic: model tables ----------------------------------------------------------


def light_rows(alpha: float, highs: Sequence[float], hosts: Sequence[int]
               ) -> list[dict[str, float]]:
    """kappa_TAGS / kappa_SITA-E for every (H/L, h) and every TAGS reading: alpha, high,
    hosts, one column per reading and, at alpha = 1, `limit_fixed`."""
    rows = []
    for high in highs:
        spec = bounded_pareto(alpha, 1.0, high)
        for h in hosts:
            row: dict[str, float] = {"alpha": alpha, "high": high, "hosts": h}
            row |= {r: light_ratio(spec, h, r) for r in TAGS_READINGS}
            if alpha == 1.0:
                row["limit_fixed"] = alpha1_fixed_limit(h)
            rows.append(row)
    return rows


# `two_server_ratios`: TAGS / SITA-E mean wait at SITA-E's cutoff (fixed) and at the
# response-optimal one, with the cutoffs and whether the optimal one kills
TwoServerRatios = TypedDict("TwoServerRatios", {
    "high": float, "lambda": float, "load": float, "sita_e_cutoff": float,
    "opt_cutoff": float, "kills": bool, "fixed": float, "response_optimal": float})


class TwoServerRow(TwoServerRatios):
    regime: str  # "load" (a fixed load) or "lambda_h" (lambda H fixed)


def two_server_ratios(high: float, lam: float) -> TwoServerRatios:
    """Two hosts, alpha = 1, sizes on [1, high], arrival rate lam: TAGS / SITA-E mean
    wait (per-host approximation for TAGS) at SITA-E's cutoff (fixed) and at the cutoff
    minimising TAGS's mean response time (response-optimal)."""
    spec = bounded_pareto(1.0, 1.0, high)
    mus, names = [1.0, 1.0], ["h1", "h2"]
    cut = sita_e_cutoffs(spec, mus)
    base = predict_sita(lam, spec, cut, mus, names).wait
    opt = tags_cutoffs(lam, spec, mus)
    return {"high": high, "lambda": lam, "load": lam * moment(spec, 1) / 2.0,
            "sita_e_cutoff": cut[0], "opt_cutoff": opt[0],
            "kills": opt[0] < high * (1.0 - 1e-6),
            "fixed": predict_tags(lam, spec, cut, mus, names).wait / base,
            "response_optimal": predict_tags(lam, spec, opt, mus, names).wait / base}


def _lam(load: float, high: float) -> float:
    return load * 2.0 / moment(bounded_pareto(1.0, 1.0, high), 1)


def two_server_rows() -> list[TwoServerRow]:
    """Claim 3 at fixed loads (TWO_LOADS) over H/L, and with lambda H = TWO_LAMBDA_H
    (`regime` "lambda_h": the load falls as H grows)."""
    rows: list[TwoServerRow] = [
        {"regime": "load", **two_server_ratios(high, _lam(load, high)), "load": load}
        for load in TWO_LOADS for high in TWO_HIGHS]
    rows += [{"regime": "lambda_h", **two_server_ratios(high, TWO_LAMBDA_H / high)}
             for high in TWO_HIGHS]
    return rows


def two_server_peak(load: float, steps: int = 30) -> dict[str, float]:
    """At a fixed load the response-optimal TAGS serves everything at host 1 up to some
    H/L and kills beyond it, where its ratio drops to about 1.5: the peak over H/L is
    the no-kill ratio at that switch, found by bisection in log H (10 .. 1e10)."""
    lo, hi = 1.0, 10.0
    if two_server_ratios(10.0**lo, _lam(load, 10.0**lo))["kills"]:
        raise ValueError(f"load {load:g}: TAGS kills already at H/L = 10")
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if two_server_ratios(10.0**mid, _lam(load, 10.0**mid))["kills"]:
            hi = mid
        else:
            lo = mid
    below = two_server_ratios(10.0**lo, _lam(load, 10.0**lo))
    above = two_server_ratios(10.0**hi, _lam(load, 10.0**hi))
    return {"load": load, "switch_high": 10.0**lo, "peak": below["response_optimal"],
            "after": above["response_optimal"]}


# -- the simulator's jobs -------------------------------------------------------------------


LightKey = tuple[float, float, int, str]  # (alpha, high, hosts, variant)
QosKey = tuple[str, str, int]  # (targets, policy, host; -1: the whole system)
# each job's `SizeStats.summary` by replication (JSON objects: read with `overall`)
Summaries = Sequence[Mapping[str, object]]


@dataclass(frozen=True)
class SimJob:
    """One replication of one policy: a light-traffic point (claim i or ii) or one host
    (SITA) or the whole system (TAGS) of a QoS design."""

    group: str  # "light" or "qos"
    key: LightKey | QosKey
    replication: int
    requests: int
    scenario: Scenario


def light_scenario(alpha: float, high: float, hosts: int, variant: str,
                   load: float = LIGHT_LOAD) -> Scenario:
    spec = bounded_pareto(alpha, 1.0, high)
    if variant == "sita_e":
        return size_scenario("sita_e", hosts, load, spec, name="lt-sita_e")
    if variant == "tags_fixed":
        cut = sita_e_cutoffs(spec, [1.0] * hosts)
        return size_scenario("tags", hosts, load, spec, name="lt-tags_fixed",
                             params={"cutoffs": cutoff_text(cut)})
    if variant == "tags_opt":
        return size_scenario("tags", hosts, load, spec, name="lt-tags_opt")
    raise ValueError(variant)


def light_jobs(requests: int, replications: int) -> list[SimJob]:
    points = [(1.0, SIM_HIGH, h) for h in I_HOSTS]
    points += [(a, SIM_HIGH, h) for a in II_ALPHAS for h in II_SIM_HOSTS]
    return [SimJob("light", (a, high, h, v), r, requests, light_scenario(a, high, h, v))
            for a, high, h in points for v in VARIANTS
            if not (v == "tags_opt" and h > OPT_SIM_MAX_HOSTS)
            for r in range(replications)]


def qos_spec() -> SizeSpec:
    return bounded_pareto(*QOS_SIZE)


def designs() -> dict[tuple[str, str], QosDesign | str]:
    """(targets, policy) -> the design, or why there is none."""
    out: dict[tuple[str, str], QosDesign | str] = {}
    for name, classes in QOS_TARGETS.items():
        for policy in ("sita", "tags"):
            try:
                out[(name, policy)] = qos_design(policy, QOS_LAMBDA, qos_spec(), classes)
            except ValueError as err:
                out[(name, policy)] = str(err)
    return out


def qos_jobs(requests: int, replications: int) -> list[SimJob]:
    """A SITA design host by host (Poisson splitting makes each host an M/G/1 with the
    sizes of its interval: bounded Pareto on (a, b] with the same alpha), a TAGS design
    as one system with its cutoffs."""
    alpha, _, high = QOS_SIZE
    spec = qos_spec()
    jobs = []
    for (name, policy), d in designs().items():
        if isinstance(d, str):
            continue
        if policy == "sita":
            for i, host in enumerate(d.hosts):
                part = bounded_pareto(alpha, host.low, host.high)
                load = QOS_LAMBDA * partial_moment(spec, 1, host.low if i else -1.0, host.high)
                sc = size_scenario("random", 1, load, part, name=f"qos-{name}-sita-{i}")
                jobs += [SimJob("qos", (name, policy, i), r, requests, sc)
                         for r in range(replications)]
        else:
            load = QOS_LAMBDA * moment(spec, 1) / len(d.hosts)
            sc = size_scenario("tags", len(d.hosts), load, spec, name=f"qos-{name}-tags",
                               params={"cutoffs": cutoff_text(d.cutoffs)})
            jobs += [SimJob("qos", (name, policy, -1), r, requests, sc)
                     for r in range(replications)]
    return jobs


# -- reducing simulated summaries --------------------------------------------------------------


def _ci(values: Sequence[float]) -> dict[str, float]:
    ci = replications_ci(list(values))
    return {"mean": ci.mean, "ci95": ci.half_width, "n": ci.n}


class _LightSimPoint(TypedDict):
    alpha: float
    high: float
    hosts: int
    tags: str  # the TAGS variant: "tags_fixed" or "tags_opt"
    load: float
    sim: dict[str, float]  # the ratio's mean, ci95 and n over replications
    light_exact: float


class LightSimRow(_LightSimPoint):
    """`light_sim_rows`: one simulated light-traffic point beside the model."""

    light_approx: NotRequired[float]  # tags_fixed
    model_at_load: float


def light_sim_rows(results: Mapping[LightKey, Summaries]) -> list[LightSimRow]:
    """Simulated TAGS / SITA-E mean wait per replication (common random numbers), with
    the model's light-traffic ratios beside it. `results[(alpha, high, hosts, variant)]`:
    the summaries by replication."""
    rows = []
    for (a, high, h, v), runs in sorted(results.items()):
        if v == "sita_e":
            continue
        base = results[(a, high, h, "sita_e")]
        ratios = [overall(t, "wait") / overall(s, "wait")
                  for t, s in zip(runs, base, strict=True)]
        reading = "fixed_exact" if v == "tags_fixed" else "response_optimal"
        spec = bounded_pareto(a, 1.0, high)
        point: _LightSimPoint = {"alpha": a, "high": high, "hosts": h, "tags": v,
                                 "load": LIGHT_LOAD, "sim": _ci(ratios),
                                 "light_exact": light_ratio(spec, h, reading)}
        row: LightSimRow
        if v == "tags_fixed":
            approx = light_ratio(spec, h, "fixed_approx")
            lam = LIGHT_LOAD * h / moment(spec, 1)
            mus, names = [1.0] * h, [f"h{i}" for i in range(h)]
            cut = sita_e_cutoffs(spec, mus)
            row = {**point, "light_approx": approx,
                   "model_at_load": (predict_tags(lam, spec, cut, mus, names).wait
                                     / predict_sita(lam, spec, cut, mus, names).wait)}
        else:  # no kills: host 1 is one M/G/1 with every task
            lam = LIGHT_LOAD * h / moment(spec, 1)
            mus, names = [1.0] * h, [f"h{i}" for i in range(h)]
            one = lam * moment(spec, 2) / (2.0 * (1.0 - lam * moment(spec, 1)))
            row = {**point, "model_at_load": one / predict_sita(
                lam, spec, sita_e_cutoffs(spec, mus), mus, names).wait}
        rows.append(row)
    return rows


# `qos_rows`: a design that does not exist, and one size class of one that does
QosNone = TypedDict("QosNone", {"targets": str, "policy": str, "class": str, "hosts": int,
                                "none": str})
QosClassRow = TypedDict("QosClassRow", {
    "targets": str, "policy": str, "class": int, "sizes": list[float], "metric": str,
    "target": float, "hosts": int, "cutoffs": list[float], "model": float,
    "sim": dict[str, float], "meets_model": bool, "meets_sim": bool})


def qos_rows(results: Mapping[QosKey, Summaries]) -> list[QosNone | QosClassRow]:
    """Per (targets, policy, class): the target, the design's hosts and cutoffs, the
    model's class value and the simulated one (mean ± 95 % over replications). A greedy
    host sits on its target, so `meets_sim` asks only that the target not lie below the
    simulated interval."""
    rows: list[QosNone | QosClassRow] = []
    spec = qos_spec()
    for (name, policy), d in designs().items():
        classes = QOS_TARGETS[name]
        if isinstance(d, str):
            rows.append({"targets": name, "policy": policy, "class": "all", "hosts": 0,
                         "none": d})
            continue
        lo_edge = -1.0
        for ci, cls in enumerate(classes):
            mine = [(i, host) for i, host in enumerate(d.hosts) if host.size_class == ci]
            if not mine:
                continue
            key = "slowdown" if cls.metric == "slowdown" else "W"
            # model: the class mean, hosts weighted by the tasks they complete
            weights = [partial_moment(spec, 0, host.low if i else -1.0, host.high)
                       for i, host in mine]
            model = sum(w * host.value for w, (_, host) in zip(weights, mine, strict=True)) \
                / sum(weights)
            sim = _ci([_class_value(results, name, d, [i for i, _ in mine], key, r)
                       for r in range(len(results.get((name, policy, mine[0][0] if policy
                                                      == "sita" else -1), [])))])
            rows.append({"targets": name, "policy": policy, "class": ci,
                         "sizes": [max(lo_edge, spec.low or 0.0), cls.upto],
                         "metric": cls.metric, "target": cls.target,
                         "hosts": len(mine), "cutoffs": [h.high for _, h in mine][:-1],
                         "model": model, "sim": sim,
                         "meets_model": model <= cls.target * (1 + 1e-9),
                         "meets_sim": sim["mean"] - sim["ci95"] <= cls.target})
            lo_edge = cls.upto
    return rows


def _class_value(results: Mapping[QosKey, Summaries], name: str,
                 d: QosDesign, hosts: Sequence[int], key: str, rep: int) -> float:
    """The class's measured mean in one replication: its hosts' means weighted by the
    tasks each completes (a SITA host simulated on its own: by its share of the tasks,
    P(X in its interval), not by its run's count)."""
    n = tot = 0.0
    policy = d.policy
    for i in hosts:
        if policy == "sita":
            h = d.hosts[i]
            share = partial_moment(qos_spec(), 0, h.low if i else -1.0, h.high)
            n += share
            tot += share * overall(results[(name, policy, i)][rep], key)
            continue
        else:
            s = json_object(results[(name, policy, -1)][rep]["hosts"], "hosts").get(f"h{i + 1}")
            if s is None:
                continue
        means = json_object(s, f"h{i + 1}")
        n += json_float(means["count"])
        tot += json_float(means["count"]) * json_float(means[key])
    return tot / n if n else math.nan


# -- the claims ---------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.2e}"


class Reading(TypedDict):
    """One TAGS reading's measurement of a ratio claim, with its own verdict."""

    ours: str
    verdict: str


class ClaimRow(TypedDict):
    """`claim_rows`: one claim, its verdict and where its setting comes from."""

    claim: str
    source: str
    ours: str
    fixed: Reading | None  # a ratio claim: TAGS at fixed cutoffs
    response_optimal: Reading | None  # and the response-optimal TAGS
    verdict: str
    deciding: str


def _reading(text: str, ok: bool) -> Reading:
    return {"ours": text, "verdict": "reproduced" if ok else "not"}


def _overall(readings: Sequence[Reading]) -> str:
    ok = [r["verdict"] == "reproduced" for r in readings]
    return "reproduced" if all(ok) else "partly" if any(ok) else "not"


def _row(claim: str, source: str, ours: str, verdict: str, deciding: str,
         fixed: Reading | None = None, opt: Reading | None = None) -> ClaimRow:
    return {"claim": claim, "source": source, "ours": ours, "fixed": fixed,
            "response_optimal": opt, "verdict": verdict, "deciding": deciding}


def claim_rows(result: Mapping[str, Any]) -> list[ClaimRow]:
    """The six claims, each with the numbers that decide it, where its setup comes from,
    a verdict (reproduced / partly / not / not computed) and, for every miss, the
    deciding choice. A ratio claim (2 to 5) is measured for both TAGS readings, each
    with its own verdict; the claim is reproduced when both reproduce it, partly when
    one does."""
    rows: list[ClaimRow] = []
    c1 = "size-based routing performs well when the job-size variance is very high"
    src1 = ("claim: seed; sizes [1, 1000], load 0.5, 2 hosts: ours; baselines: "
            "Harchol-Balter et al. (JPDC 1999)")
    alpha = result.get("alpha_csv") or {}
    if alpha:
        s1, r1, l1 = alpha["sita_e@1"], alpha["random@1"], alpha["least_work_left@1"]
        s19, l19 = alpha["sita_e@1.9"], alpha["least_work_left@1.9"]
        ok = s1 < r1 and s1 < l1
        rows.append(_row(c1, src1,
                         f"alpha = 1, mean slowdown simulated: SITA-E {_fmt(s1)}, Random "
                         f"{_fmt(r1)}, Least-Work-Left {_fmt(l1)}; at alpha = 1.9 "
                         f"Least-Work-Left {_fmt(l19)} beats SITA-E {_fmt(s19)}",
                         "reproduced" if ok else "not",
                         "" if ok else "the size distribution's range and the baselines"))
    else:
        rows.append(_row(c1, src1, "", "not computed",
                         "run the alpha sweep first (seed002b_alpha.csv)"))

    two = [r for r in result["two_server"] if r["regime"] == "load"]
    lh = sorted((r for r in result["two_server"] if r["regime"] == "lambda_h"),
                key=lambda r: r["high"])
    far = {r["load"]: r for r in two if r["high"] == max(TWO_HIGHS)}
    rd2 = []
    for key in ("fixed", "response_optimal"):
        vals = [far[load][key] for load in TWO_LOADS]
        rd2.append(_reading(" / ".join(_fmt(v) for v in vals) + " at loads "
                            + " / ".join(f"{x:g}" for x in TWO_LOADS)
                            + f", H/L = {max(TWO_HIGHS):.0e} (<= 2)", max(vals) <= 2.0))
    rows.append(_row(
        "earlier work: as H/L -> inf at a fixed low load, SITA's mean wait is at most 2 "
        "times less than TAGS's",
        "claim: seed (citing the authors' earlier work); 2 hosts, alpha = 1, loads: ours",
        "2 hosts, alpha = 1, TAGS by the per-host approximation; light traffic, fixed "
        "cutoffs: (2h - 1)/h < 2 for every h", _overall(rd2),
        "" if _overall(rd2) == "reproduced" else "TAGS's cutoffs", *rd2))

    peaks = result["two_server_peaks"]
    fixed_sup = max(r["fixed"] for r in result["two_server"])
    lo, hi = lh[0], lh[-1]
    rd3 = [_reading(f"at most {_fmt(fixed_sup)} (H/L = 10), -> 1.50 as H/L grows, at every "
                    f"load and at lambda H = {TWO_LAMBDA_H:g} ({_fmt(hi['fixed'])} at "
                    f"{hi['high']:.0e}): bounded", hi["fixed"] > 10.0 * lo["fixed"]),
           _reading(f"lambda H = {TWO_LAMBDA_H:g}: {_fmt(lo['response_optimal'])} at H/L = "
                    f"{lo['high']:g} -> {_fmt(hi['response_optimal'])} at {hi['high']:.0e} "
                    "(no kills; about sqrt(H/L) / 2); at a fixed load it peaks at "
                    + " / ".join(_fmt(p["peak"]) for p in peaks) + " (loads "
                    + " / ".join(f"{p['load']:g}" for p in peaks) + ", H/L "
                    + " / ".join(_fmt(p["switch_high"]) for p in peaks)
                    + "), then kills and falls to about 1.42",
                    hi["response_optimal"] > 10.0 * lo["response_optimal"])]
    rows.append(_row(
        "2 servers, alpha = 1: the TAGS / SITA-E mean-wait ratio is unbounded "
        "(non-asymptotic)",
        "claim: seed; its condition lambda H < 1: Bachmat and Doncel, MASCOTS 2020 "
        "(arXiv 2012.03695, abstract); lambda H = 0.5, loads, H/L grid: ours",
        "2 hosts, alpha = 1, TAGS by the per-host approximation; simulated at load 0.01, "
        "H/L = 100 (lambda H = 0.39): see (i)'s table, h = 2", _overall(rd3),
        "TAGS's cutoffs: unbounded only for the response-optimal TAGS while it does not "
        "kill (lambda H < 1); at a fixed load its peak is finite and grows as the load "
        "falls", *rd3))

    li = result["light_i"]
    big, small = max(I_HIGHS), min(I_HIGHS)
    by = {(r["high"], r["hosts"]): r for r in li}
    fx = {h: by[(big, h)]["fixed_exact"] for h in I_HOSTS}
    op = {h: by[(big, h)]["response_optimal"] for h in I_HOSTS}
    rd4 = [_reading(f"H/L = {big:.0e}: " + ", ".join(f"h={h}: {_fmt(v)}" for h, v in fx.items())
                    + " (-> (2h-1)/h < 2; approximation alike)",
                    all(fx[h] > 10.0 * by[(small, h)]["fixed_exact"] for h in I_HOSTS)),
           _reading(f"H/L = {big:.0e}: " + ", ".join(f"h={h}: {_fmt(v)}" for h, v in op.items())
                    + " (grows as (H/L)^(1-1/h))",
                    all(op[h] > 10.0 * by[(small, h)]["response_optimal"] for h in I_HOSTS))]
    rows.append(_row(
        "(i) light traffic, alpha = 1, any number of servers h: the ratio is unbounded",
        "claim: seed; H/L and h grids, load 0.01 of the simulated points: ours",
        "light-traffic coefficients (exact for SITA-E and for TAGS at fixed cutoffs), "
        "simulated at load 0.01, H/L = 100", _overall(rd4),
        "TAGS's cutoffs: unbounded for the response-optimal TAGS (no kills in light "
        "traffic), bounded by (2h-1)/h for TAGS at SITA-E's cutoffs", *rd4))

    lii = result["light_ii"]
    lo_h, hi_h = min(II_HOSTS), max(II_HOSTS)
    grows: dict[str, bool] = {r: True for r in TAGS_READINGS}
    texts: dict[str, list[str]] = {"fixed": [], "response_optimal": []}
    for a in II_ALPHAS:
        by_h = {r["hosts"]: r for r in lii if r["alpha"] == a and r["high"] == max(II_HIGHS)}
        for reading in TAGS_READINGS:
            grows[reading] &= by_h[hi_h][reading] > 4.0 * by_h[lo_h][reading]
        texts["fixed"].append(f"alpha {a:g}: {_fmt(by_h[lo_h]['fixed_exact'])} -> "
                              f"{_fmt(by_h[hi_h]['fixed_exact'])} exact, "
                              f"{_fmt(by_h[hi_h]['fixed_approx'])} approx.")
        texts["response_optimal"].append(f"alpha {a:g}: "
                                         f"{_fmt(by_h[lo_h]['response_optimal'])} -> "
                                         f"{_fmt(by_h[hi_h]['response_optimal'])}")
    head = f"H/L = {max(II_HIGHS):.0e}, h = {lo_h} -> {hi_h}: "
    rd5 = [_reading(head + "; ".join(texts["fixed"]),
                    grows["fixed_exact"] and grows["fixed_approx"]),
           _reading(head + "; ".join(texts["response_optimal"]), grows["response_optimal"])]
    rows.append(_row(
        "(ii) light traffic, alpha in (0, 2) \\ {1}, h -> inf: the ratio is unbounded",
        "claim: seed; alpha = 0.5 and 1.5, H/L and h grids: ours",
        "every reading grows without bound: SITA-E's wait falls like 1/h; simulated at "
        "load 0.01, H/L = 100, up to 16 hosts", _overall(rd5),
        "" if _overall(rd5) == "reproduced" else "TAGS's cutoffs", *rd5))

    q = result["qos"]
    met = {(r["targets"], r["policy"]): r for r in q}
    sita_ok = all(r.get("meets_sim", False) for r in q if r["policy"] == "sita")
    tags_rows = [r for r in q if r["policy"] == "tags" and "none" not in r]
    tags_ok = bool(tags_rows) and all(r["meets_sim"] for r in tags_rows)
    tight_none = "none" in met.get(("tight", "tags"), {})
    rows.append(_row(
        "(iii) the earlier result shows how to design decentralised systems with QoS "
        "constraints",
        "claim: seed (no rule, no numbers); the design rule, sizes, lambda and targets: ours",
        "our greedy design per size class: SITA meets every target (model and simulated: "
        f"{'yes' if sita_ok else 'no'}); TAGS (decentralised) "
        + ("has no design for the tight targets (killed work alone doubles the slowdown "
           "of a task just above a cutoff); " if tight_none else "")
        + f"meets the loose ones simulated: {'yes' if tags_ok else 'no'}",
        "partly",
        "the design rule is ours: the abstract does not say how its earlier result (the "
        "factor-2 bound) gives a design"))
    return rows


# -- the table ------------------------------------------------------------------------------------


def _cell(r: Reading | None) -> str:
    return "-" if r is None else f"{r['ours']}: **{r['verdict']}**"


def claims_markdown(result: Mapping[str, Any]) -> str:
    """The claims table and the tables behind it, as markdown (docs/size_based.md)."""
    sim = result["simulated"]
    out = ["| # | claim (seed 002b's abstract) | setup from | ours | TAGS at fixed cutoffs | "
           "response-optimal TAGS | verdict | deciding choice |",
           "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(result["claims"], 1):
        out.append(f"| {i} | {r['claim']} | {r['source']} | {r['ours']} | {_cell(r['fixed'])} "
                   f"| {_cell(r['response_optimal'])} | {r['verdict']} | "
                   f"{r['deciding'] or '-'} |")
    decades = {10.0**k for k in (1, 2, 3, 4, 6, 10)}
    out += ["", "Two servers, alpha = 1 (claims 2 and 3; TAGS by the per-host approximation, "
            "response-optimal cutoff found numerically; \"lambda H\": lambda = "
            f"{TWO_LAMBDA_H:g} / H, so the load falls as H grows):", "",
            "| regime | H/L | load | response-optimal cutoff | fixed | response-optimal |",
            "|---|---|---|---|---|---|"]
    for r in result["two_server"]:
        if min(abs(r["high"] / d - 1.0) for d in decades) > 1e-9:
            continue
        regime = (f"load {r['load']:g}" if r["regime"] == "load"
                  else f"lambda H = {TWO_LAMBDA_H:g}")
        cut = "H (no kills)" if not r["kills"] else _fmt(r["opt_cutoff"])
        out.append(f"| {regime} | {r['high']:.0e} | {_fmt(r['load'])} | {cut} | "
                   f"{_fmt(r['fixed'])} | {_fmt(r['response_optimal'])} |")
    out += ["", "The response-optimal ratio's peak over H/L at a fixed load (the largest "
            "H/L at which it does not kill; just above, it kills):", "",
            "| load | H/L at the switch | peak | just above |", "|---|---|---|---|"]
    for p in result["two_server_peaks"]:
        out.append(f"| {p['load']:g} | {_fmt(p['switch_high'])} | {_fmt(p['peak'])} | "
                   f"{_fmt(p['after'])} |")
    out += ["", "Light traffic, alpha = 1: kappa_TAGS / kappa_SITA-E (claim i; TAGS at "
            "SITA-E's cutoffs, per-host approximation and exact; response-optimal TAGS):", "",
            "| H/L | h | fixed, approx. | fixed, exact | (2h-1)/h | response-optimal |",
            "|---|---|---|---|---|---|"]
    for r in result["light_i"]:
        out.append(f"| {r['high']:.0e} | {r['hosts']} | {_fmt(r['fixed_approx'])} | "
                   f"{_fmt(r['fixed_exact'])} | {_fmt(r['limit_fixed'])} | "
                   f"{_fmt(r['response_optimal'])} |")
    out += ["", "Light traffic, alpha != 1, growing h (claim ii):", "",
            "| alpha | H/L | h | fixed, approx. | fixed, exact | response-optimal |",
            "|---|---|---|---|---|---|"]
    for r in result["light_ii"]:
        out.append(f"| {r['alpha']:g} | {r['high']:.0e} | {r['hosts']} | "
                   f"{_fmt(r['fixed_approx'])} | {_fmt(r['fixed_exact'])} | "
                   f"{_fmt(r['response_optimal'])} |")
    out += ["", f"Simulated at load {result['light_load']:g} (H/L = 100; "
            f"{sim['replications']} x {sim['requests']:,} requests, ratio per replication, "
            "95 % interval) beside the light-traffic limit and the model at that load:", "",
            "| alpha | h | TAGS | simulated | light traffic, exact | approx. (limit) "
            "| approx. at the load |", "|---|---|---|---|---|---|---|"]
    for r in result["light_sim"]:
        s = r["sim"]
        out.append(f"| {r['alpha']:g} | {r['hosts']} | "
                   f"{'fixed' if r['tags'] == 'tags_fixed' else 'response-optimal'} | "
                   f"{_fmt(s['mean'])} ± {_fmt(s['ci95'])} | {_fmt(r['light_exact'])} | "
                   f"{_fmt(r['light_approx']) if 'light_approx' in r else '-'} | "
                   f"{_fmt(r['model_at_load']) if 'model_at_load' in r else '-'} |")
    qs = result["qos_setup"]
    a, lo_s, hi_s = qs["size"]
    out += ["", f"QoS design (claim iii; sizes bounded Pareto, alpha {a:g} on [{lo_s:g}, "
            f"{hi_s:g}], lambda = "
            f"{qs['lambda']:g} per model ms, hosts of mu = 1):", "",
            "| targets | policy | sizes | target | hosts | cutoffs inside | model | "
            "simulated | met |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["qos"]:
        if "none" in r:
            out.append(f"| {r['targets']} | {r['policy'].upper()} | all | - | none | - | - "
                       f"| - | {r['none']} |")
            continue
        s = r["sim"]
        lo, hi = r["sizes"]
        cut = ", ".join(f"{x:.3g}" for x in r["cutoffs"]) or "-"
        out.append(f"| {r['targets']} | {r['policy'].upper()} | ({lo:g}, {hi:g}] | "
                   f"{r['metric']} <= {r['target']:g} | {r['hosts']} | {cut} | "
                   f"{_fmt(r['model'])} | {_fmt(s['mean'])} ± {_fmt(s['ci95'])} | "
                   f"{'yes' if r['meets_sim'] else 'no'} |")
    return "\n".join(out) + "\n"


__all__ = ["II_ALPHAS", "II_HIGHS", "II_HOSTS", "I_HIGHS", "I_HOSTS", "LIGHT_LOAD",
           "QOS_LAMBDA", "QOS_SIZE", "QOS_TARGETS", "TWO_HIGHS", "TWO_LAMBDA_H", "TWO_LOADS",
           "SimJob", "claim_rows", "claims_markdown", "designs", "light_jobs", "light_rows",
           "light_scenario", "light_sim_rows", "qos_jobs", "qos_rows", "qos_spec",
           "two_server_peak", "two_server_ratios", "two_server_rows"]
