"""The simulator's bookkeeping: every request once, reproducible, streamed, same bytes
as the shared trace writer, and the semantics that are easy to get subtly wrong
(timeouts keep the node busy, handoff and drop at the OFN's leave times)."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import merged, scenario_dict

from fogsdn.core.scenario import PolicySpec, Role, Scenario, TaskClass, parse_scenario
from fogsdn.core.trace import Outcome, read_trace, write_trace
from fogsdn.measure.metrics import measured_summary
from fogsdn.policies import ClusterView, NodeView, Request, make_policy
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import BLOCKED, LOST, OK, TIMEOUT
from fogsdn.sim.runner import replicate, run_simulation

ROOT = Path(__file__).resolve().parent.parent


SIM_BASE: dict[str, Any] = {
    "name": "simtest", "seed": 5, "duration_ms": 1e9, "warmup_ms": 50, "timeout_ms": 1e6,
    "workload": {"clients": 3},
    "nodes": [
        {"name": "fn", "role": "fn", "mu": 1.0, "capacity": 8},
        {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 5},
    ],
}


def scenario(**over: Any) -> Scenario:
    return parse_scenario(merged(scenario_dict(**SIM_BASE), over))


def rows_of(sc: Scenario, **kw: Any) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    simulate(sc, rows.extend, **kw)
    return rows


@pytest.mark.parametrize("leave", ["drain", "drop", "handoff"])
def test_every_request_exactly_once(leave: str) -> None:
    sc = scenario(churn={"leave": leave}, timeout_ms=15.0)
    rows = rows_of(sc, requests=30_000)
    assert len(rows) == 30_000
    ids = {(r[3], r[2]) for r in rows}
    assert len(ids) == 30_000
    per_client: dict[int, list[int]] = {}
    for c, seq in ids:
        per_client.setdefault(c, []).append(seq)
    for seqs in per_client.values():  # per-client sequence numbers without gaps
        assert sorted(seqs) == list(range(len(seqs)))
    outcomes = {r[1] for r in rows}
    assert {OK, BLOCKED, TIMEOUT} <= outcomes
    assert (LOST in outcomes) == (leave != "drain")


def test_same_seed_same_bytes_and_replications_differ(tmp_path: Path) -> None:
    sc = scenario(churn={"leave": "handoff"})
    for d in ("a", "b"):
        run_simulation(sc, tmp_path / d, requests=5000, compare=False)
    for f in ("trace.csv", "availability.csv", "scenario.yaml"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    run_simulation(sc, tmp_path / "r1", requests=5000, replication=1, compare=False)
    assert (tmp_path / "r1/trace.csv").read_bytes() != (tmp_path / "a/trace.csv").read_bytes()
    # replication r is seed + r, so it can be rerun on its own
    run_simulation(sc.with_overrides({"seed": sc.seed + 1}), tmp_path / "s6", requests=5000,
                   compare=False)
    assert (tmp_path / "r1/trace.csv").read_bytes() == (tmp_path / "s6/trace.csv").read_bytes()


def test_trace_is_byte_identical_to_the_shared_writer(tmp_path: Path) -> None:
    sc = scenario(churn={"leave": "handoff"}, timeout_ms=15.0)
    run_simulation(sc, tmp_path / "run", requests=20_000, compare=False)
    rows = read_trace(tmp_path / "run/trace.csv")
    assert {r.outcome for r in rows} == set(Outcome)
    write_trace(tmp_path / "again.csv", rows)
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "run/trace.csv").read_bytes()


def test_streamed_summary_equals_measured_summary(tmp_path: Path) -> None:
    sc = scenario(churn={"leave": "drop"}, timeout_ms=15.0)
    summary = run_simulation(sc, tmp_path, requests=20_000, compare=False)
    rows = read_trace(tmp_path / "trace.csv")
    ref = measured_summary(rows, sc.warmup_ms, sc.deadline_ms)
    got = summary["measured"]
    for cls in ("hp", "lp"):
        g, r = got[cls], ref[cls]
        for k in ("count", "ok", "blocked", "timeout", "lost", "by_node"):
            assert g[k] == r[k], (cls, k)
        for k in ("W", "W_e2e", "blocking", "lost_prob", "timeout_prob", "outage"):
            assert g[k] == pytest.approx(r[k], rel=1e-5, abs=1e-9), (cls, k)
        # batch sizes differ (streaming doubles them), so only the scale must agree
        assert g["W_ci95"] == pytest.approx(r["W_ci95"], rel=0.5)
        for k in ("blocking_ci95", "outage_ci95"):
            assert 0 < g[k] == pytest.approx(r[k], rel=0.5), (cls, k)
    for node, s in ref["nodes"].items():
        assert got["nodes"][node]["served"] == s["served"]
        assert got["nodes"][node]["achieved_service_ms"] == pytest.approx(
            s["achieved_service_ms"], rel=1e-5)


@pytest.mark.parametrize(("policy", "leave"), [("prioritized", "handoff"), ("nodiff", "drop"),
                                               ("basic", "drain")])
def test_cached_routes_equal_calling_decide_per_request(policy: str, leave: str) -> None:
    sc = scenario(policy={"name": policy, "alpha": 0.3}, churn={"leave": leave})
    fast = rows_of(sc, requests=20_000)
    slow = rows_of(sc, requests=20_000, per_request=True)
    key = lambda r: (r[3], r[2])  # noqa: E731
    assert sorted(fast, key=key) == sorted(slow, key=key)


def test_duration_and_requests_stop_arrivals() -> None:
    sc = scenario()
    rows = rows_of(sc, duration_ms=2000.0)
    assert max(r[6] for r in rows) < 2000.0 < max(r[0] for r in rows if r[1] == OK)
    assert len(rows_of(sc, duration_ms=2000.0, requests=100)) == 100
    n = len(rows)
    assert len(rows_of(sc, duration_ms=2000.0, requests=10 * n)) == n
    assert len(rows_of(sc.with_overrides({"duration_ms": 2000.0}))) == n


def test_a_timed_out_request_still_holds_its_node() -> None:
    """Timeouts are the client's: the node serves on, so nothing else changes."""
    patient = rows_of(scenario(timeout_ms=1e6), requests=20_000)
    hasty = rows_of(scenario(timeout_ms=8.0), requests=20_000)
    key = lambda r: (r[3], r[2])  # noqa: E731
    n_timeout = 0
    for p, h in zip(sorted(patient, key=key), sorted(hasty, key=key), strict=True):
        assert p[2:8] == h[2:8]
        if p[1] == OK and p[0] - p[6] > 8.0:
            n_timeout += 1
            assert h[1] == TIMEOUT and h[0] == pytest.approx(h[6] + 8.0)
        else:
            assert p[:2] == h[:2]
    assert n_timeout > 100


def test_availability_log_and_leave_semantics(tmp_path: Path) -> None:
    sc = scenario(churn={"leave": "drop"})
    summary = run_simulation(sc, tmp_path, requests=20_000, compare=False)
    with open(tmp_path / "availability.csv", newline="") as fh:
        av = list(csv.DictReader(fh))
    assert [(a["t"], a["node"]) for a in av[:2]] == [("0.000000", "fn"), ("0.000000", "ofn1")]
    ofn = [a for a in av if a["node"] == "ofn1"]
    assert len(ofn) == summary["ofn_transitions"] + 1
    assert all(a["state"] != b["state"] for a, b in zip(ofn, ofn[1:], strict=False))
    leaves = {a["t"] for a in ofn if a["state"] == "unavailable"}
    lost = [r for r in read_trace(tmp_path / "trace.csv") if r.outcome is Outcome.LOST]
    assert lost and all(f"{r.t_done:.6f}" in leaves and r.node == "ofn1" for r in lost)
    assert all(r.cls == "lp" for r in lost)  # prioritized: only LP ever reaches the OFN


def test_handoff_moves_requests_to_the_fn(tmp_path: Path) -> None:
    sc = scenario(churn={"leave": "handoff"})
    run_simulation(sc, tmp_path, requests=20_000, compare=False)
    rows = read_trace(tmp_path / "trace.csv")
    moved = [r for r in rows if r.error.startswith("handoff from ofn1 at")]
    assert moved
    for r in moved:
        if r.outcome is Outcome.OK:
            assert r.node == "fn" and r.t_done > float(r.error.rsplit(" ", 1)[1])
        else:
            assert r.outcome is Outcome.LOST and "fn full" in r.error
    assert any(r.outcome is Outcome.OK for r in moved)


def test_size_distributions_and_multi_servers() -> None:
    det = scenario(workload={"size": {"distribution": "deterministic", "mean": 2.0}})
    rows = rows_of(det, requests=5000)
    mus = {0: 1.0, 1: 0.3}
    assert all(r[8] == pytest.approx(2.0 / mus[r[7]]) for r in rows if r[1] == OK)
    par = scenario(workload={"size": {"distribution": "bounded_pareto", "shape": 1.5,
                                      "low": 0.2, "high": 50.0}})
    sizes = [r[5] for r in rows_of(par, requests=5000)]
    assert 0.2 <= min(sizes) and max(sizes) <= 50.0
    multi = scenario(nodes=[{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 3,
                             "servers": "multi"}])
    ok = [r for r in rows_of(multi, requests=5000) if r[1] == OK]
    assert all(r[0] - r[6] == pytest.approx(r[8]) for r in ok)  # no waiting, ever


def test_threshold_policy_decides_from_the_fn_queue() -> None:
    pol = make_policy(PolicySpec(name="threshold", params={"threshold": 2}))
    assert not pol.proactive

    def view(fn_load: int, up: bool = True) -> ClusterView:
        return ClusterView((NodeView("fn", Role.FN, True, 8, 1.0, fn_load),
                            NodeView("ofn1", Role.OFN, up, 5, 0.3, 0)))

    import random

    rng = random.Random(0)
    lp, hp = Request(TaskClass.LP, "c1"), Request(TaskClass.HP, "c1")
    assert pol.decide(view(2), lp, rng) == "fn"
    assert pol.decide(view(3), lp, rng) == "ofn1"
    assert pol.decide(view(3, up=False), lp, rng) == "fn"
    assert pol.decide(view(9), hp, rng) == "fn"
    # in the simulator: an LP request reaches the OFN only when the FN held more than 2
    sc = scenario(policy={"name": "threshold", "params": {"threshold": 2}})
    rows = rows_of(sc, requests=20_000)
    fn_stays = sorted((r[6], r[0]) for r in rows if r[1] in (OK, TIMEOUT) and r[7] == 0)
    to_ofn = [r[6] for r in rows if r[4] == 1 and r[7] == 1]
    assert len(to_ofn) > 500
    import bisect

    starts = [s for s, _ in fn_stays]
    for t in to_ofn:
        held = sum(1 for s, e in fn_stays[: bisect.bisect_left(starts, t)] if e > t)
        assert held > 2


def test_simpy_yardstick_agrees_request_by_request() -> None:
    pytest.importorskip("simpy", reason="simpy is not installed (the bench extra)")
    from tools.rigs.simpy_ref import simulate_simpy

    sc = scenario()
    ours, theirs = rows_of(sc, requests=20_000), []
    simulate_simpy(sc, theirs.extend, requests=20_000)
    key = lambda r: (r[3], r[2])  # noqa: E731
    for a, b in zip(sorted(ours, key=key), sorted(theirs, key=key), strict=True):
        assert a[1:8] == b[1:8]
        assert a[0] == pytest.approx(b[0], abs=1e-6)


def test_replications_and_cli(tmp_path: Path) -> None:
    sc = scenario()
    summary = replicate(sc, 3, tmp_path / "reps", requests=3000, trace=False)
    assert [Path(p).name for p in summary["runs"]] == ["rep000", "rep001", "rep002"]
    w = summary["replications_ci"]["hp"]["W"]
    assert w["n"] == 3 and math.isfinite(w["ci95"]) and w["ci95"] > 0
    assert json.loads((tmp_path / "reps/summary.json").read_text())["replications"] == 3
    scen = tmp_path / "s.yaml"
    scen.write_text(sc.to_yaml())
    out = subprocess.run(
        [sys.executable, "-m", "fogsdn.sim", "--scenario", str(scen), "--requests", "2000",
         "--out", str(tmp_path / "cli")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "hp" in out.stdout and "lp" in out.stdout and "requests/s" in out.stdout
    assert sum(1 for _ in open(tmp_path / "cli/trace.csv")) == 2001
    s = json.loads((tmp_path / "cli/summary.json").read_text())
    assert s["engine"] == "simulate" and s["requests"] == 2000 and "measured" in s


def test_prediction_is_attached_with_or_without_a_trace(tmp_path: Path) -> None:
    sc = scenario()
    traced = run_simulation(sc, tmp_path / "t", requests=5000)
    streamed = run_simulation(sc, tmp_path / "n", requests=5000, trace=False)
    assert not (tmp_path / "n/trace.csv").exists()
    for s in (traced, streamed):
        assert s["predicted"]["hp"]["W"] > 0
        assert set(s["comparison"]) == {"hp", "lp"}
    assert traced["predicted"] == streamed["predicted"]
    threshold = run_simulation(sc.with_overrides({"policy.name": "threshold"}), tmp_path / "p",
                               requests=2000, trace=False)
    assert threshold["predicted"]["model"]["chain"] == "policy"  # the chain from the policy
    outside = run_simulation(sc.with_overrides({"workload.size.distribution": "deterministic"}),
                             tmp_path / "o", requests=2000, trace=False)
    assert outside["predicted"] is None and "exponential" in outside["outside_model"]
    reps = replicate(sc, 2, tmp_path / "r", requests=3000, trace=False)
    assert reps["comparison"]["lp"]["W"]["predicted"] == pytest.approx(
        traced["predicted"]["lp"]["W"])


def test_handoff_moves_the_work_left_of_the_task_in_service() -> None:
    """Handoff means the same in both engines: the task in service moves with the work
    it has left (the live worker's semantics), the waiting ones with their whole size.
    With deterministic sizes every moved task's FN service is at most size / mu_FN,
    and the ones caught in service take strictly less."""
    sc = parse_scenario(scenario_dict(
        duration_ms=4000, churn={"eta": 0.2, "xi": 0.2, "leave": "handoff"},
        workload={"size": {"distribution": "deterministic", "mean": 1.0}}))
    rows: list[tuple] = []
    simulate(sc, rows.extend)
    full = 1.0 / 1.0  # size / mu of the FN
    moved = [r for r in rows if r[1] == OK and len(r) > 10 and "handoff" in r[10]]
    assert len(moved) > 50
    assert all(r[8] <= full + 1e-9 for r in moved)
    partial = [r for r in moved if r[8] < full - 1e-6]
    assert 0 < len(partial) < len(moved)
