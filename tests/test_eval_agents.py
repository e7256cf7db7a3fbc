"""scripts/eval_agents.py on a tiny simulated run: the JSON has every policy's figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_eval_json_shape(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_agents.py"), "--engine", "simulate",
         "--seeds", "1", "2", "--requests", "1500", "--policies", "latency_greedy",
         "power_greedy", "rl_dqn", "--out", str(tmp_path / "runs"), "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    assert list(data) == ["latency_greedy", "power_greedy", "rl_dqn"]
    for entry in data.values():
        for key in ("response_ms", "response_ms_ci95", "power_W", "power_W_ci95", "p95_ms",
                    "energy_per_request_J"):
            assert math.isfinite(entry[key]) and entry[key] > 0, key
        assert entry["runs"] == 2
    # the scenario's trade-off: power-greedy saves power and costs response time
    assert data["power_greedy"]["power_W"] < data["latency_greedy"]["power_W"]
    assert data["power_greedy"]["response_ms"] > data["latency_greedy"]["response_ms"]
    assert "latency_greedy" in r.stdout and "rl_dqn" in r.stdout


def test_eval_runs_on_the_study_driver_and_keeps_the_runs_that_finish(tmp_path: Path) -> None:
    """A run that fails is reported with its label, the others' figures are still written
    (in the order the policies were given), and the exit status says one failed."""
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_agents.py"), "--engine", "simulate",
         "--executor", "serial", "--seeds", "1", "--requests", "500", "--policies",
         "no_such_policy", "power_greedy", "latency_greedy", "--out", str(tmp_path / "runs"),
         "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no_such_policy seed 1: FAILED" in r.stderr
    assert "(simulate, in this process)" in r.stderr
    data = json.loads(out.read_text())
    assert list(data) == ["power_greedy", "latency_greedy"]
    assert data["latency_greedy"]["runs"] == 1
    assert (tmp_path / "runs" / "simulate" / "power_greedy-seed1" / "trace.csv").exists()


def test_seed002a_reports_network_power_the_claims_keys_and_each_phase(tmp_path: Path) -> None:
    """On seed 002a the path policies are the default; each has network power with its
    interval under the issue's names, the paired change against path_shortest and the
    profile's three phases."""
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_agents.py"), "--engine", "simulate",
         "--scenario", str(ROOT / "scenarios" / "seed002a.yaml"), "--executor", "serial",
         "--seeds", "1", "2", "--requests", "1500", "--out", str(tmp_path / "runs"),
         "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    # path_rnn_warm too: fogsdn/agents/weights/path_rnn_seed002a.json is trained for it
    assert list(data) == ["path_shortest", "path_fewest_switches", "path_goal", "path_rnn",
                          "path_rnn_warm"]
    for entry in data.values():
        for key in ("response_ms", "response_ms_ci", "network_power_W", "network_power_W_ci"):
            assert math.isfinite(entry[key]) and entry[key] >= 0, key
        assert entry["rt_measurement_error"] == 0.0  # the simulator: by construction
        assert [p["factor"] for p in entry["phases"]] == [0.3, 1.0, 1.6]
    short, greedy = data["path_shortest"], data["path_fewest_switches"]
    assert short["network_power_W"] < short["power_W"]  # the switches' share only
    # the direct links let s3 and s4 sleep too (about 38 W less each, of about 219 W)
    assert greedy["network_power_W"] < 0.7 * short["network_power_W"]
    assert greedy["network_power_W_change"] < -0.3 and greedy["network_power_W_change_ci"] < 0.01
    # every connection 0.08 model ms longer on the network (two round trips of +0.02)
    assert 0.0 < greedy["response_ms_change"] < 0.08
    assert "response_ms_change" not in short


def test_live_runs_interleave_the_policies_seed_by_seed(tmp_path: Path) -> None:
    """A long live evaluation goes seed by seed, every policy within each, so that the
    machine's drift meets every policy alike."""
    from fogsdn.studies.agent_study import AgentStudy

    study = AgentStudy.__new__(AgentStudy)
    study.labels, study.seeds = ["a", "b", "c"], [1, 2]
    assert [(r.policy, r.seed) for r in study.plan()] == [
        ("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]
