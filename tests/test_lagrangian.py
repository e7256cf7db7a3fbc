"""The Lagrangian method (fogsdn/exact/lagrangian.py) against the LP it replaces on large
chains: the same optimum at several sizes, a written table the exact chain confirms,
exact solves on every route (LU, Woodbury update, BiCGSTAB), and the memory refusal."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import ROOT, call_main, scenario_dict

from fogsdn.core.scenario import Scenario, load_scenario, parse_scenario
from fogsdn.exact import lagrangian
from fogsdn.exact.cmdp_program import Program
from fogsdn.exact.objective import parse_constraint, parse_expr
from fogsdn.exact.optimal_policy import (
    AUTO_LP_MAX_STATES,
    OptimizeError,
    optimize,
    pick_method,
    prediction_figures,
    table_policy_class,
)
from fogsdn.exact.policy_chain import predict_policy
from fogsdn.exact.policy_chain_model import policy_model
from fogsdn.policies import make_policy


def _nodes(cf: int, co: int, ofns: int) -> list[dict[str, Any]]:
    return [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": cf}] + [
        {"name": f"ofn{i + 1}", "role": "ofn", "mu": 0.3, "capacity": co} for i in range(ofns)]


def _default(**over: Any) -> Scenario:
    """scenarios/default.yaml (462 states) with `over` replacing its sections."""
    d = load_scenario(ROOT / "scenarios" / "default.yaml").to_dict()
    d.update(over)
    return parse_scenario(d)


# (scenario, states): capacities and OFNs are what change the count
SIZES = {
    "48": lambda: parse_scenario(scenario_dict(nodes=_nodes(5, 3, 1))),
    "80-drop": lambda: _default(nodes=_nodes(4, 2, 2),
                                 churn={"eta": 1 / 3, "xi": 1 / 3, "leave": "drop"}),
    "462-default": lambda: _default(),
    "690": lambda: _default(nodes=_nodes(22, 14, 1)),
}
CASES = [
    ("all.W", ()),  # a ratio, Dinkelbach
    ("all.W", ("hp.W<=2.4",)),  # a ratio under a binding ratio bound: randomises
    ("all.N + 0.01*power", ()),  # linear: plain policy iteration
    ("all.N + 0.01*power", ("hp.W<=2.4",)),
    ("lp.W", ("hp.N<=0.7",)),  # a ratio under a linear bound
]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


@pytest.mark.parametrize("objective,constraints", CASES)
@pytest.mark.parametrize("size", list(SIZES))
def test_lagrangian_optimum_equals_the_lp(size: str, objective: str,
                                          constraints: tuple[str, ...]) -> None:
    sc = SIZES[size]()
    expr, cons = parse_expr(objective), tuple(parse_constraint(c) for c in constraints)
    lp = optimize(sc, expr, cons, method="lp")
    lg = optimize(sc, expr, cons, method="lagrangian")
    assert lp.method == "lp" and lg.method == "lagrangian"
    assert lg.n_states == lp.n_states == int(size.split("-")[0])
    assert _rel(lg.value, lp.value) < 1e-6, (lg.value, lp.value)
    assert lg.gap <= 1e-9 * abs(lg.value) and lg.evaluations >= 1
    for con in cons:
        assert con.holds(lg.figures[str(con.expr.terms[0][1])], rtol=1e-7)


def test_two_binding_constraints_agree_with_the_lp_and_randomise_twice() -> None:
    sc = _default()
    cons = (parse_constraint("hp.W<=2.4"), parse_constraint("all.blocking<=3e-4"))
    lp = optimize(sc, parse_expr("all.W"), cons, method="lp")
    lg = optimize(sc, parse_expr("all.W"), cons, method="lagrangian")
    assert _rel(lg.value, lp.value) < 1e-6
    assert math.isclose(lg.figures["hp.W"], 2.4, rel_tol=1e-7)
    assert math.isclose(lg.figures["all.blocking"], 3e-4, rel_tol=1e-6)
    assert lg.randomised <= 2


@pytest.mark.parametrize("objective", ["all.W", "lp.blocking"])
def test_the_written_table_gives_the_optimum_on_the_exact_chain(objective: str) -> None:
    """The default scenario under a binding hp.W bound: the table randomises in one
    state (the walk between the two policies), meets the bound with equality, and the
    chain built from the table gives every figure the method reported."""
    sc = _default()
    con = parse_constraint("hp.W<=2.4")
    opt = optimize(sc, parse_expr(objective), (con,), method="lagrangian")
    assert opt.randomised == 1
    assert math.isclose(opt.figures["hp.W"], 2.4, rel_tol=1e-9)
    hp, lp, mixed = opt.table()
    assert len(mixed) == 1 and len(hp) == len(lp) == opt.n_states
    exact = prediction_figures(sc, predict_policy(sc, table_policy_class(opt)()))
    for key, v in opt.figures.items():
        assert math.isclose(exact[key], v, rel_tol=1e-7, abs_tol=1e-12), (key, exact[key], v)


def _evaluator(sc: Scenario) -> tuple[Program, lagrangian.Evaluator]:
    prog = Program(sc, policy_model(sc, make_policy(sc.policy)), False)
    return prog, lagrangian.Evaluator(prog)


def _costs(prog: Program) -> np.ndarray:
    num, den = prog.expr_rows(parse_expr("all.W"))
    assert den is not None
    return num - 3.0 * den


def test_woodbury_and_bicgstab_solves_equal_a_fresh_lu() -> None:
    sc = _default()
    prog, ev = _evaluator(sc)
    w = _costs(prog)
    d0 = lagrangian.initial_policy(prog)
    ev.evaluate(d0, w)  # an LU of d0
    full = lagrangian.improve(prog, w, ev.evaluate(d0, w)[2], d0)  # type: ignore[arg-type]
    rows = np.flatnonzero((full != d0).any(axis=0))[:5]  # 5 states changed: a low rank
    assert rows.size == 5
    d1 = d0.copy()
    d1[:, rows] = full[:, rows]
    ev._t_col, ev._t_lu = 1e-12, 1.0  # Woodbury is cheaper: it is taken
    pi_w, g_w, h_w = ev.evaluate(d1, w)
    assert isinstance(ev._direct(d1, ev._generator(d1)[1:, 1:].tocsr()), lagrangian._Woodbury)
    _, fresh = _evaluator(sc)
    pi_f, g_f, h_f = fresh.evaluate(d1, w)
    _, it = _evaluator(sc)
    it.direct = False  # BiCGSTAB with Jacobi
    pi_i, g_i, h_i = it.evaluate(d1, w)
    assert h_w is not None and h_f is not None and h_i is not None
    for pi, g, h in ((pi_w, g_w, h_w), (pi_i, g_i, h_i)):
        assert np.abs(pi - pi_f).max() < 1e-10 * pi_f.max()
        assert math.isclose(g, g_f, rel_tol=1e-9)
        assert np.abs(h - h_f).max() < 1e-8 * np.abs(h_f).max()


def test_policy_iteration_ends_where_no_decision_gains() -> None:
    sc = _default()
    prog, ev = _evaluator(sc)
    w = _costs(prog)
    search = lagrangian._Search(prog, w, prog.t_only(), [])
    d, g, done = search.policy_iteration(w, lagrangian.initial_policy(prog), 10**6, 0.0)
    assert done
    _, g2, h = ev.evaluate(d, w)
    assert h is not None and math.isclose(g, g2, rel_tol=1e-12)
    assert np.array_equal(lagrangian.improve(prog, w, h, d), d)
    # and no single decision changed anywhere does better
    rng = np.random.default_rng(3)
    starts = np.searchsorted(prog.s_idx, np.arange(prog.N))
    ends = np.append(starts[1:], prog.P)
    for s in rng.choice(np.flatnonzero(ends - starts > 1), 20, replace=False):
        for c in range(2):
            other = d.copy()
            other[c, s] = starts[s] + (d[c, s] - starts[s] + 1) % (ends[s] - starts[s])
            assert ev.evaluate(other, w)[1] >= g - 1e-12 * abs(g)


def test_auto_picks_the_lp_on_small_chains_and_the_lagrangian_above() -> None:
    assert pick_method("auto", 462) == "lp"
    assert pick_method("auto", AUTO_LP_MAX_STATES + 1) == "lagrangian"
    assert pick_method("lp", 10**6) == "lp"
    with pytest.raises(OptimizeError, match="simplex"):
        pick_method("simplex", 10)
    assert optimize(_default(), parse_expr("all.W")).method == "lp"
    assert optimize(_default(nodes=_nodes(10, 5, 2)), parse_expr("all.W")).method \
        == "lagrangian"


def test_infeasible_bound_is_the_same_one_line_by_either_method() -> None:
    sc = _default()
    msgs = []
    for method in ("lp", "lagrangian"):
        with pytest.raises(OptimizeError) as err:
            optimize(sc, parse_expr("all.W"), (parse_constraint("hp.W<=0.5"),), method=method)
        msgs.append(str(err.value))
    for m in msgs:
        assert "'hp.W<=0.5' cannot be met" in m and "least hp.W" in m and "\n" not in m
    least = [float(m.rsplit(" ", 1)[1]) for m in msgs]
    assert _rel(least[1], least[0]) < 1e-5


def test_memory_refusal_is_one_line_with_states_and_bytes(
        tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = _default()
    with pytest.raises(OptimizeError) as err:
        optimize(sc, parse_expr("all.W"), method="lagrangian", max_bytes=1e6)
    msg = str(err.value)
    assert "462 states" in msg and "GB of memory" in msg and "0.0 GB is free" in msg
    assert "\n" not in msg
    import optimize_policy as cli  # type: ignore[import-not-found]

    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(sc.to_dict()))
    monkeypatch.setattr(cli.bootstrap, "free_memory", lambda: 2e8)
    rc, _, err_text = call_main(cli.main, ["--scenario", str(path), "--no-baselines"], capsys)
    assert rc == 2 and len(err_text.strip().splitlines()) == 1
    assert "462 states: the lp method needs about" in err_text and "0.2 GB is free" in err_text


def test_cli_prints_the_method_its_rounds_and_the_duality_gap(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import optimize_policy as cli  # type: ignore[import-not-found]

    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(_default().to_dict()))
    out_json = tmp_path / "F.json"
    rc, out, err = call_main(cli.main, ["--scenario", str(path), "--subject-to", "hp.W<=2.4",
                                        "--method", "lagrangian", "--no-baselines",
                                        "--json", str(out_json)], capsys)
    assert rc == 0, err
    assert "Lagrangian: 462 states," in out and "policy evaluations" in out
    assert "duality gap" in out
    import json

    d = json.loads(out_json.read_text())
    assert d["solver"]["method"] == "lagrangian" and d["solver"]["evaluations"] > 0
    assert d["exact_check"]["max_rel_gap"] < 1e-7
    assert math.isclose(d["optimal"]["all"]["W"], 3.38204115065, rel_tol=1e-9)
