"""A user's policy file, kept outside the repository, runs in every engine unchanged."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from user_policies import (
    FAILS_WHEN_OFN_DOWN,
    HP_AWAY,
    HP_AWAY_REGISTERED,
    TRY_FN_FIRST,
    write_policy,
    write_scenario,
)

import fogsdn.policies
from fogsdn.core.scenario import TaskClass, load_scenario
from fogsdn.core.stages import StagePlan
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.policies import POLICIES, PolicyError, make_policy, safe_routes, stage_plan
from fogsdn.policies.check import main as check_main
from fogsdn.policies.resolve import resolve_scenario
from fogsdn.sim.runner import run_simulation


def _outside(tmp_path: Path) -> Path:
    assert ROOT not in tmp_path.parents, "the test needs a folder outside the repository"
    return tmp_path


def test_scenario_module_is_relative_to_the_scenario_file(tmp_path: Path) -> None:
    tmp = _outside(tmp_path)
    (tmp / "pol").mkdir()
    write_policy(tmp / "pol", HP_AWAY)
    sc = load_scenario(write_scenario(tmp, "pol/my_policy.py"))
    assert sc.policy.module == str(tmp / "pol" / "my_policy.py")
    assert sc.policy.name == ""  # the module's one policy, named once it is loaded
    resolved = resolve_scenario(tmp / "scenario.yaml")
    assert resolved.policy.name == "hp_away"
    assert type(make_policy(resolved.policy)).__name__ == "HpAway"


def test_user_policy_runs_in_the_simulator(tmp_path: Path) -> None:
    tmp = _outside(tmp_path)
    write_policy(tmp, HP_AWAY)
    sc = resolve_scenario(write_scenario(tmp, "my_policy.py", duration_ms=400, seed=4))
    summary = run_simulation(sc, tmp / "out", verbose=False)
    assert summary["policy"]["name"] == "hp_away" and summary["policy"]["errors"] == 0
    with open(tmp / "out" / "trace.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["outcome"] == "ok"]
    lp = {r["node"] for r in rows if r["cls"] == "lp"}
    hp = {r["node"] for r in rows if r["cls"] == "hp"}
    assert lp == {"fn"} and hp == {"fn", "ofn1"}


def test_a_users_kill_and_restart_policy_gets_stages_in_the_simulator_and_live(
        tmp_path: Path) -> None:
    tmp = _outside(tmp_path)
    write_policy(tmp, TRY_FN_FIRST)
    sc = resolve_scenario(write_scenario(tmp, "my_policy.py", duration_ms=2000, seed=4,
                                         timeout_ms=1e9))
    # the live run's plan (runner and controller ask stage_plan): the policy's own
    assert stage_plan(sc) == StagePlan("tags", ("fn", "ofn1"), (1.5,))
    run_simulation(sc, tmp / "out", compare=False)
    rows = read_trace(tmp / "out" / "trace.csv")
    assert len({r.request_id for r in rows}) == len(rows)  # each request exactly once
    ok = [r for r in rows if r.outcome is Outcome.OK]
    restarted = [r for r in ok if r.hosts == "fn>ofn1"]
    assert len(restarted) > 20  # killed at the FN, restarted at the OFN, as the plan says
    assert all(r.size > 1.5 and r.node == "ofn1" and r.wasted_ms == pytest.approx(1.5)
               for r in restarted)
    # the rest finished at the FN, unkilled: small, or sent while the OFN was away
    assert all(r.hosts == "fn" and r.node == "fn" and r.wasted_ms == 0.0
               for r in ok if r not in restarted)
    assert any(r.size > 1.5 for r in ok if r.hosts == "fn")
    # and the analysis takes it for TAGS over its stages (the model has no churn)
    from fogsdn.measure.size_compare import is_size_scenario, predict_scenario

    still = sc.with_overrides({"churn.eta": 0.0, "workload.lambda_hp": 0.05,
                               "workload.lambda_lp": 0.05})
    pred = predict_scenario(still)
    assert is_size_scenario(sc) and pred.policy == "tags" and not pred.exact
    assert [h.name for h in pred.hosts] == ["fn", "ofn1"]


def test_cli_flag_loads_a_policy_relative_to_the_working_directory(tmp_path: Path) -> None:
    tmp = _outside(tmp_path)
    write_policy(tmp, HP_AWAY, "away.py")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"),
                        "--engine", "simulate", "--policy-module", "away.py",
                        "--requests", "500", "--out", str(tmp / "o")],
                       capture_output=True, text=True, cwd=tmp, timeout=120)
    assert r.returncode == 0, r.stderr
    written = load_scenario(tmp / "o" / "scenario.yaml")
    assert written.policy.module == str(tmp / "away.py") and written.policy.name == "hp_away"


@pytest.mark.parametrize(("text", "cause"), [
    ("def broken(:\n", "syntax error at line 1"),
    ("x = 1\n", "defines no Policy subclass"),
    ("raise RuntimeError('no config')\n", "importing it raised RuntimeError: no config"),
    (HP_AWAY.replace('"hp_away"', '"prioritized"'), "is a built-in policy's"),
    (HP_AWAY.replace("fn = view.up(Role.FN)[0].name", "fn = 1 / 0"),
     "routes raised ZeroDivisionError: division by zero (line 14)"),
    (HP_AWAY.replace("{fn: 1.0}}", "{'nowhere': 1.0}}"), "unknown node 'nowhere'"),
    (HP_AWAY.replace("{fn: 1.0}}", "{fn: -1.0}}"), "weight of fn is -1.0"),
    # sys.exit() in the user's code is an error of the user's code, not our exit status
    ("import sys\nsys.exit(0)\n", "importing it raised SystemExit: 0"),
    (HP_AWAY.replace("fn = view.up(Role.FN)[0].name", "raise SystemExit(3)"),
     "routes raised SystemExit: 3"),
])
def test_errors_in_the_users_file_are_one_line_naming_it(tmp_path: Path, text: str,
                                                        cause: str) -> None:
    tmp = _outside(tmp_path)
    write_policy(tmp, text, f"p{abs(hash(text)) % 10**8}.py")
    path = next(tmp.glob("p*.py"))
    with pytest.raises(PolicyError) as err:
        resolve_scenario(write_scenario(tmp, path.name))
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and cause in msg, msg


def test_missing_file_and_module(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such file"):
        resolve_scenario(write_scenario(_outside(tmp_path), "absent.py"))
    with pytest.raises(PolicyError, match="cannot import 'no_such_policy_module'"):
        resolve_scenario(write_scenario(tmp_path, "no_such_policy_module"))


def test_a_policy_failing_in_the_simulator_names_its_file(tmp_path: Path) -> None:
    tmp = _outside(tmp_path)
    path = write_policy(tmp, FAILS_WHEN_OFN_DOWN)
    sc = resolve_scenario(write_scenario(tmp, path.name, duration_ms=400))
    with pytest.raises(PolicyError) as err:
        run_simulation(sc, tmp / "out", verbose=False)
    msg = str(err.value)
    assert str(path) in msg and "decide raised IndexError" in msg and "(line 22)" in msg


def test_sweep_workers_load_the_users_policy(tmp_path: Path) -> None:
    from fogsdn.studies.study import run_study
    from fogsdn.studies.sweep import SweepStudy

    tmp = _outside(tmp_path)
    write_policy(tmp, HP_AWAY)
    sc = resolve_scenario(write_scenario(
        tmp, "my_policy.py", duration_ms=300,
        sweep={"parameter": "workload.lambda_lp", "values": [0.2, 0.4],
               "policies": ["hp_away", "prioritized"]}))
    res = SweepStudy(sc, tmp / "sw", figure=False)
    run_study(res, tmp / "sw", executor="process", workers=2, log=lambda s: None)
    assert not res.failures
    with open(tmp / "sw" / "sweep.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} == {"hp_away", "prioritized"}
    runs = sorted((tmp / "sw" / "points" / "hp_away").glob("*/rep*"))
    assert len(runs) == 2, runs  # one per value of lambda_lp
    for d in runs:
        with open(d / "trace.csv") as fh:
            assert {r["node"] for r in csv.DictReader(fh)
                    if r["cls"] == "lp" and r["outcome"] == "ok"} == {"fn"}


def test_safe_routes_send_both_classes_to_the_fns() -> None:
    from conftest import scenario_dict

    from fogsdn.core.scenario import parse_scenario
    from fogsdn.policies import initial_view

    sc = parse_scenario(scenario_dict(nodes=[
        {"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
        {"name": "fn2", "role": "fn", "mu": 1.0, "capacity": 20},
        {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10}]))
    table = safe_routes(initial_view(sc, ofn_available=True))
    assert table == {TaskClass.HP: {"fn": 0.5, "fn2": 0.5}, TaskClass.LP: {"fn": 0.5, "fn2": 0.5}}


def test_checker_passes_a_good_policy_and_fails_a_bad_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp = _outside(tmp_path)
    good = write_policy(tmp, HP_AWAY, "good.py")
    assert check_main([str(good)]) == 0
    out = capsys.readouterr().out
    assert "ok: policy 'hp_away'" in out and "decide: mean" in out
    bad = write_policy(tmp, FAILS_WHEN_OFN_DOWN, "bad.py")
    assert check_main([str(bad), "--views", "40"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: policy 'brittle'" in out and "decide raised IndexError" in out
    assert check_main([str(tmp / "absent.py")]) == 2
    r = subprocess.run([sys.executable, "-m", "fogsdn.policies.check", str(good)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "ok: policy 'hp_away'" in r.stdout, r.stderr


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, type]:
    """This process's policy registry, restored after the test (a decorated file
    registers its class while it loads)."""
    mine = dict(POLICIES)
    monkeypatch.setattr(fogsdn.policies, "POLICIES", mine)
    return mine


def test_a_file_using_register_policy_loads_and_checks_like_any_other(
        tmp_path: Path, registry: dict[str, type], capsys: pytest.CaptureFixture[str]) -> None:
    tmp = _outside(tmp_path)
    assert "@register_policy" in HP_AWAY_REGISTERED
    path = write_policy(tmp, HP_AWAY_REGISTERED.replace('"hp_away"', '"hp_away_reg"'), "reg.py")
    sc = resolve_scenario(write_scenario(tmp, path.name))
    assert sc.policy.name == "hp_away_reg"
    built = make_policy(sc.policy)
    assert type(built).__name__ == "HpAway" and registry["hp_away_reg"] is type(built)
    assert check_main([str(path), "--views", "20"]) == 0
    assert "ok: policy 'hp_away_reg'" in capsys.readouterr().out


def test_a_registered_policy_taking_a_built_in_name_is_refused_by_loader_and_checker(
        tmp_path: Path, registry: dict[str, type], capsys: pytest.CaptureFixture[str]) -> None:
    from fogsdn.policies import Prioritized

    tmp = _outside(tmp_path)
    for text, name in ((HP_AWAY_REGISTERED, "reg_clash.py"), (HP_AWAY, "plain_clash.py")):
        path = write_policy(tmp, text.replace('"hp_away"', '"prioritized"'), name)
        with pytest.raises(PolicyError) as err:
            resolve_scenario(write_scenario(tmp, path.name))
        msg = str(err.value)
        assert "\n" not in msg and str(path) in msg, msg
        assert "policy name 'prioritized' is a built-in policy's" in msg, msg
        assert check_main([str(path)]) == 2
        assert "is a built-in policy's" in capsys.readouterr().err
    assert registry["prioritized"] is Prioritized  # the decorator replaced nothing


def test_a_policy_file_of_the_old_layout_loads_with_a_deprecation_warning(
        tmp_path: Path) -> None:
    """One release of grace (fogsdn/legacy_names.py): `controller.policies.base` and
    `fogsdn.scenario` resolve to their new modules, each import warned."""
    from fogsdn.policies.loader import load_policy_module

    f = tmp_path / "old_layout_policy.py"
    f.write_text(
        "from controller.policies.base import ClusterView, Policy, RouteTable\n"
        "from fogsdn.scenario import TaskClass\n\n"
        "class OldLayoutFnOnly(Policy):\n"
        "    name = 'old_layout_fn_only'\n\n"
        "    def routes(self, view: ClusterView) -> RouteTable:\n"
        "        return {TaskClass.HP: {'fn': 1.0}, TaskClass.LP: {'fn': 1.0}}\n")
    with pytest.warns(DeprecationWarning) as caught:
        [cls] = load_policy_module(str(f))
    assert cls.__name__ == "OldLayoutFnOnly" and issubclass(cls, fogsdn.policies.Policy)
    said = " ".join(str(w.message) for w in caught)
    assert "controller.policies.base is deprecated" in said and "fogsdn.policies.base" in said
    assert "fogsdn.scenario is deprecated" in said and "fogsdn.core.scenario" in said
    import controller.policies.base as old  # type: ignore[import-not-found]

    assert old is fogsdn.policies.base  # the same module, not a copy


def test_a_policy_exiting_is_one_line_from_the_runner_and_the_checker(tmp_path: Path) -> None:
    """sys.exit(0) at import: before, the checker and the simulator exited 0 with no output."""
    tmp = _outside(tmp_path)
    (tmp / "quits.py").write_text("import sys\nsys.exit(0)\n")
    for argv in (["-m", "fogsdn.policies.check", "quits.py"],
                 [str(ROOT / "scripts" / "run_testbed.py"), "--engine", "simulate",
                  "--policy-module", "quits.py", "--requests", "100", "--out", str(tmp / "o")]):
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp,
                           timeout=120)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert "importing it raised SystemExit: 0" in r.stderr and "Traceback" not in r.stderr


NAMED = '''from typing import ClassVar
from fogsdn.core.scenario import TaskClass
from fogsdn.policies.base import ClusterView, Policy, RouteTable

class Named(Policy):
    name: ClassVar[str] = "named"

    def routes(self, view: ClusterView) -> RouteTable:
        lp = "ofn1" if view.node("ofn1").available else "fn"
        return {TaskClass.HP: {"fn": 1.0}, TaskClass.LP: {lp: 1.0}}
'''


def test_the_checker_passes_a_policy_written_for_its_scenarios_names(tmp_path: Path) -> None:
    """Names its scenario's nodes ("fn"): fine on that cluster; on the checker's own larger
    one it is a warning that says which cluster, not a failure."""
    tmp = _outside(tmp_path)
    (tmp / "named.py").write_text(NAMED)
    r = subprocess.run([sys.executable, "-m", "fogsdn.policies.check", "named.py",
                        "--scenario", str(ROOT / "scenarios" / "default.yaml")],
                       capture_output=True, text=True, cwd=tmp, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok: policy 'named'")
    assert "on the checker's own larger cluster" in r.stdout and "unknown node 'fn'" in r.stdout
    # on its own cluster a wrong name still fails
    (tmp / "named.py").write_text(NAMED.replace('{"fn": 1.0}', '{"nowhere": 1.0}'))
    r = subprocess.run([sys.executable, "-m", "fogsdn.policies.check", "named.py",
                        "--scenario", str(ROOT / "scenarios" / "default.yaml")],
                       capture_output=True, text=True, cwd=tmp, timeout=120)
    assert r.returncode == 1 and "FAIL routes: class hp: unknown node 'nowhere'" in r.stdout


LOOPS_IN_DECIDE = HP_AWAY.replace(
    "        fn = view.up(Role.FN)[0].name\n",
    "        fn = view.up(Role.FN)[0].name\n"
    "        if ofns_ := view.up(Role.OFN):\n"
    "            while ofns_:\n"
    "                pass\n").replace("class HpAway(Policy):", "class HpAway(Policy):\n"
                                      "    proactive: ClassVar[bool] = False")


@pytest.mark.parametrize(("where", "text"), [
    ("import", "while True:\n    pass\n"),
    ("routes", LOOPS_IN_DECIDE),
])
def test_a_policy_that_loops_is_stopped_and_named(tmp_path: Path, where: str,
                                                  text: str) -> None:
    """A loop at import or in routes: one line naming the file and the call after the time
    limit (FOGSDN_POLICY_TIME_LIMIT_S), from the simulator and the checker, not a hang."""
    tmp = _outside(tmp_path)
    (tmp / "loops.py").write_text(text)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
           "FOGSDN_POLICY_TIME_LIMIT_S": "1"}
    for argv in (["-m", "fogsdn.policies.check", "loops.py"],
                 [str(ROOT / "scripts" / "run_testbed.py"), "--engine", "simulate",
                  "--policy-module", "loops.py", "--requests", "300", "--out", str(tmp / "o")]):
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp,
                           timeout=60, env=env)
        out = r.stdout + r.stderr
        assert r.returncode in (1, 2), (argv, out)
        assert "did not return within 1 s" in out and "loops.py" in out, (argv, out)
        assert "Traceback" not in out
