"""The optimal state-based policy (fogsdn/exact/optimal_policy.py, scripts/optimize_policy.py):
the LP's optimum is what the exact chain gives the extracted table, it is no worse than
any built-in policy, errors are one line, and the written file is an ordinary policy."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, call_main, scenario_dict

from fogsdn.core.scenario import Role, Scenario, TaskClass, parse_scenario
from fogsdn.exact.objective import ObjectiveError, parse_constraint, parse_expr
from fogsdn.exact.optimal_policy import (
    OptimizeError,
    baselines,
    optimize,
    policy_source,
    prediction_figures,
    table_policy_class,
)
from fogsdn.exact.policy_chain import predict_policy
from fogsdn.policies import make_policy
from fogsdn.policies.base import ClusterView, NodeView, Request
from fogsdn.policies.check import check_policy
from fogsdn.policies.resolve import resolve_scenario

SMALL = {"nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 5},
                   {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 3}]}


def small(**over: Any) -> Scenario:
    return parse_scenario(scenario_dict(**{**SMALL, **over}))


def _close(a: float, b: float, rtol: float = 1e-7) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-10)


@pytest.mark.parametrize("leave", ["drain", "drop"])
@pytest.mark.parametrize("objective,constraint", [
    ("all.W", "hp.W<=2.2"),            # a ratio under a binding ratio bound: randomises
    ("lp.blocking", "hp.W<=2.2"),
    ("all.N + 0.01*power", "lp.outage<=0.2"),
])
def test_lp_optimum_is_the_exact_chain_of_the_extracted_policy(
        leave: str, objective: str, constraint: str) -> None:
    sc = small(churn={"leave": leave})
    con = parse_constraint(constraint)
    opt = optimize(sc, parse_expr(objective), (con,))
    pred = predict_policy(sc, table_policy_class(opt)())
    exact = prediction_figures(sc, pred)
    for key, v in opt.figures.items():
        assert _close(exact[key], v), (key, exact[key], v)
    assert con.holds(exact[str(con.expr.terms[0][1])] if con.expr.ratio else
                     sum(c * exact[str(mt)] for c, mt in con.expr.terms))


def test_a_binding_ratio_bound_randomises_in_few_states() -> None:
    opt = optimize(small(), parse_expr("all.W"), (parse_constraint("hp.W<=2.2"),))
    assert _close(opt.figures["hp.W"], 2.2)
    assert 1 <= opt.randomised <= 2  # a vertex: at most one per constraint (per class)


@pytest.mark.parametrize("objective", ["all.W", "hp.W", "lp.W", "all.outage", "power"])
def test_unconstrained_minimum_is_below_every_built_in_policy(objective: str) -> None:
    sc = small()
    expr = parse_expr(objective)
    opt = optimize(sc, expr)
    points = baselines(sc, expr)
    assert len(points) >= 13
    for b in points:
        assert opt.value <= b.value * (1 + 1e-9) + 1e-12, (b.label, b.value, opt.value)
    # and strictly better than the best of them for the mean response time
    if objective == "all.W":
        assert opt.value < min(b.value for b in points) - 1e-3


def test_constrained_optimum_beats_every_feasible_built_in() -> None:
    sc = small()
    expr, con = parse_expr("all.W"), parse_constraint("hp.W<=2.2")
    opt = optimize(sc, expr, (con,))
    feasible = [b for b in baselines(sc, expr, (con,)) if b.feasible]
    assert feasible  # prioritized and threshold 0 meet it here
    assert all(opt.value <= b.value + 1e-9 for b in feasible)


def test_reject_lets_the_optimum_block_on_purpose() -> None:
    sc = small()
    plain = optimize(sc, parse_expr("all.W"))
    gate = optimize(sc, parse_expr("all.W"), reject=True)
    # blocking the requests that would wait long shortens the answered ones' mean
    assert gate.value < plain.value
    assert gate.figures["all.blocking"] > 3 * plain.figures["all.blocking"]
    # without --reject a decision names a node that is up: never the OFN while it is down
    n_ofn = len(plain.phases[1])
    for codes in plain.table()[:2]:
        for s, code in enumerate(codes):
            if not plain.phases[1][s % n_ofn][0]:
                assert code in "0-", (s, code)
    assert any(not gate.phases[1][s % n_ofn][0] and code == "1"
               for codes in gate.table()[:2] for s, code in enumerate(codes))


@pytest.mark.parametrize("text,word", [
    ("hp.W=<2", "hp.W=<2"), ("hp.X<=2", "hp.X"), ("hp.W + lp.W<=3", "ratio"),
    ("hp.W<=", "hp.W<="), ("2 hp.W 3<=1", "2 hp.W 3")])
def test_bad_constraint_is_one_error_naming_it(text: str, word: str) -> None:
    with pytest.raises(ObjectiveError, match=None) as err:
        parse_constraint(text)
    assert word in str(err.value) and "\n" not in str(err.value)


def test_parse_expr_terms() -> None:
    e = parse_expr("lp.blocking + 0.01*power - 2e-1 hp.throughput")
    assert [(c, str(m)) for c, m in e.terms] == [(1.0, "lp.blocking"), (0.01, "power"),
                                                 (-0.2, "hp.throughput")]
    assert e.ratio is None and parse_expr("2*all.W").ratio is not None


def test_handoff_with_churn_is_refused() -> None:
    with pytest.raises(OptimizeError, match="handoff"):
        optimize(small(churn={"leave": "handoff"}), parse_expr("all.W"))


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(scenario_dict(**SMALL)))
    return path


def test_cli_infeasible_and_bad_constraint_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import optimize_policy as cli  # type: ignore[import-not-found]

    path = str(_scenario_file(tmp_path))
    rc, _, err = call_main(cli.main, ["--scenario", path, "--subject-to", "hp.W<=0.5",
                                      "--no-baselines"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "'hp.W<=0.5' cannot be met" in err and "least hp.W" in err
    rc, _, err = call_main(cli.main, ["--scenario", path, "--subject-to", "hp.W<2"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "'hp.W<2'" in err
    rc, _, err = call_main(cli.main, ["--scenario", path, "--subject-to", "hp.W<=3",
                                      "--subject-to", "hp.W>=4", "--no-baselines"], capsys)
    assert rc == 2 and "cannot" in err and len(err.strip().splitlines()) == 1


def test_cli_writes_json_and_a_policy_file_that_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario_file(tmp_path)
    out, pol = tmp_path / "F.json", tmp_path / "my_optimal.py"
    r = subprocess.run([sys.executable, "scripts/optimize_policy.py", "--scenario", str(path),
                        "--minimize", "all.W", "--subject-to", "hp.W<=2.2", "--json", str(out),
                        "--write-policy", str(pol)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["objective"] == "all.W" and d["policy_file"] == str(pol)
    for cls in ("hp", "lp", "all"):
        assert d["optimal"][cls]["W"] > 0
    assert d["optimal"]["hp"]["W"] <= 2.2 + 1e-9
    assert {"prioritized", "basic", "nodiff", "threshold"} <= set(d["baselines"])
    for b in d["baselines"].values():
        assert isinstance(b["feasible"], bool) and b["all"]["W"] > 0
        if b["feasible"]:
            assert d["optimal"]["all"]["W"] <= b["all"]["W"] + 1e-9
    assert d["exact_check"]["max_rel_gap"] < 1e-7
    # the file is an ordinary user policy: the checker passes it, every engine loads it,
    # and the chain built from it gives the optimum
    from fogsdn.policies.check import main as check_main

    rc, text, _ = call_main(check_main, [str(pol), "--scenario", str(path)], capsys)
    assert rc == 0, text
    sc = resolve_scenario(path, policy_module=str(pol))
    assert sc.policy.name == "optimal"
    pred = predict_policy(sc, make_policy(sc.policy))
    assert _close(pred.hp.W, d["optimal"]["hp"]["W"])
    assert _close(pred.lp.W, d["optimal"]["lp"]["W"])


def test_table_policy_decides_from_the_table_and_falls_back_elsewhere() -> None:
    sc = small()
    opt = optimize(sc, parse_expr("all.W"), (parse_constraint("hp.W<=2.2"),))
    policy = table_policy_class(opt)()
    hp, lp, mixed = opt.table()
    assert mixed  # the binding bound randomises somewhere
    (cls, s), row = next(iter(mixed.items()))
    fn_phase, ofn_phase = divmod(s, len(opt.phases[1]))
    (fa, fc), (oa, oc) = opt.phases[0][fn_phase], opt.phases[1][ofn_phase]
    view = ClusterView((NodeView("fn", Role.FN, fa, 5, 1.0, fc),
                        NodeView("ofn1", Role.OFN, oa, 3, 0.3, oc)))
    req = Request(TaskClass(cls), "c1")
    rng = random.Random(5)
    picks = [policy.decide(view, req, rng) for _ in range(4000)]
    share = picks.count("fn") / len(picks)
    assert abs(share - row.get("fn", 0.0)) < 0.03
    # a cluster the table does not know: the fastest expected stay among nodes with room
    other = ClusterView((NodeView("fnA", Role.FN, True, 5, 1.0, 4),
                         NodeView("x", Role.OFN, True, 3, 0.5, 0)))
    assert policy.decide(other, req, rng) == "x"
    assert not check_policy(policy, sc).failures
    src = policy_source(opt, sc.name)
    assert "class Optimal(StateTablePolicy)" in src and "'optimal'" in src


def test_predict_prints_the_optimum_and_the_distance(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import predict as cli  # type: ignore[import-not-found]

    path = str(_scenario_file(tmp_path))
    rc, out, err = call_main(cli.main, ["--scenario", path, "--optimum", "all.W",
                                        "--subject-to", "hp.W<=2.2"], capsys)
    assert rc == 0, err
    assert "optimum all.W = " in out and "from the optimum" in out and "hp.W<=2.2" in out
    rc, out, err = call_main(cli.main, ["--scenario", path, "--optimum", "all.W",
                                        "--subject-to", "hp.W<=2.2", "--json"], capsys)
    o = json.loads(out)["optimum"]
    if all(o["policy_meets"].values()):
        assert o["distance"] >= -1e-9
    assert _close(o["policy_value"] - o["optimum"], o["distance"])
    rc, _, err = call_main(cli.main, ["--scenario", path, "--optimum", "all.Q"], capsys)
    assert rc == 2 and "all.Q" in err and len(err.strip().splitlines()) == 1


def test_predict_says_an_optimum_it_could_not_compute_with_a_non_zero_exit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The prediction is printed; the unmeetable --subject-to is one line on stderr, exit 1
    (it exited 0 with the reason only in the table)."""
    import predict as cli  # type: ignore[import-not-found]

    path = str(_scenario_file(tmp_path))
    rc, out, err = call_main(cli.main, ["--scenario", path, "--optimum", "all.W",
                                        "--subject-to", "hp.W<=0.1"], capsys)
    assert rc == 1 and "not computed" in out
    assert len(err.strip().splitlines()) == 1 and "'hp.W<=0.1' cannot be met" in err
