"""Scenario -> model parameters, and the predict command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import call_main

from fogsdn.core.scenario import load_scenario
from fogsdn.exact.model_params import OutsideModel, model_params_from_scenario

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "scenarios" / "default.yaml"


def test_default_scenario_maps() -> None:
    sc = load_scenario(DEFAULT)
    p = model_params_from_scenario(sc)
    assert p.scheme == "proposed"
    assert (p.cap_f, p.cap_o, p.mu_f, p.mu_of) == (20, 10, 1.0, 0.3)
    assert p.deadline == sc.deadline_ms
    sc2 = sc.with_overrides({"workload.size.mean": 2.0, "policy.name": "nodiff"})
    p2 = model_params_from_scenario(sc2)
    assert p2.scheme == "nodiff" and p2.mu_f == 0.5 and p2.mu_of == 0.15


@pytest.mark.parametrize("override, reason", [
    ({"policy.name": "sita_e"}, "policy"),
    ({"workload.size.distribution": "deterministic"}, "exponential"),
])
def test_outside_model(override: dict[str, object], reason: str) -> None:
    sc = load_scenario(DEFAULT).with_overrides(override)
    with pytest.raises(OutsideModel, match=reason):
        model_params_from_scenario(sc)


def test_two_ofns_or_a_cloud_are_outside() -> None:
    d = load_scenario(DEFAULT).to_dict()
    d["nodes"].append({"name": "ofn2", "role": "ofn", "mu": 0.3, "capacity": 10})
    from fogsdn.core.scenario import parse_scenario

    with pytest.raises(OutsideModel, match="at most one OFN"):
        model_params_from_scenario(parse_scenario(d))
    d["nodes"][-1] = {"name": "cloud", "role": "cloud", "mu": 5.0, "capacity": 100}
    with pytest.raises(OutsideModel, match="cloud"):
        model_params_from_scenario(parse_scenario(d))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "scripts/predict.py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_json_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    import predict as cli  # type: ignore[import-not-found]

    r = _run("--scenario", str(DEFAULT), "--json")  # the script as a process, once
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) == {"hp", "lp", "p_available", "mean_fn", "mean_ofn", "model", "power",
                      "network"}
    assert d["model"]["chain"] == "closed" and d["model"]["states"] == 462
    assert set(d["hp"]) == {"W", "W_e2e", "blocking", "throughput", "N", "drop_prob", "outage",
                            "outage_accepted", "percentiles"}
    assert set(d["lp"]["percentiles"]) == {"p50", "p90", "p95", "p99"}
    flags = ["--scheme", "nodiff", "--lam-hp", "0.3", "--lam-lp", "0.5", "--mu-f", "1",
             "--mu-of", "0.3", "--cap-f", "20", "--cap-o", "10", "--eta", "0.3", "--xi", "0.3"]
    rc, _, err = call_main(cli.main, [*flags, "--alpha", "2"], capsys)
    assert rc == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("bad", [["--eta", "-1"], ["--cap-o", "0"], ["--lam-hp", "x"]])
def test_cli_bad_values_exit_2(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    import predict as cli  # type: ignore[import-not-found]

    flags = ["--scheme", "nodiff", "--lam-hp", "0.3", "--lam-lp", "0.5", "--mu-f", "1",
             "--mu-of", "0.3", "--cap-f", "20", "--cap-o", "10", "--eta", "0.3", "--xi", "0.3"]
    rc, _, err = call_main(cli.main, [*flags, *bad], capsys)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
