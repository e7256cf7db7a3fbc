"""Seed 002b's claims: light-traffic coefficients, the QoS design and the claims table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import call_main

from fogsdn.measure.seed002b_claims import (
    I_HIGHS,
    I_HOSTS,
    II_ALPHAS,
    II_HIGHS,
    II_HOSTS,
    claim_rows,
    light_rows,
    two_server_rows,
)
from fogsdn.measure.size_compare import SizeStats, bounded_pareto, size_scenario
from fogsdn.models.size_assignment import (
    SizeModelError,
    moment,
    partial_moment,
    predict_sita,
    predict_tags,
    sita_e_cutoffs,
    tags_cutoffs,
)
from fogsdn.models.size_light import (
    SizeClass,
    alpha1_fixed_limit,
    light_ratio,
    light_sita,
    light_tags,
    light_tags_response_optimal,
    qos_design,
)
from fogsdn.sim.engine import simulate

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("alpha", "hosts"), [(1.0, 2), (1.5, 4), (0.5, 3)])
def test_light_traffic_coefficients_are_the_models_limits(alpha: float, hosts: int) -> None:
    spec = bounded_pareto(alpha, 1.0, 1000.0)
    mus, names = [1.0] * hosts, [f"h{i}" for i in range(hosts)]
    cut = sita_e_cutoffs(spec, mus)
    lam = 1e-7
    assert light_sita(spec, cut, mus) == pytest.approx(
        predict_sita(lam, spec, cut, mus, names).wait / lam, rel=1e-4)
    approx = light_tags(spec, cut, mus, exact=False)
    assert approx == pytest.approx(predict_tags(lam, spec, cut, mus, names).wait / lam,
                                   rel=1e-4)
    exact = light_tags(spec, cut, mus, exact=True)
    assert 0.0 < exact < approx  # the lead built at host 1 shortens every later wait
    # one host: both are M/G/1's E[X^2] / 2
    assert light_tags(spec, (), [1.0], exact=True) == pytest.approx(moment(spec, 2) / 2)
    assert light_tags_response_optimal(spec, mus) == pytest.approx(moment(spec, 2) / 2)


def test_alpha1_closed_form_limit_of_the_fixed_ratio() -> None:
    """alpha = 1, TAGS at SITA-E's cutoffs: (2h - 1) / h as H/L -> inf (1.5 at h = 2,
    about 1.82 at h = 4 for H/L = 1e6: the reviewer's numbers)."""
    for h in (2, 3, 4):
        far = bounded_pareto(1.0, 1.0, 1e14)
        for reading in ("fixed_approx", "fixed_exact"):
            assert light_ratio(far, h, reading) == pytest.approx(alpha1_fixed_limit(h),
                                                                 rel=0.02)
    assert light_ratio(bounded_pareto(1.0, 1.0, 1e10), 2, "fixed_approx") == pytest.approx(
        1.5, abs=2e-3)
    assert light_ratio(bounded_pareto(1.0, 1.0, 1e6), 4, "fixed_approx") == pytest.approx(
        1.82, abs=0.01)
    # hand-computed for h = 2, cutoff s = sqrt(r): TAGS 2s - 1 + ... over SITA-E
    r = 1e4
    s = math.sqrt(r)
    c = 1.0 / (1.0 - 1.0 / r)
    sita = (c * (1 - 1 / s)) * c * (s - 1) + (c * (1 / s - 1 / r)) * c * (r - s)
    tags = c * (s - 1) + s * s * c * (1 / s - 1 / r) + c * (1 / s - 1 / r) * c * (r - s)
    assert light_ratio(bounded_pareto(1.0, 1.0, r), 2, "fixed_approx") == pytest.approx(
        tags / sita, rel=1e-9)


def test_response_optimal_tags_stops_killing_in_light_traffic() -> None:
    spec = bounded_pareto(1.0, 1.0, 1000.0)
    for h in (2, 4):
        lam = 0.001 * h / moment(spec, 1)
        assert min(tags_cutoffs(lam, spec, [1.0] * h)) == pytest.approx(1000.0, rel=1e-6)
    # so its ratio grows like (H/L)^(1 - 1/h): unbounded; the fixed one stays below 2
    r1 = light_ratio(bounded_pareto(1.0, 1.0, 1e4), 2, "response_optimal")
    r2 = light_ratio(bounded_pareto(1.0, 1.0, 1e8), 2, "response_optimal")
    assert r2 / r1 == pytest.approx(100.0, rel=0.05)


def test_light_ratio_grows_with_hosts_for_alpha_not_one() -> None:
    for alpha in (0.5, 1.5):
        spec = bounded_pareto(alpha, 1.0, 1e4)
        for reading in ("fixed_approx", "fixed_exact", "response_optimal"):
            vals = [light_ratio(spec, h, reading) for h in (4, 16, 64)]
            assert vals[0] < vals[1] < vals[2] and vals[2] > 5 * vals[0]
        # the exact coefficient grows about linearly, the approximation about quadratically
        assert light_ratio(spec, 64, "fixed_exact") < 0.2 * light_ratio(spec, 64,
                                                                         "fixed_approx")
    with pytest.raises(SizeModelError, match="unknown reading"):
        light_ratio(bounded_pareto(1.5, 1.0, 100.0), 2, "nope")


def test_simulated_light_traffic_tags_follows_the_exact_coefficient() -> None:
    """8 hosts at load 0.005: the simulated TAGS wait / lambda is near the exact
    light-traffic coefficient, well below the per-host approximation's."""
    spec = bounded_pareto(1.0, 1.0, 100.0)
    h = 8
    mus = [1.0] * h
    cut = sita_e_cutoffs(spec, mus)
    sc = size_scenario("tags", h, 0.005, spec, seed=3,
                       params={"cutoffs": ",".join(f"{c:.12g}" for c in cut)})
    stats = SizeStats(sc)
    simulate(sc, stats, requests=150_000, replication=0)
    lam = sc.workload.lambda_lp
    measured = stats.summary()["overall"]["wait"] / lam
    exact = light_tags(spec, cut, mus, exact=True)
    approx = light_tags(spec, cut, mus, exact=False)
    assert approx > 1.4 * exact
    assert 0.85 * exact < measured < 1.25 * exact


def test_qos_design_meets_every_target_and_is_greedy() -> None:
    spec = bounded_pareto(1.5, 1.0, 1000.0)
    classes = (SizeClass(10.0, "slowdown", 2.0), SizeClass(100.0, "slowdown", 3.0),
               SizeClass(1000.0, "slowdown", 4.0))
    d = qos_design("sita", 0.3, spec, classes)
    assert all(h.value <= classes[h.size_class].target * (1 + 1e-9) for h in d.hosts)
    assert [h.high for h in d.hosts][-1] == 1000.0 and 10.0 in d.cutoffs and 100.0 in d.cutoffs
    assert all(a < b for a, b in zip(d.cutoffs, d.cutoffs[1:], strict=False))
    # host 1 fills its budget: a slightly wider interval would miss the target
    first = d.hosts[0]
    assert first.value == pytest.approx(2.0, rel=1e-6)
    wider = predict_sita(0.3 * partial_moment(spec, 0, 0.0, first.high * 1.01),
                         bounded_pareto(1.5, 1.0, first.high * 1.01), (), [1.0], ["h"])
    assert wider.slowdown > 2.0
    # the same targets: TAGS has no design (killed work doubles a task's slowdown just
    # above a cutoff); looser ones it meets
    with pytest.raises(SizeModelError, match="cannot meet"):
        qos_design("tags", 0.3, spec, classes)
    loose = (SizeClass(10.0, "W", 15.0), SizeClass(1000.0, "slowdown", 3.0))
    t = qos_design("tags", 0.3, spec, loose)
    assert all(h.value <= loose[h.size_class].target * (1 + 1e-9) for h in t.hosts)
    with pytest.raises(SizeModelError, match="last class"):
        qos_design("sita", 0.3, spec, (SizeClass(10.0, "W", 15.0),))
    with pytest.raises(SizeModelError, match="not sita or tags"):
        qos_design("random", 0.3, spec, loose)


def test_claim_rows_verdicts() -> None:
    result = {
        "alpha_csv": {"sita_e@1": 3.3, "random@1": 37.0, "least_work_left@1": 10.5,
                      "sita_e@1.9": 2.0, "least_work_left@1.9": 1.6},
        "two_server": two_server_rows(),
        "light_i": light_rows(1.0, I_HIGHS, I_HOSTS),
        "light_ii": [r for a in II_ALPHAS for r in light_rows(a, II_HIGHS, II_HOSTS)],
        "qos": [{"targets": "tight", "policy": "sita", "meets_sim": True},
                {"targets": "tight", "policy": "tags", "none": "cannot meet"},
                {"targets": "loose", "policy": "tags", "meets_sim": True}],
    }
    rows = claim_rows(result)
    assert len(rows) == 6
    assert [r["verdict"] for r in rows] == ["reproduced", "reproduced", "partly", "partly",
                                            "reproduced", "partly"]
    assert all(r["deciding"] for r in rows if r["verdict"] != "reproduced")
    assert "TAGS's cutoffs" in rows[3]["deciding"]
    result["alpha_csv"] = {}
    assert claim_rows(result)[0]["verdict"] == "not computed"


def test_claims_table_in_the_docs_is_the_committed_run(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    import reproduce_seed002b as cli  # type: ignore[import-not-found]

    run = ROOT / "docs/figures/seed002b-claims.json"
    doc = tmp_path / "doc.md"
    doc.write_text(f"head\n{cli.BEGIN}\nold\n{cli.END}\ntail\n")
    rc, _, err = call_main(cli.main, ["--claims-only", "--from-json", str(run), "--json",
                                      str(tmp_path / "j"), "--markdown", str(tmp_path / "m"),
                                      "--doc", str(doc), "--figures", str(tmp_path)], capsys)
    assert rc == 0, err
    table = (tmp_path / "m").read_text()
    assert table == (ROOT / "docs/figures/seed002b-claims.md").read_text()
    assert table in (ROOT / "docs/size_based.md").read_text()
    assert all((tmp_path / f"seed002b_{n}.png").stat().st_size > 0
               for n in ("light_h", "light_alpha", "qos"))
    rows = json.loads(run.read_text())["claims"]
    assert len(rows) == 6 and not any(r["verdict"] == "not computed" for r in rows)
