"""Seed 000's chain as printed (fogsdn/exact/printed_chain.py): closed forms, each documented
reading, the claims' rule, and predict.py --printed."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from conftest import call_main

from fogsdn.core.scenario import load_scenario, parse_scenario
from fogsdn.exact.ctmc import ModelParams, predict
from fogsdn.exact.printed_chain import (
    Reading,
    balance_rows,
    figures,
    printed_figures,
    states,
    stationary,
    transitions,
)
from fogsdn.measure.seed000_claims import (
    CLAIMS,
    GAP_RISE_TOLERANCE_PCT,
    LP_SWEEP,
    POINTS,
    at,
    discipline_decides,
    evaluate,
    gap_series,
    largest_rise,
    lookup,
    needed,
    reads_prioritized,
    rise_pct,
    verdict,
)

ROOT = Path(__file__).resolve().parents[1]
FIG4A = ROOT / "scenarios" / "seed000_fig4a.yaml"


def _p(scheme: str, lam_hp: float = 0.3, lam_lp: float = 0.5, mu_of: float = 0.3,
       cap_f: int = 20, cap_o: int = 10, eta: float = 1 / 3, xi: float = 1 / 3) -> ModelParams:
    return ModelParams(scheme=scheme, lam_hp=lam_hp, lam_lp=lam_lp, mu_f=1.0,  # type: ignore[arg-type]
                       mu_of=mu_of, cap_f=cap_f, cap_o=cap_o, eta=eta, xi=xi)


def mm1c_mean(rho: float, c: int) -> float:
    """Mean number in M/M/1/C, written out (rho != 1)."""
    return rho / (1 - rho) - (c + 1) * rho ** (c + 1) / (1 - rho ** (c + 1))


# -- closed forms ------------------------------------------------------------------------

@pytest.mark.parametrize("lam_lp", [0.1, 0.5, 0.9])
def test_basic_is_mm1c_and_its_w_is_little_without_blocking(lam_lp: float) -> None:
    f = figures(_p("basic", lam_lp=lam_lp, cap_f=7))
    lam = 0.3 + lam_lp
    assert f.states == 8
    assert f.W_hp == pytest.approx(mm1c_mean(lam, 7) / lam, rel=1e-12)  # eq. 7, lambda_e = lambda
    verbatim = figures(_p("basic", lam_lp=lam_lp, cap_f=7), Reading(eq5_rates="verbatim"))
    assert verbatim.W_hp == pytest.approx(mm1c_mean(lam, 7) / 0.3, rel=1e-12)


@pytest.mark.parametrize("mu_of", [0.1, 0.3, 2.0])
def test_proposed_hp_with_the_ofn_never_leaving_is_mm1c_at_lambda_hp(mu_of: float) -> None:
    # eta = 0: status U is never entered; the OFN's excursions leave and re-enter (A,F,0)
    # only, so the FN's part is M/M/1/C at lambda_HP whatever mu_OF is
    f = figures(_p("proposed", eta=0.0, mu_of=mu_of, cap_f=5, cap_o=3))
    assert f.W_hp == pytest.approx(mm1c_mean(0.3, 5) / 0.3, rel=1e-12)


@pytest.mark.parametrize("eta, xi", [(1 / 3, 1 / 3), (2 / 3, 1 / 3)])
def test_proposed_hp_is_the_fn_mean_over_its_offered_rate(eta: float, xi: float) -> None:
    # the printed FN part is our exact FN chain (drain); eq. 5 is its offered rate
    ours = predict(_p("proposed", eta=eta, xi=xi))
    p_a = xi / (eta + xi)
    expected = ours.mean_fn / (0.3 * p_a + 0.8 * (1 - p_a))
    for mu_of in (0.1, 0.3, 2.0):
        assert figures(_p("proposed", eta=eta, xi=xi, mu_of=mu_of)).W_hp == pytest.approx(
            expected, rel=1e-9)


def test_fig4a_reductions_are_48_and_7_percent_for_any_mu_of() -> None:
    for mu_of in (0.1, 0.3, 1.0):
        hp = figures(_p("proposed", mu_of=mu_of)).W_hp
        basic = figures(_p("basic", mu_of=mu_of)).W
        nodiff = figures(_p("nodiff", mu_of=mu_of)).W
        assert 100 * (1 - hp / basic) == pytest.approx(47.87, abs=0.01)  # the paper: 62
        assert 100 * (1 - hp / nodiff) == pytest.approx(7.34, abs=0.01)  # the paper: 49


# -- each reading of the text ------------------------------------------------------------

def test_state_space_is_the_papers() -> None:  # item 1
    s = states(_p("proposed", cap_f=4, cap_o=3))
    assert len(s) == 2 * 5 + 3
    assert ("A", "O", 0) not in s and not any(x[:2] == ("U", "O") for x in s)
    assert len(states(_p("basic", cap_f=4))) == 5


def test_boundaries_misprint_and_ofn_return() -> None:  # items 2-5
    p = _p("proposed", cap_f=4, cap_o=3, mu_of=0.3, eta=0.25, xi=0.5)
    t = transitions(p)
    assert (("A", "F", 4), ("A", "F", 5)) not in t  # no state above C_F
    assert (("A", "F", 1), ("A", "O", 2)) not in t  # eq. 1's j = 1 line: a misprint
    assert t[(("A", "O", 1), ("A", "F", 0))] == 0.3  # once, not twice
    assert not any(b == ("A", "O", 0) for _a, b in t)
    assert t[(("A", "F", 2), ("U", "F", 2))] == 0.25  # eta is the A -> U rate
    assert not any(a[:2] == ("A", "O") and b[0] == "U" for a, b in t)  # never leaves busy
    assert t[(("A", "F", 0), ("A", "O", 1))] == 0.5  # lambda_LP
    nd = transitions(_p("nodiff", cap_f=4, cap_o=3))
    assert nd[(("A", "F", 1), ("A", "F", 2))] == pytest.approx(0.4)  # alpha * lambda
    assert nd[(("A", "F", 0), ("A", "O", 1))] == pytest.approx(0.4)  # beta * lambda


def test_printed_balance_equations_are_not_eq1s_and_define_no_distribution() -> None:
    p = _p("proposed")
    rows = balance_rows(p)
    assert len(rows) == len(states(p)) - 1  # no equation for (A,O,C_O)
    first, o1 = rows[0], rows[2 * 21]
    assert first[("A", "F", 0)] == pytest.approx(0.8)  # no eta in the outflow
    assert o1[("U", "F", 0)] == pytest.approx(-0.5)  # eq. 2 (7): fed from (U,F,0)
    for scheme in ("proposed", "nodiff"):
        st = stationary(_p(scheme), "balance")
        assert st.residual < 1e-12  # solved exactly ...
        assert st.min_prob < -1e-3  # ... by a vector with negative entries
        f = figures(_p(scheme), Reading(stationary="balance"))
        assert not f.is_distribution
    assert figures(_p("proposed")).is_distribution


def test_eq4_reads_u_o_as_the_fn_in_u() -> None:  # item 7
    p = _p("proposed")
    st = stationary(p)
    n_uf = sum(s[2] * st.pi[k] for k, s in enumerate(states(p)) if s[:2] == ("U", "F"))
    fn, zero = figures(p, Reading(eq4_u="fn")), figures(p, Reading(eq4_u="zero"))
    assert fn.N_lp - zero.N_lp == pytest.approx(n_uf, rel=1e-12)
    assert fn.N_hp == zero.N_hp


def test_eq5_rates_node_or_verbatim() -> None:  # item 8
    p = _p("nodiff")
    st = stationary(p)
    mass = {k: sum(st.pi[i] for i, s in enumerate(states(p)) if s[:2] == k)
            for k in (("A", "F"), ("U", "F"), ("A", "O"))}
    node, verbatim = figures(p), figures(p, Reading(eq5_rates="verbatim"))
    assert node.lam_e_hp == pytest.approx(0.4 * mass[("A", "F")] + 0.8 * mass[("U", "F")])
    assert verbatim.lam_e_hp == pytest.approx(0.3 * mass[("A", "F")] + 0.8 * mass[("U", "F")])
    assert node.lam_e_lp == pytest.approx(0.4 * mass[("A", "O")] + 0.8 * mass[("U", "F")])
    prop = _p("proposed")
    assert figures(prop).W_hp == figures(prop, Reading(eq5_rates="verbatim")).W_hp


# -- the claims' rule ----------------------------------------------------------------------

def test_claims_rule_and_points() -> None:
    c49, c_order = CLAIMS[0], CLAIMS[2]
    assert c49.paper == 49.0 and c_order.paper is None
    assert verdict(c49, 50.2) == "reproduced"
    assert verdict(c49, 30.0) == "same order"
    assert verdict(c49, -5.0) == "not" and verdict(c49, math.nan) == "n/a"
    assert verdict(c_order, 0.1) == "reproduced" and verdict(c_order, -0.1) == "not"
    table = {k: {"W_hp": 2.0, "W_lp": 5.0} for k in needed()}
    table[("4a@0.5", "nodiff")] = {"W_hp": 4.0}
    assert evaluate(c49, lookup(table)) == pytest.approx(50.0)
    assert math.isnan(evaluate(CLAIMS[-1], lookup(table)))  # no outage: n/a
    assert {p for p, _s in needed()} == set(POINTS)
    assert POINTS["5b@0.3"][1] == {"workload.lambda_hp": 0.15}  # ratio 0.3 of lambda_LP 0.5


# -- predict.py --printed --------------------------------------------------------------------

def test_printed_from_a_scenario_and_outside_it(tmp_path: Path) -> None:
    sc = load_scenario(FIG4A)
    assert printed_figures(sc).W_hp == pytest.approx(figures(_p("proposed")).W_hp)
    d = sc.to_dict()
    d["nodes"].append({"name": "ofn2", "role": "ofn", "mu": 0.3, "capacity": 10})
    from fogsdn.exact.printed_chain import OutsidePrintedModel

    with pytest.raises(OutsidePrintedModel, match="one OFN"):
        printed_figures(parse_scenario(d))
    with pytest.raises(OutsidePrintedModel, match="single"):
        printed_figures(sc.with_overrides({"nodes.fn.servers": "multi"}))


def test_cli_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import predict as cli  # type: ignore[import-not-found]

    rc, out, err = call_main(cli.main, ["--scenario", str(FIG4A), "--printed"], capsys)
    assert rc == 0, err
    assert "the seed's chain as printed" in out and "ours (exact)" in out
    hp = next(line for line in out.splitlines() if line.startswith("HP")).split()
    assert float(hp[1]) == pytest.approx(2.36314, rel=1e-5)
    assert float(hp[2]) == pytest.approx(2.47899, rel=1e-5)
    rc, out, _ = call_main(cli.main, ["--scenario", str(FIG4A), "--printed", "--json"], capsys)
    d = json.loads(out)
    assert d["printed"]["label"] == "the seed's chain as printed"
    assert d["printed"]["hp"]["W"] == pytest.approx(2.47899, rel=1e-5)
    outside = tmp_path / "deterministic.yaml"
    outside.write_text(load_scenario(FIG4A).with_overrides(
        {"workload.size.distribution": "deterministic"}).to_yaml())
    for argv in (["--scenario", str(ROOT / "scenarios/seed000_drawn.yaml"), "--printed"],
                 ["--scenario", str(outside), "--printed"],
                 ["--printed"]):
        rc, _, err = call_main(cli.main, argv, capsys)
        assert rc == 2
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_claims_table_in_the_docs_is_the_committed_runs(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import reproduce_seed000_claims as claims  # type: ignore[import-not-found]

    run = ROOT / "docs/figures/seed000-claims.json"
    doc = tmp_path / "doc.md"
    doc.write_text(f"head\n{claims.BEGIN}\nold\n{claims.END}\ntail\n")
    rc, out, _ = call_main(claims.main, ["--from-json", str(run), "--json", str(tmp_path / "j"),
                                         "--markdown", str(tmp_path / "m"), "--doc", str(doc)],
                           capsys)
    assert rc == 0
    table = (tmp_path / "m").read_text()
    # the claims, then Fig. 4b's gap series (blank, caption, blank, header, rule, rows)
    assert len(table.splitlines()) == 2 + len(CLAIMS) + 5 + len(LP_SWEEP)
    assert "old" not in doc.read_text()
    assert doc.read_text() == f"head\n{claims.BEGIN}\n{table}{claims.END}\ntail\n"
    assert table in (ROOT / "docs/reproduction.md").read_text()
    assert table == (ROOT / "docs/figures/seed000-claims.md").read_text()


def test_claims_run_writes_every_claim_with_its_simulated_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import reproduce_seed000_claims as cli  # type: ignore[import-not-found]

    out = tmp_path / "claims.json"
    rc, _, err = call_main(cli.main, ["--replications", "2", "--requests", "1000",
                                      "--json", str(out), "--markdown", str(tmp_path / "c.md")],
                           capsys)
    assert rc == 0, err
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(CLAIMS)
    for row in rows:
        assert set(row["simulated"]) == {"mean", "lo", "hi", "n"}
        assert row["simulated"]["n"] in (0, 2)


def _gap_table(gap_4b: list[float]) -> dict[tuple[str, str], dict[str, float]]:
    """Every needed point at W 2/5, NoDiff's HP in Fig. 4b raised by `gap_4b` along the
    sweep (so the NoDiff - proposed gap is that series)."""
    table = {k: {"W_hp": 2.0, "W_lp": 5.0} for k in needed()}
    for x, gap in zip(LP_SWEEP, gap_4b, strict=True):
        table[(at("4b", x), "nodiff")] = {"W_hp": 2.0 + gap}
    return table


def test_fig4b_gap_rows_and_which_rows_take_the_status_u_round_robin() -> None:
    comparative, literal = (c for c in CLAIMS if "gap" in c.text and c.figure == "4b")
    # 4a's gap grows 0.1 -> 1 by 3 ms, 4b's by 1 ms: grows less (comparative), still grows
    table = _gap_table([0.0] * 9 + [1.0])
    table[("4a@1", "nodiff")] = {"W_hp": 5.0}
    assert evaluate(comparative, lookup(table)) == pytest.approx(2.0)
    assert verdict(comparative, 2.0) == "reproduced"
    assert evaluate(literal, lookup(table)) == pytest.approx(100.0)  # 1 ms of at most 1 ms
    assert verdict(literal, 100.0) == "not"
    # every row but NoDiff - Basic reads the proposed scheme
    assert [c.text for c in CLAIMS if not reads_prioritized(c)] == [
        "NoDiff above Basic at low load: NoDiff - Basic at lambda_LP = 0.1"]


def test_largest_rise_against_every_pair() -> None:
    assert largest_rise([3.0, 1.0, 2.0]) == 1.0  # the rise after the low, not from the start
    assert largest_rise([1.0, 3.0, 0.0, 2.5]) == 2.5  # 0 -> 2.5 beats 1 -> 3
    assert largest_rise([3.0, 2.0, 0.5]) == -1.0  # falls at every step: its smallest fall
    assert math.isnan(largest_rise([1.0, math.nan, 2.0]))
    with pytest.raises(ValueError):
        largest_rise([1.0])
    rng = random.Random(38)
    for _ in range(200):
        xs = [rng.uniform(-5, 5) for _ in range(rng.randint(2, 12))]
        brute = max(xs[j] - xs[i] for i in range(len(xs)) for j in range(i + 1, len(xs)))
        assert largest_rise(xs) == pytest.approx(brute, abs=1e-12)
    assert rise_pct([1.0, 2.0]) == pytest.approx(50.0)
    assert rise_pct([-1.0, 1.0]) == pytest.approx(200.0)  # a sign change rises by 2 maxima
    with pytest.raises(ZeroDivisionError):
        rise_pct([0.0, 0.0])


def test_the_gap_does_not_increase_within_its_stated_tolerance() -> None:
    (literal,) = (c for c in CLAIMS if "does not increase" in c.text)
    assert literal.at_most == GAP_RISE_TOLERANCE_PCT == 10.0
    assert literal.paper_text() == "<= 10 %"
    assert {p for p, s in literal.needs} == {at("4b", x) for x in LP_SWEEP}
    flat = [3.0, 2.9, 3.0, 3.1, 3.2, 3.1, 3.0, 3.05, 3.1, 3.2]  # rises 0.3 of 3.2: 9.4 %
    rising = [3.0, 2.9, 3.0, 3.1, 3.2, 3.1, 3.0, 3.05, 3.1, 3.3]  # 0.4 of 3.3: 12.1 %
    falling = [4.0 - 0.3 * i for i in range(10)]
    got = {name: evaluate(literal, lookup(_gap_table(gaps)))
           for name, gaps in (("flat", flat), ("rising", rising), ("falling", falling))}
    assert got["flat"] == pytest.approx(100 * 0.3 / 3.2)
    assert got["rising"] == pytest.approx(100 * 0.4 / 3.3)
    assert got["falling"] == pytest.approx(100 * -0.3 / 4.0)
    assert [verdict(literal, got[k]) for k in ("flat", "rising", "falling")] == [
        "reproduced", "not", "reproduced"]
    assert verdict(literal, 10.0) == "reproduced" and verdict(literal, 10.01) == "not"
    assert math.isnan(evaluate(literal, lookup(_gap_table([0.0] * 10))))  # no gap at all
    assert gap_series(lookup(_gap_table(flat)), "4b") == pytest.approx(flat)


def test_the_fn_discipline_decides_a_row_when_its_verdict_changes() -> None:
    c49, order, literal = CLAIMS[0], CLAIMS[2], next(c for c in CLAIMS if c.at_most)
    assert discipline_decides(c49, 50.2, 51.9) is False  # reproduced both ways
    assert discipline_decides(c49, 50.2, 60.0) is True  # reproduced -> same order
    assert discipline_decides(order, 0.65, -0.17) is True  # the ordering flips
    assert discipline_decides(order, 0.65, None) is None  # no proposed scheme read
    assert discipline_decides(order, 0.65, math.nan) is None
    assert discipline_decides(literal, 85.9, 95.1) is False  # both far above 10 %
    assert discipline_decides(literal, 9.0, 11.0) is True


def test_committed_claims_run_is_consistent_with_its_rules() -> None:
    run = json.loads((ROOT / "docs/figures/seed000-claims.json").read_text())
    rows = {r["claim"]: r for r in run["rows"]}
    assert list(rows) == [c.text for c in CLAIMS]
    for c in CLAIMS:
        r = rows[c.text]
        assert r["verdict_exact"] == verdict(c, r["exact"])
        rr = r["exact_round_robin"]
        assert (rr is None) == (not reads_prioritized(c))
        assert r["discipline_decides"] == discipline_decides(c, r["exact"], rr)
    gap = run["gap_4b"]
    assert gap["lambda_lp"] == list(LP_SWEEP)
    (literal,) = (c for c in CLAIMS if c.at_most is not None)
    assert rows[literal.text]["exact"] == pytest.approx(rise_pct(gap["exact"]))
    assert rows[literal.text]["exact_round_robin"] == pytest.approx(
        rise_pct(gap["exact_round_robin"]))
