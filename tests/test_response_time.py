"""Tagged-request distributions: the handoff chain against a brute-force build."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from fogsdn.exact.ctmc import ModelParams, arrival_rates, predict
from fogsdn.exact.response_time import ErlangMixture
from fogsdn.exact.two_node_handoff import HandoffChain


def brute_handoff_cdf(p: ModelParams, weights: np.ndarray, times: list[float]) -> np.ndarray:
    """P(done by t) for a tagged OFN request, from an explicitly enumerated chain."""
    cf, co = p.cap_f, p.cap_o
    lam_f = arrival_rates(p)[0][0]
    states = [("F", pos) for pos in range(1, cf + 1)]
    states += [("O", k, j) for j in range(co) for k in range(cf + 1)]
    states += [("done",), ("drop",)]
    idx = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))

    def rate(a: tuple, b: tuple, r: float) -> None:
        Q[idx[a], idx[b]] += r

    for pos in range(1, cf + 1):
        rate(("F", pos), ("F", pos - 1) if pos > 1 else ("done",), p.mu_f)
    for j in range(co):
        for k in range(cf + 1):
            s = ("O", k, j)
            if k < cf:
                rate(s, ("O", k + 1, j), lam_f)
            if k > 0:
                rate(s, ("O", k - 1, j), p.mu_f)
            if j > 0:
                rate(s, ("O", k, j - 1), p.mu_of)
            else:
                rate(s, ("done",), p.mu_of)
            pos = k + j + 1
            rate(s, ("F", pos) if pos <= cf else ("drop",), p.eta)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    v0 = np.zeros(len(states))
    for j in range(co):
        for k in range(cf + 1):
            v0[idx[("O", k, j)]] = weights[k, j]
    return np.array([(v0 @ expm(Q * t))[idx[("done",)]] for t in times])


def test_handoff_chain_matches_brute_force() -> None:
    p = ModelParams("proposed", 0.6, 0.5, 1.0, 0.4, 5, 4, 0.3, 0.2, leave="handoff")
    pr = predict(p)
    comp = pr.lp.response.components[-1]
    assert isinstance(comp, HandoffChain)
    times = [0.5, 2.0, 7.0, 20.0]
    ref = brute_handoff_cdf(p, comp.weights, times)
    got = comp.completed_by(np.array(times))
    assert np.allclose(got, ref, rtol=1e-9, atol=1e-14)
    rest = comp.not_completed_by(np.array(times))
    assert np.allclose(got + rest, comp.mass, rtol=1e-12)
    assert comp.p_drop > 0  # a full FN turns some handoffs away


def test_erlang_mixture_tail_is_direct() -> None:
    # one stage of rate 1: P(T > 40) = e^-40, far below what 1 - CDF could resolve
    m = ErlangMixture(np.array([1.0]), 1.0)
    assert m.not_completed_by(np.array([40.0]))[0] == pytest.approx(np.exp(-40.0), rel=1e-12)
    assert m.completed_by(np.array([40.0]))[0] == 1.0


def test_cdf_views_are_consistent() -> None:
    pr = predict(ModelParams("nodiff", 0.3, 0.5, 1.0, 0.3, 20, 10, 1 / 3, 1 / 3,
                             leave="drop"))
    t = np.array([1.0, 5.0, 30.0])
    c = pr.lp
    assert np.allclose(pr.cdf("lp", t, "all"),
                       pr.cdf("lp", t, "accepted") * c.accepted, rtol=1e-12)
    f = pr.cdf("lp", t, "completed")
    assert (np.diff(f) > 0).all() and f[-1] <= 1.0
    q = c.percentiles()
    assert q["p50"] < q["p90"] < q["p95"] < q["p99"]
    assert pr.cdf("lp", [q["p90"]])[0] == pytest.approx(0.9, rel=1e-8)
    # outage over all arrivals = blocked + accepted and not answered in time
    assert c.outage == pytest.approx(c.blocking + c.accepted * c.outage_accepted, rel=1e-12)
