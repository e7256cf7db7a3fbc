"""The exact FN/OFN chain against closed forms and its own invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fogsdn.exact.class_prediction import ModelError
from fogsdn.exact.ctmc import (
    ModelParams,
    build_chain,
    predict,
    service_rates,
    solve_stationary,
)
from fogsdn.exact.linsolve import gth_dense, gth_levels

BASE = dict(lam_hp=0.3, lam_lp=0.5, mu_f=1.0, mu_of=0.3, cap_f=20, cap_o=10,
            eta=1 / 3, xi=1 / 3)


def params(**kw: object) -> ModelParams:
    d: dict[str, object] = {"scheme": "proposed", **BASE}
    d.update(kw)
    return ModelParams(**d)  # type: ignore[arg-type]


def mm1k(lam: float, mu: float, k: int) -> np.ndarray:
    """M/M/1/K occupancy, computed in ratios (no cancellation)."""
    r = lam / mu
    w = np.array([r**n for n in range(k + 1)])
    return w / w.sum()


def mm1k_metrics(lam: float, mu: float, k: int) -> tuple[float, float, float]:
    p = mm1k(lam, mu, k)
    n = float(p @ np.arange(k + 1))
    lam_eff = lam * (1 - p[k])
    return float(p[k]), n / lam_eff, n  # blocking, W, N


def erlang_b(servers: int, load: float) -> float:
    b = 1.0
    for c in range(1, servers + 1):
        b = load * b / (c + load * b)
    return b


def test_basic_is_mm1k() -> None:
    pr = predict(params(scheme="basic"))
    block, w, n = mm1k_metrics(0.8, 1.0, 20)
    for c in (pr.hp, pr.lp):
        assert c.blocking == pytest.approx(block, rel=1e-12)
        assert c.W == pytest.approx(w, rel=1e-12)
        assert c.drop_prob == 0.0
    assert pr.hp.N + pr.lp.N == pytest.approx(n, rel=1e-12)
    assert pr.hp.N / pr.lp.N == pytest.approx(0.3 / 0.5, rel=1e-12)
    assert pr.mean_ofn == 0.0


def test_multi_servers_are_erlang_b() -> None:
    p = params(scheme="basic", lam_hp=3.0, lam_lp=4.0, mu_f=1.0, cap_f=9, servers_f="multi")
    pr = predict(p)
    assert pr.hp.blocking == pytest.approx(erlang_b(9, 7.0), rel=1e-12)
    assert pr.lp.W == pytest.approx(1.0, rel=1e-12)  # own server: exponential service
    assert pr.mean_fn == pytest.approx(7.0 * (1 - erlang_b(9, 7.0)), rel=1e-12)


def test_ofn_never_available_equals_basic() -> None:
    basic = predict(params(scheme="basic"))
    for scheme in ("proposed", "nodiff"):
        for leave in ("drain", "handoff", "drop"):
            pr = predict(params(scheme=scheme, eta=0.5, xi=0.0, leave=leave))
            assert pr.p_available == 0.0
            for c in ("hp", "lp"):
                assert pr.cls(c).W == pytest.approx(basic.cls(c).W, rel=1e-12)
                assert pr.cls(c).blocking == pytest.approx(basic.cls(c).blocking, rel=1e-12)
            assert pr.mean_ofn == 0.0


def test_ofn_always_available_gives_independent_queues() -> None:
    for leave in ("drain", "handoff", "drop"):
        pr = predict(params(eta=0.0, xi=0.7, leave=leave))
        bf, wf, nf = mm1k_metrics(0.3, 1.0, 20)
        bo, wo, no = mm1k_metrics(0.5, 0.3, 10)
        assert pr.hp.blocking == pytest.approx(bf, rel=1e-12)
        assert pr.hp.W == pytest.approx(wf, rel=1e-12)
        assert pr.lp.blocking == pytest.approx(bo, rel=1e-12)
        assert pr.lp.W == pytest.approx(wo, rel=1e-12)
        assert pr.mean_fn == pytest.approx(nf, rel=1e-12)
        assert pr.mean_ofn == pytest.approx(no, rel=1e-12)


def test_nodiff_with_alpha_one_equals_basic() -> None:
    basic = predict(params(scheme="basic"))
    for leave in ("drain", "handoff", "drop"):
        pr = predict(params(scheme="nodiff", alpha=1.0, leave=leave))
        assert pr.hp.W == pytest.approx(basic.hp.W, rel=1e-12)
        assert pr.lp.blocking == pytest.approx(basic.lp.blocking, rel=1e-12)
        assert pr.mean_ofn == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("leave", ["drain", "handoff", "drop"])
@pytest.mark.parametrize("scheme", ["proposed", "nodiff"])
@pytest.mark.parametrize("servers", ["single", "multi"])
def test_little_and_flow_conservation(leave: str, scheme: str, servers: str) -> None:
    p = params(scheme=scheme, leave=leave, servers_f=servers, servers_o=servers)
    pr = predict(p)
    # Little: every accepted request's stay, completed or dropped
    assert pr.hp.N + pr.lp.N == pytest.approx(pr.mean_fn + pr.mean_ofn, rel=1e-10)
    # completions per ms, from the nodes' busy probabilities, equal accepted minus dropped
    st = pr.stationary
    served = (st.p_fn.sum(0) @ service_rates(p.mu_f, p.cap_f, servers)
              + st.p_ofn.sum(0) @ service_rates(p.mu_of, p.cap_o, servers))
    done = sum(c.throughput * (1 - c.drop_prob) for c in (pr.hp, pr.lp))
    assert served == pytest.approx(done, rel=1e-10)
    # arrivals = accepted + blocked
    for c in (pr.hp, pr.lp):
        assert c.accepted + c.blocking == pytest.approx(1.0, rel=1e-12)
    # the accepted-request CDF tends to 1 - drop_prob
    for c in ("hp", "lp"):
        far = pr.cdf(c, [400.0], "accepted")[0]
        assert far == pytest.approx(1 - pr.cls(c).drop_prob, rel=1e-9)


@pytest.mark.parametrize("leave", ["drain", "drop", "handoff"])
def test_solvers_agree(leave: str) -> None:
    p = params(scheme="nodiff", alpha=0.3, leave=leave, cap_f=12, cap_o=7)
    ref = solve_stationary(p, "gth")
    methods = ["sparse"] + (["lumped"] if leave != "handoff" else [])
    for m in methods:
        other = solve_stationary(p, m)  # type: ignore[arg-type]
        assert np.allclose(other.p_fn, ref.p_fn, rtol=1e-10, atol=1e-15)
        assert np.allclose(other.p_ofn, ref.p_ofn, rtol=1e-10, atol=1e-15)


def test_gth_levels_matches_dense_gth() -> None:
    p = params(leave="handoff", cap_f=6, cap_o=4)
    chain = build_chain(p, 6, 4, "ofn")
    assert chain.hub
    assert np.allclose(gth_levels(chain), gth_dense(chain.Q.toarray()), rtol=1e-12, atol=0)


def test_mm1k_response_cdf_closed_form() -> None:
    lam, mu, k = 0.7, 1.0, 15
    pr = predict(params(scheme="basic", lam_hp=lam, lam_lp=0.0, mu_f=mu, cap_f=k))
    pn = mm1k(lam, mu, k)
    acc = pn[:k] / pn[:k].sum()
    for t in (0.1, 1.0, 3.0, 10.0, 25.0):
        # P(Erlang(n+1, mu) <= t) = 1 - sum_{i<=n} e^{-mu t}(mu t)^i / i!
        ref = sum(acc[n] * (1 - sum(math.exp(-mu * t) * (mu * t) ** i / math.factorial(i)
                                    for i in range(n + 1))) for n in range(k))
        assert pr.cdf("hp", [t])[0] == pytest.approx(ref, rel=1e-10)
    # a long queue with little blocking is close to M/M/1: exponential(mu - lam)
    pr2 = predict(params(scheme="basic", lam_hp=0.5, lam_lp=0.0, mu_f=1.0, cap_f=200))
    t = np.array([0.5, 2.0, 6.0])
    assert np.allclose(pr2.cdf("hp", t), 1 - np.exp(-0.5 * t), rtol=1e-12)
    assert pr2.hp.percentiles()["p50"] == pytest.approx(math.log(2) / 0.5, rel=1e-8)


def test_tiny_outage_is_accurate() -> None:
    lam, mu, k, d = 0.01, 1.0, 5, 30.0
    pr = predict(params(scheme="basic", lam_hp=lam, lam_lp=0.0, mu_f=mu, cap_f=k,
                        deadline=d))
    pn = mm1k(lam, mu, k)
    acc = pn[:k] / pn[:k].sum()
    # P(Erlang(n+1, mu) > d) = e^{-mu d} sum_{i<=n} (mu d)^i / i!: positive terms only
    tail = sum(acc[n] * sum(math.exp(-mu * d) * (mu * d) ** i / math.factorial(i)
                            for i in range(n + 1)) for n in range(k))
    assert 1e-14 < tail < 1e-12
    assert pr.hp.outage_accepted == pytest.approx(tail, rel=1e-6)
    assert pr.hp.outage == pytest.approx(pn[k] + pn[:k].sum() * tail, rel=1e-6)
    assert pr.hp.blocking == pytest.approx(pn[k], rel=1e-9)


def test_drop_mode_closed_form() -> None:
    # eta = 0 would never drop; with churn, an OFN request with p stages to go
    # completes w.p. (mu/(mu+eta))^p
    p = params(leave="drop", cap_o=1, servers_o="single")
    pr = predict(p)
    q = 0.3 / (0.3 + 1 / 3)
    fn_part, ofn_part = pr.lp.response.components  # LP goes to the FN while U
    assert fn_part.p_drop == 0.0
    assert ofn_part.p_drop / ofn_part.mass == pytest.approx(1 - q, rel=1e-12)
    assert ofn_part.t_complete / ofn_part.p_complete == pytest.approx(1 / (0.3 + 1 / 3))
    assert pr.lp.drop_prob == pytest.approx(ofn_part.p_drop / pr.lp.accepted, rel=1e-12)


@pytest.mark.parametrize("bad", [
    dict(lam_hp=-0.1), dict(mu_f=0.0), dict(cap_f=0), dict(cap_o=0), dict(alpha=1.5),
    dict(eta=-1.0), dict(scheme="fastest"), dict(leave="teleport"), dict(lam_hp=0.0, lam_lp=0.0),
    dict(mu_of=0.0), dict(deadline=0.0), dict(lam_lp=float("nan")), dict(servers_f="many"),
])
def test_bad_params_raise(bad: dict[str, object]) -> None:
    with pytest.raises(ModelError):
        params(**bad)
