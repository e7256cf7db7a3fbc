"""Seed 000's future work, offloading to the cloud (scenarios/seed000_cloud.yaml,
`prioritized_cloud`): where each class goes, the exact chain's W and W_e2e against
closed forms, and the simulator against the exact chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, call_main

from fogsdn.core.scenario import PolicySpec, Role, TaskClass, load_scenario
from fogsdn.exact.model_params import exact_prediction
from fogsdn.exact.network import network_share
from fogsdn.policies import make_policy
from fogsdn.policies.base import ClusterView, NodeView
from fogsdn.sim.runner import run_simulation

SCENARIO = ROOT / "scenarios" / "seed000_cloud.yaml"
CLOUD_NET_MS = 10.0  # 2.5 model ms each way on the cloud's link, two round trips


def _view(ofn_up: bool, cloud_up: bool = True) -> ClusterView:
    return ClusterView((NodeView("fn", Role.FN, True, 20, 1.0),
                        NodeView("ofn1", Role.OFN, ofn_up, 10, 0.3),
                        NodeView("cloud", Role.CLOUD, cloud_up, 50, 1.0)))


@pytest.mark.parametrize("ofn_up,cloud_up,lp_to", [(True, True, "ofn1"), (False, True, "cloud"),
                                                   (False, False, "fn")])
def test_lp_goes_to_the_ofn_then_the_cloud_and_hp_stays_on_the_fn(
        ofn_up: bool, cloud_up: bool, lp_to: str) -> None:
    table = make_policy(PolicySpec(name="prioritized_cloud")).routes(_view(ofn_up, cloud_up))
    assert table[TaskClass.HP] == {"fn": 1.0}
    assert table[TaskClass.LP] == {lp_to: 1.0}


def _mm1k_w(lam: float, mu: float, k: int) -> float:
    """M/M/1/K mean sojourn of an accepted request (Little's law on the truncated
    geometric distribution)."""
    p = [(lam / mu) ** n for n in range(k + 1)]
    z = sum(p)
    n_mean = sum(n * x for n, x in enumerate(p)) / z
    return n_mean / (lam * (1 - p[-1] / z))


def test_the_exact_chain_against_closed_forms() -> None:
    """HP alone at the FN is M/M/1/20; LP's network time is the cloud's 10 ms times the
    share of its answers the cloud gives (every LP arrival while the OFN is out of
    range, half the time, is answered there: 50 servers never fill)."""
    sc = load_scenario(SCENARIO)
    pred = exact_prediction(sc)
    assert pred.hp.W == pytest.approx(_mm1k_w(0.3, 1.0, 20), rel=1e-9)
    share = network_share(sc, pred)
    assert share.by_class is not None
    assert share.by_class["hp"] == 0.0
    answered_lp = 1.0 - pred.lp.blocking
    assert share.by_class["lp"] == pytest.approx(CLOUD_NET_MS * 0.5 / answered_lp, rel=1e-9)
    # the OFN (availability 1/2) is the only place LP is blocked
    assert 0.01 < pred.lp.blocking < 0.05


def test_the_simulator_agrees_with_the_exact_chain(tmp_path: Path) -> None:
    """200,000 requests, seed 1: per class the node W and the end-to-end W (the
    simulator samples each request's path; the chain adds each node's network time)
    within 3 % of exact, and exact inside the simulated 95 % interval."""
    sc = load_scenario(SCENARIO)
    pred = exact_prediction(sc)
    share = network_share(sc, pred)
    got = run_simulation(sc, tmp_path, requests=200_000, trace=False, compare=False)["measured"]
    for cls in ("hp", "lp"):
        w = float(pred.cls(cls).W)
        e2e = share.e2e(w, cls)
        assert e2e is not None
        m = got[cls]
        for meas, half, exact in ((m["W"], m["W_ci95"], w), (m["W_e2e"], m["W_e2e_ci95"], e2e)):
            assert abs(meas - exact) <= 0.03 * exact, (cls, meas, exact)
            assert abs(meas - exact) <= half, (cls, meas, half, exact)
    assert got["lp"]["blocking"] == pytest.approx(pred.lp.blocking, abs=0.003)


def test_predict_gives_w_e2e_per_class_and_says_why_no_optimum(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import predict as cli  # type: ignore[import-not-found]

    rc, out, err = call_main(cli.main, ["--scenario", str(SCENARIO), "--json"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert d["hp"]["W_e2e"] == pytest.approx(d["hp"]["W"])  # HP never leaves the FN
    assert d["lp"]["W_e2e"] - d["lp"]["W"] == pytest.approx(d["network"]["by_class"]["lp"])
    # 23,562 states: the optimum is the Lagrangian method's where the memory is free;
    # where it is not, the prediction is printed and the optimum is not, which the exit
    # status says
    monkeypatch.setattr(cli.bootstrap, "free_memory", lambda: 1e8)
    rc, out, err = call_main(cli.main, ["--scenario", str(SCENARIO), "--optimum", "all.W"],
                             capsys)
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "23,562 states" in err
    assert "W_e2e" in out and "optimum all.W: not computed: 23,562 states: the lagrangian " \
        "method needs about" in out
