"""Sweeps: a local process pool and a local Ray each run a tiny sweep to the end; a
failing point is reported with its parameters while the others are kept."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import scenario_dict

from fogsdn.core.scenario import Scenario, parse_scenario
from fogsdn.studies.study import run_study
from fogsdn.studies.sweep import SweepError, SweepStudy, plan

ROOT = Path(__file__).resolve().parent.parent


def swept(policies: list[str] | None = None, replications: int = 1) -> Scenario:
    return parse_scenario(scenario_dict(
        name="sweeptest", seed=2, duration_ms=400, warmup_ms=20, timeout_ms=500,
        nodes=[
            {"name": "fn", "role": "fn", "mu": 1.0, "capacity": 10},
            {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 5},
        ],
        sweep={"parameter": "workload.lambda_lp", "values": [0.2, 0.6],
               "policies": policies or [], "replications": replications},
    ))


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_plan_covers_values_policies_and_replications(tmp_path: Path) -> None:
    pts = plan(swept(["prioritized", "nodiff"], replications=2), tmp_path)
    assert len(pts) == 2 * 2 * 2
    assert {(p.policy, p.value, p.replication) for p in pts} == {
        (pol, v, r) for pol in ("prioritized", "nodiff") for v in (0.2, 0.6) for r in (0, 1)
    }
    assert all(p.scenario.workload.lambda_lp == p.value for p in pts)
    assert all(p.scenario.policy.name == p.policy for p in pts)
    with pytest.raises(SweepError):
        plan(swept().model_copy(update={"sweep": None}), tmp_path)


def test_process_pool_sweep_keeps_finished_points_when_one_fails(tmp_path: Path) -> None:
    res = SweepStudy(swept(["prioritized", "no_such_policy"], replications=2), tmp_path)
    run_study(res, tmp_path, executor="process", workers=2, log=lambda s: None)
    assert len(res.failures) == 4  # both values x both replications of the bad policy
    assert all(f["policy"] == "no_such_policy" and "unknown policy" in f["error"]
               for f in res.failures)
    rows = read_csv(tmp_path / "sweep.csv")
    assert len(rows) == 2 * 2 * 2  # values x replications x classes of the good policy
    assert {r["policy"] for r in rows} == {"prioritized"}
    assert len(read_csv(tmp_path / "sweep_failures.csv")) == 4
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    assert (tmp_path / "points/prioritized/workload.lambda_lp=0.6/rep001/trace.csv").exists()


def test_ray_sweep_on_a_private_local_ray(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'fogsdn[sweep]')")
    import ray

    res = SweepStudy(swept(), tmp_path, requests=1500, trace=False)
    run_study(res, tmp_path, executor="ray", workers=2, log=lambda s: None)
    assert not res.failures
    rows = read_csv(tmp_path / "sweep.csv")
    assert sorted((float(r["value"]), r["cls"]) for r in rows) == [
        (0.2, "hp"), (0.2, "lp"), (0.6, "hp"), (0.6, "lp")]
    assert all(int(r["requests"]) == 1500 for r in rows)
    assert not ray.is_initialized()  # we started it, so we shut it down
    assert "RAY_TMPDIR" not in os.environ


def test_sweep_script_runs_serially(tmp_path: Path) -> None:
    scen = tmp_path / "s.yaml"
    scen.write_text(swept().to_yaml())
    out = subprocess.run(
        [sys.executable, "scripts/sweep.py", "--scenario", str(scen), "--engine", "simulate",
         "--executor", "serial", "--requests", "1000", "--out", str(tmp_path / "o")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "[sweep 2/2" in out.stderr and (tmp_path / "o/sweep.png").exists()


def test_exact_curves_where_the_model_applies(tmp_path: Path) -> None:
    from fogsdn.studies.sweep import exact_curves

    sc = swept(["prioritized", "threshold"])
    curves = exact_curves(sc, plan(sc, tmp_path))
    # threshold is state-based: its curves come from the chain built from the policy
    assert set(curves) == {(p, c) for p in ("prioritized", "threshold") for c in ("hp", "lp")}
    assert [v for v, _, _ in curves[("threshold", "lp")]] == [0.2, 0.6]
    assert [v for v, _, _ in curves[("prioritized", "lp")]] == [0.2, 0.6]
    w02, w06 = (w for _, w, _ in curves[("prioritized", "lp")])
    assert 0 < w02 < w06


@pytest.mark.emulation
def test_live_sweep_on_ray_runs_one_emulation_per_node_at_a_time(tmp_path: Path) -> None:
    """`--engine emulate --executor ray` on a local Ray (one node, one unit of the
    emulation resource, two CPUs): both points run live in Ray workers, never together."""
    pytest.importorskip("ray", reason="the sweep extra (ray) is not installed")
    sc = swept().with_overrides({"time_scale": 20.0, "duration_ms": 150.0, "warmup_ms": 0.0})
    res = SweepStudy(sc, tmp_path / "live", engine="emulate", figure=False)
    run_study(res, tmp_path / "live", executor="ray", workers=2, log=lambda s: None)
    assert not res.failures, res.failures
    rows = read_csv(tmp_path / "live" / "sweep.csv")
    assert sorted({float(r["value"]) for r in rows}) == [0.2, 0.6]
    spans = []
    for run in sorted((tmp_path / "live" / "points").rglob("rep000")):
        summary = run / "summary.json"
        assert summary.exists() and (run / "trace.csv").exists()
        spans.append(((run / "scenario.yaml").stat().st_mtime, summary.stat().st_mtime))
    assert len(spans) == 2
    (s1, e1), (s2, e2) = sorted(spans)
    assert e1 <= s2, f"two emulations overlapped on one node: {spans}"



def test_a_size_based_sweep_is_seed_002bs_study(tmp_path: Path) -> None:
    """A sweep that says `study: size_based` runs through the same driver: every
    (value, policy) replicated, beside the model, into <name>.csv and .png; --plot-only
    redraws from that table."""
    from fogsdn.cli.study_command import main as study_main

    args = ["--scenario", str(ROOT / "scenarios" / "seed002b_load.yaml"), "--out",
            str(tmp_path), "--requests", "3000", "--replications", "2", "--executor", "serial",
            "--set", "sweep.values=[0.1377, 0.3442]", "--set", "sweep.policies=[sita_e, random]"]
    assert study_main(args) == 0
    rows = read_csv(tmp_path / "seed002b_load.csv")
    assert sorted((r["policy"], round(float(r["x"]), 2)) for r in rows) == [
        ("random", 0.2), ("random", 0.5), ("sita_e", 0.2), ("sita_e", 0.5)]
    assert all(r["wait_reps"] == "2" and float(r["wait_sim"]) > 0 for r in rows)
    random_05 = next(r for r in rows if r["policy"] == "random" and float(r["x"]) > 0.4)
    assert float(random_05["wait_predicted"]) > 0  # Random is M/G/1 per host: a model point
    (tmp_path / "seed002b_load.png").unlink()
    assert study_main([*args, "--plot-only"]) == 0
    assert (tmp_path / "seed002b_load.png").stat().st_size > 1000
