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
    QOS_TARGETS,
    TWO_HIGHS,
    TWO_LAMBDA_H,
    TWO_LOADS,
    claim_rows,
    light_rows,
    two_server_peak,
    two_server_ratios,
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


def _two_server_sample() -> list[dict[str, object]]:
    """claim_rows' two-server inputs at H/L = 10 and the largest H/L only (fast)."""
    rows: list[dict[str, object]] = []
    for high in (10.0, max(TWO_HIGHS)):
        mean = moment(bounded_pareto(1.0, 1.0, high), 1)
        rows += [{"regime": "load", **two_server_ratios(high, load * 2.0 / mean),
                  "load": load} for load in TWO_LOADS]
        rows.append({"regime": "lambda_h", **two_server_ratios(high, TWO_LAMBDA_H / high)})
    return rows


def test_claim_rows_verdicts() -> None:
    result = {
        "alpha_csv": {"sita_e@1": 3.3, "random@1": 37.0, "least_work_left@1": 10.5,
                      "sita_e@1.9": 2.0, "least_work_left@1.9": 1.6},
        "two_server": _two_server_sample(),
        "two_server_peaks": [{"load": 0.1, "switch_high": 41.0, "peak": 4.8, "after": 1.7}],
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
    assert all(r["source"] for r in rows)
    # the ratio claims: one verdict per TAGS reading
    assert [(r["fixed"]["verdict"], r["response_optimal"]["verdict"]) for r in rows[1:5]] == [
        ("reproduced", "reproduced"), ("not", "reproduced"), ("not", "reproduced"),
        ("reproduced", "reproduced")]
    assert rows[0]["fixed"] is None and rows[5]["fixed"] is None
    assert "TAGS's cutoffs" in rows[2]["deciding"] and "TAGS's cutoffs" in rows[3]["deciding"]
    assert "MASCOTS 2020" in rows[2]["source"]
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


def test_fixed_cutoff_tags_ratio_stays_bounded_as_the_load_falls() -> None:
    """Two and four hosts, alpha = 1, TAGS at SITA-E's cutoffs: as load -> 0 the model's
    ratio tends to the light-traffic coefficient's and stays below 2 (the reviewer's 1.50
    at h = 2, 1.82 at h = 4 for H/L = 1e6)."""
    for h, high, limit in ((2, 1e10, 1.50), (4, 1e6, 1.82)):
        spec = bounded_pareto(1.0, 1.0, high)
        mus, names = [1.0] * h, [f"h{i}" for i in range(h)]
        cut = sita_e_cutoffs(spec, mus)
        ratios = []
        for load in (0.1, 0.01, 0.001, 1e-4, 1e-6):
            lam = load * h / moment(spec, 1)
            ratios.append(predict_tags(lam, spec, cut, mus, names).wait
                          / predict_sita(lam, spec, cut, mus, names).wait)
        assert max(ratios) < 2.0
        assert ratios[-1] == pytest.approx(light_ratio(spec, h, "fixed_approx"), rel=1e-3)
        assert ratios[-1] == pytest.approx(limit, abs=0.01)


def test_two_server_claim_response_optimal_unbounded_only_without_kills() -> None:
    """lambda H = 0.5 (MASCOTS 2020's lambda H < 1): the response-optimal TAGS
    never kills and its ratio grows about like sqrt(H/L) / 2; the fixed one tends to 1.5.
    At a fixed load the response-optimal ratio peaks where TAGS starts killing, and the
    peak grows as the load falls."""
    lo = two_server_ratios(1e4, 0.5 / 1e4)
    hi = two_server_ratios(1e8, 0.5 / 1e8)
    assert not lo["kills"] and not hi["kills"]
    assert hi["response_optimal"] / lo["response_optimal"] == pytest.approx(100.0, rel=0.05)
    assert hi["fixed"] == pytest.approx(1.5, abs=0.01) and lo["fixed"] < 1.52
    p1, p2 = two_server_peak(0.1, steps=12), two_server_peak(0.01, steps=12)
    assert 4.0 < p1["peak"] < 6.0 and p2["peak"] > 2.0 * p1["peak"]
    assert p1["after"] < 2.0 and p2["after"] < 2.0
    assert p2["switch_high"] > p1["switch_high"]


def test_qos_design_meets_the_targets_in_the_exact_model() -> None:
    """The SITA design's cutoffs, put into the whole system's exact model
    (`predict_sita`), give every size class a mean within its target: each class's mean
    over its hosts, weighted by the tasks each completes."""
    spec = bounded_pareto(1.5, 1.0, 1000.0)
    for classes in QOS_TARGETS.values():
        d = qos_design("sita", 0.3, spec, classes)
        h = len(d.hosts)
        pred = predict_sita(0.3, spec, d.cutoffs, [1.0] * h, [f"h{i}" for i in range(h)])
        edges = [-1.0, *d.cutoffs, 1000.0]
        for ci, cls in enumerate(classes):
            mine = [i for i, host in enumerate(d.hosts) if host.size_class == ci]
            share = [partial_moment(spec, 0, edges[i], edges[i + 1]) for i in mine]
            key = "slowdown" if cls.metric == "slowdown" else "W"
            mean = sum(w * getattr(pred.hosts[i], key) for w, i in zip(share, mine,
                                                                        strict=True)) / sum(share)
            assert mean <= cls.target * (1 + 1e-6), (cls, mean)
    # a TAGS design, checked against `predict_tags` at its cutoffs: every host stable
    t = qos_design("tags", 0.3, spec, QOS_TARGETS["loose"])
    h = len(t.hosts)
    pt = predict_tags(0.3, spec, t.cutoffs, [1.0] * h, [f"h{i}" for i in range(h)])
    assert all(host.rho < 1.0 for host in pt.hosts)


def test_cli_bad_argument_is_one_line(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    import reproduce_seed002b as cli  # type: ignore[import-not-found]

    for argv in (["--claims-only", "--claims-requests", "0"],
                 ["--claims-only", "--claims-replications", "x"],
                 ["--claims-only", "--nope"],
                 ["--claims-only", "--from-json", str(tmp_path / "missing.json")]):
        rc, out, err = call_main(cli.main, argv, capsys)
        assert rc == 2 and out == "", argv
        assert len(err.strip().splitlines()) == 1 and "reproduce_seed002b.py" in err, err
