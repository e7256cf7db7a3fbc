"""The simulator against exact answers, within honest confidence intervals.

Two independent references: closed forms (M/M/1/K for `basic`, independent
M/M/1/K nodes when eta = 0, Erlang-B for `multi`) and a small joint chain over
(OFN availability, n_F, n_O) written here from the shared semantics, with a
tagged-request chain for what happens to a request at an OFN that leaves
(drain, drop, handoff). Where `fogsdn.exact.ctmc.predict` exists, the simulator is
also checked against it, and the two models against each other.

Each simulated number is a batch-means mean over one fixed-seed run; "agrees"
means within 4 standard errors (so a correct engine essentially never fails, and a
wrong one, say a wrong leave semantics, is off by many).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammainc, gammaincc

from fogsdn.core.scenario import Scenario, parse_scenario
from fogsdn.exact.ctmc import predict
from fogsdn.exact.model_params import model_params_from_scenario
from fogsdn.measure.metrics import MeanCI, batch_means_ci
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import BLOCKED, LOST, OK

Z = 4.0  # standard errors
ABS_TOL = 5e-4  # for probabilities the run may see no event of at all
REQUESTS = 200_000
METRICS = ("W", "blocking", "lost", "outage")


def scenario(
    policy: str = "prioritized",
    leave: str = "drain",
    *,
    eta: float = 1 / 3,
    xi: float = 1 / 3,
    lam_hp: float = 0.3,
    lam_lp: float = 0.5,
    cap_f: int = 20,
    cap_o: int = 10,
    mu_f: float = 1.0,
    mu_o: float = 0.3,
    servers_f: str = "single",
    servers_o: str = "single",
    alpha: float = 0.5,
    seed: int = 11,
) -> Scenario:
    return parse_scenario({
        "name": f"exact-{policy}-{leave}",
        "seed": seed,
        "duration_ms": 1e9,
        "warmup_ms": 200,
        "deadline_ms": 30,
        "timeout_ms": 1e6,
        "workload": {"lambda_hp": lam_hp, "lambda_lp": lam_lp, "clients": 2},
        "nodes": [
            {"name": "fn", "role": "fn", "mu": mu_f, "capacity": cap_f, "servers": servers_f},
            {"name": "ofn1", "role": "ofn", "mu": mu_o, "capacity": cap_o, "servers": servers_o},
        ],
        "churn": {"eta": eta, "xi": xi, "leave": leave, "initial": "stationary"},
        "policy": {"name": policy, "alpha": alpha},
    })


# -- simulation ------------------------------------------------------------------------


_SIM_CACHE: dict[str, dict[str, dict[str, MeanCI]]] = {}


def sim_stats(sc: Scenario, requests: int = REQUESTS) -> dict[str, dict[str, MeanCI]]:
    """Per class: mean node sojourn of answered requests, blocking, lost and outage
    (cached: the oracle and the CTMC checks look at the same runs)."""
    key = f"{sc.model_dump_json()}/{requests}"
    if key not in _SIM_CACHE:
        _SIM_CACHE[key] = _sim_stats(sc, requests)
    return _SIM_CACHE[key]


def _sim_stats(sc: Scenario, requests: int) -> dict[str, dict[str, MeanCI]]:
    rows: list[tuple[Any, ...]] = []
    simulate(sc, rows.extend, requests=requests)
    assert len(rows) == requests
    rows = sorted((r for r in rows if r[6] >= sc.warmup_ms), key=lambda r: r[6])
    out: dict[str, dict[str, MeanCI]] = {}
    for ci, cls in enumerate(("hp", "lp")):
        rs = [r for r in rows if r[4] == ci]
        out[cls] = {
            "W": batch_means_ci([r[0] - r[6] for r in rs if r[1] == OK]),
            "blocking": batch_means_ci([float(r[1] == BLOCKED) for r in rs]),
            "lost": batch_means_ci([float(r[1] == LOST) for r in rs]),
            "outage": batch_means_ci(
                [float(not (r[1] == OK and r[0] - r[6] <= sc.deadline_ms)) for r in rs]
            ),
        }
    return out


def agrees(ci: MeanCI, exact: float) -> bool:
    se = ci.half_width / stats.t.ppf(0.975, 19)
    return abs(ci.mean - exact) <= Z * se + ABS_TOL


def check(sc: Scenario, exact: dict[str, dict[str, float | None]]) -> None:
    got = sim_stats(sc)
    bad = []
    for cls, metrics in exact.items():
        for m, x in metrics.items():
            if x is None or (isinstance(x, float) and math.isnan(x)):
                continue
            ci = got[cls][m]
            if not agrees(ci, x):
                bad.append(
                    f"{cls} {m}: simulated {ci.mean:.5f} ± {ci.half_width:.5f}, exact {x:.5f}"
                )
    assert not bad, f"{sc.name}: " + "; ".join(bad)


# -- closed forms ----------------------------------------------------------------------


def mm1k(lam: float, mu: float, cap: int, deadline: float) -> dict[str, float]:
    """M/M/1/K: W of accepted requests, blocking, and P(blocked or T > deadline)."""
    rho = lam / mu
    p = np.array([rho**n for n in range(cap + 1)])
    p /= p.sum()
    accepted = p[:-1] / (1 - p[-1])
    n = np.arange(cap)
    w = float((accepted * (n + 1)).sum() / mu)
    late = float((accepted * gammaincc(n + 1, mu * deadline)).sum())
    return {"W": w, "blocking": float(p[-1]), "outage": float(p[-1] + (1 - p[-1]) * late)}


def erlang_b(load: float, servers: int) -> float:
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return b


# -- a joint chain written from the shared semantics ----------------------------------


def routes(policy: str, alpha: float, cls: str, up: bool) -> dict[str, float]:
    if policy == "basic" or not up:
        return {"F": 1.0}
    if policy == "prioritized":
        return {"F": 1.0} if cls == "hp" else {"O": 1.0}
    return {"F": alpha, "O": 1.0 - alpha}  # nodiff


def oracle(sc: Scenario) -> dict[str, dict[str, float | None]]:
    """Per class W, blocking, lost and outage (None where not derived here)."""
    fn, ofn = sc.nodes
    cf, co, mf, mo = fn.capacity, ofn.capacity, fn.mu, ofn.mu
    multi_f, multi_o = fn.servers == "multi", ofn.servers == "multi"
    eta, xi, leave = sc.churn.eta, sc.churn.xi, str(sc.churn.leave)
    lam = {"hp": sc.workload.lambda_hp, "lp": sc.workload.lambda_lp}
    pol, alpha, d = sc.policy.name, sc.policy.alpha, sc.deadline_ms
    assert eta > 0 and xi > 0
    shape = (2, cf + 1, co + 1)  # a = 0 available, 1 away
    size = int(np.prod(shape))
    q = np.zeros((size, size))

    def ix(a: int, f: int, o: int) -> int:
        return int(np.ravel_multi_index((a, f, o), shape))

    for a in (0, 1):
        for f in range(cf + 1):
            for o in range(co + 1):
                s = ix(a, f, o)
                for cls, rate in lam.items():
                    for node, share in routes(pol, alpha, cls, a == 0).items():
                        if node == "F" and f < cf:
                            q[s, ix(a, f + 1, o)] += rate * share
                        if node == "O" and o < co:
                            q[s, ix(a, f, o + 1)] += rate * share
                if f:
                    q[s, ix(a, f - 1, o)] += mf * (f if multi_f else 1)
                if o:
                    q[s, ix(a, f, o - 1)] += mo * (o if multi_o else 1)
                if a == 0:
                    to = {"drain": (1, f, o), "drop": (1, f, 0),
                          "handoff": (1, min(cf, f + o), 0)}[leave]
                    q[s, ix(*to)] += eta
                else:
                    q[s, ix(0, f, o)] += xi
    np.fill_diagonal(q, -q.sum(axis=1))
    lhs = q.T.copy()
    lhs[-1, :] = 1.0
    rhs = np.zeros(size)
    rhs[-1] = 1.0
    pi = np.linalg.solve(lhs, rhs).reshape(shape)

    # what becomes of a request that joins the OFN finding n_O there and n_F at the FN:
    # P(answered), E[T; answered], P(answered within d)  (d only where derived)
    lam_f_up = sum(r * routes(pol, alpha, c, True).get("F", 0.0) for c, r in lam.items())
    g, h, ok_in_d = tagged(leave, cf, co, mf, mo, eta, lam_f_up, multi_o, d)

    out: dict[str, dict[str, float | None]] = {}
    for cls in lam:
        blocked = answered = t_sum = in_d = 0.0
        for a in (0, 1):
            for node, share in routes(pol, alpha, cls, a == 0).items():
                for f in range(cf + 1):
                    for o in range(co + 1):
                        p = pi[a, f, o] * share
                        if p == 0.0:
                            continue
                        if node == "F":
                            if f == cf:
                                blocked += p
                                continue
                            k = 1 if multi_f else f + 1
                            answered += p
                            t_sum += p * k / mf
                            in_d += p * gammainc(k, mf * d)
                        else:
                            if o == co:
                                blocked += p
                                continue
                            answered += p * g[o, f]
                            t_sum += p * h[o, f]
                            in_d += p * ok_in_d[o, f] if ok_in_d is not None else math.nan
        out[cls] = {
            "W": t_sum / answered,
            "blocking": blocked,
            "lost": 1.0 - blocked - answered,
            "outage": None if math.isnan(in_d) else 1.0 - in_d,
        }
    return out


def tagged(
    leave: str, cf: int, co: int, mf: float, mo: float, eta: float, lam_f: float,
    multi_o: bool, d: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Arrays [n_O, n_F] for a request joining an available OFN."""
    k = np.ones((co + 1, cf + 1)) if multi_o else np.arange(1, co + 2)[:, None] * np.ones(cf + 1)
    if leave == "drain":  # the OFN keeps serving whatever happens
        return np.ones_like(k), k / mo, gammainc(k, mo * d)
    if leave == "drop":  # answered iff its k services end before the OFN leaves
        r = mo / (mo + eta)
        return r**k, r**k * k / (mo + eta), r**k * gammainc(k, (mo + eta) * d)
    # handoff: states (position i at the OFN, n_F); on leaving it lands at position
    # n_F + i in the FN queue (lost beyond cf) and needs that many FN services
    assert not multi_o, "the handoff oracle covers a single-server OFN"
    n = co * (cf + 1)

    def ix(i: int, f: int) -> int:
        return (i - 1) * (cf + 1) + f

    m = np.zeros((n, n))
    b_g, b_h = np.zeros(n), np.zeros(n)
    for i in range(1, co + 1):
        for f in range(cf + 1):
            s = ix(i, f)
            out = mo + eta + (lam_f if f < cf else 0.0) + (mf if f else 0.0)
            m[s, s] = out
            if i > 1:
                m[s, ix(i - 1, f)] -= mo
            else:
                b_g[s] += mo
            if f + i <= cf:
                b_g[s] += eta
                b_h[s] += eta * (f + i) / mf
            if f < cf:
                m[s, ix(i, f + 1)] -= lam_f
            if f:
                m[s, ix(i, f - 1)] -= mf
    g = np.linalg.solve(m, b_g)
    # E[T; ok] = E[holding] P(ok) + sum over next states
    h = np.linalg.solve(m, b_h + g)
    gg, hh = np.zeros((co + 1, cf + 1)), np.zeros((co + 1, cf + 1))
    for i in range(1, co + 1):
        for f in range(cf + 1):
            gg[i - 1, f], hh[i - 1, f] = g[ix(i, f)], h[ix(i, f)]
    return gg, hh, None


# -- closed forms --------------------------------------------------------------------------


def test_basic_is_mm1k() -> None:
    sc = scenario("basic", lam_hp=0.3, lam_lp=0.5, cap_f=8)
    ref = mm1k(0.8, 1.0, 8, sc.deadline_ms)
    check(sc, {c: ref | {"lost": 0.0} for c in ("hp", "lp")})


def test_no_churn_prioritized_is_two_independent_mm1k() -> None:
    sc = scenario("prioritized", eta=0.0, xi=0.0, cap_f=5, cap_o=6, mu_o=0.6, lam_lp=0.5)
    check(sc, {
        "hp": mm1k(0.3, 1.0, 5, sc.deadline_ms) | {"lost": 0.0},
        "lp": mm1k(0.5, 0.6, 6, sc.deadline_ms) | {"lost": 0.0},
    })


def test_no_churn_nodiff_splits_poisson_streams() -> None:
    alpha = 0.6
    sc = scenario("nodiff", eta=0.0, xi=0.0, cap_f=5, cap_o=4, mu_o=0.5, alpha=alpha)
    f = mm1k(alpha * 0.8, 1.0, 5, sc.deadline_ms)
    o = mm1k((1 - alpha) * 0.8, 0.5, 4, sc.deadline_ms)
    acc_f, acc_o = alpha * (1 - f["blocking"]), (1 - alpha) * (1 - o["blocking"])
    mix = {
        "W": (acc_f * f["W"] + acc_o * o["W"]) / (acc_f + acc_o),
        "blocking": alpha * f["blocking"] + (1 - alpha) * o["blocking"],
        "outage": alpha * f["outage"] + (1 - alpha) * o["outage"],
        "lost": 0.0,
    }
    check(sc, {"hp": mix, "lp": mix})


def test_multi_servers_are_erlang_b() -> None:
    sc = scenario("basic", cap_f=3, servers_f="multi")
    b = erlang_b(0.8, 3)
    ref = {"W": 1.0, "blocking": b, "outage": b + (1 - b) * math.exp(-sc.deadline_ms), "lost": 0.0}
    check(sc, {"hp": ref, "lp": ref})


def test_oracle_reduces_to_closed_forms() -> None:
    """The joint chain written here agrees with M/M/1/K where churn cannot matter."""
    sc = scenario("basic", cap_f=8)
    got, ref = oracle(sc)["hp"], mm1k(0.8, 1.0, 8, sc.deadline_ms)
    for m in ("W", "blocking", "outage"):
        assert got[m] == pytest.approx(ref[m], rel=1e-9)


# -- churn: every scheme and leave option, against the joint chain ------------------------

CHURN_POINTS = [
    ("prioritized", "drain", {}),
    ("prioritized", "drop", {}),
    ("prioritized", "handoff", {"cap_f": 12}),
    ("nodiff", "drain", {"cap_o": 6}),
    ("nodiff", "drop", {"cap_o": 6, "mu_o": 0.5}),
    ("nodiff", "handoff", {"cap_f": 10, "cap_o": 6, "mu_o": 0.5}),
    ("basic", "handoff", {"cap_f": 10}),
    ("prioritized", "drain", {"servers_o": "multi", "cap_o": 3, "eta": 2 / 3}),
    ("nodiff", "drop", {"servers_f": "multi", "servers_o": "multi", "cap_f": 3, "cap_o": 2}),
]


@pytest.mark.parametrize(("policy", "leave", "over"), CHURN_POINTS,
                         ids=[f"{p}-{lv}-{i}" for i, (p, lv, _) in enumerate(CHURN_POINTS)])
def test_churn_matches_joint_chain(policy: str, leave: str, over: dict[str, Any]) -> None:
    sc = scenario(policy, leave, **over)
    check(sc, oracle(sc))


def test_leave_options_differ_where_they_should() -> None:
    """drop loses LP requests, handoff loses fewer, drain none (guards the oracle checks
    against passing vacuously)."""
    lost = {lv: oracle(scenario("prioritized", lv, cap_f=12))["lp"]["lost"]
            for lv in ("drain", "drop", "handoff")}
    assert lost["drain"] == pytest.approx(0.0, abs=1e-12)
    assert lost["drop"] > lost["handoff"] > 0.001
    got = sim_stats(scenario("prioritized", "drop"))["lp"]["lost"]
    assert got.mean > 0.05


# -- against fogsdn.exact.ctmc ----------------------------------------------


def _predicted(sc: Scenario) -> dict[str, dict[str, float | None]]:
    pred = predict(model_params_from_scenario(sc)).to_dict()
    out: dict[str, dict[str, float | None]] = {}
    for cls in ("hp", "lp"):
        p = pred[cls]
        # the model's drop_prob is per accepted request; the trace's lost share is per arrival
        lost = p["drop_prob"] * (1.0 - p["blocking"]) if p["drop_prob"] == p["drop_prob"] else 0.0
        out[cls] = {"W": p["W"], "blocking": p["blocking"], "lost": lost,
                    "outage": p["outage"]}
    return out


CTMC_POINTS = [(p, lv, o) for p, lv, o in CHURN_POINTS if p != "basic"]


@pytest.mark.parametrize(("policy", "leave", "over"), CTMC_POINTS,
                         ids=[f"{p}-{lv}-{i}" for i, (p, lv, _) in enumerate(CTMC_POINTS)])
def test_simulation_matches_ctmc(policy: str, leave: str, over: dict[str, Any]) -> None:
    sc = scenario(policy, leave, **over)
    check(sc, _predicted(sc))


@pytest.mark.parametrize(("policy", "leave", "over"), CTMC_POINTS,
                         ids=[f"{p}-{lv}-{i}" for i, (p, lv, _) in enumerate(CTMC_POINTS)])
def test_ctmc_matches_this_oracle(policy: str, leave: str, over: dict[str, Any]) -> None:
    sc = scenario(policy, leave, **over)
    pred, ref = _predicted(sc), oracle(sc)
    for cls in ("hp", "lp"):
        for m in METRICS:
            if pred[cls][m] is not None and ref[cls][m] is not None:
                assert pred[cls][m] == pytest.approx(ref[cls][m], rel=1e-6, abs=1e-9), (cls, m)
