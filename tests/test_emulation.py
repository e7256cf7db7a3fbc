"""Live emulation: real Mininet hosts, OVS userspace switch, our os-ken controller.

Each scenario runs once per module (about 10 s each); the tests read its results
directory: the trace, availability.csv, the flow and group tables dumped at the end.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, assert_clean, footprint, scenario_dict, start_runner
from scipy.stats import binomtest, poisson

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.core.workload import Arrival, arrivals

pytestmark = pytest.mark.emulation

SCALE = 20.0  # real ms per model ms, as the default scenario


def _run(tmp: Path, name: str, **over: Any) -> tuple[Path, dict[str, Any]]:
    from fogsdn.live.queueing_run import run_emulation

    sc = parse_scenario(scenario_dict(name=name, time_scale=SCALE, **over))
    out = tmp / name
    summary = run_emulation(sc, out, show_progress=False)
    return out, summary


@pytest.fixture(scope="module")
def prioritized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    before = footprint()
    out, summary = _run(tmp_path_factory.mktemp("emu"), "prio", duration_ms=400, seed=5)
    return out, summary, before


def _availability(out: Path) -> list[dict[str, str]]:
    with open(out / "availability.csv") as fh:
        return list(csv.DictReader(fh))


def _state_at(avail: list[dict[str, str]], t: float, margin: float) -> bool | None:
    """OFN availability in the data plane at model time t; None while a change is under
    way: from when the runner applied it until its rules were in, plus `margin`."""
    state = None
    for row in avail:
        applied, installed = float(row["t_applied"]), float(row["t_installed"])
        if applied > 0 and applied - margin <= t <= installed + margin:
            return None
        if installed <= t:
            state = row["state"] == "available"
    return state


def test_hp_only_ever_served_by_the_fn(prioritized: tuple) -> None:
    out, _, _ = prioritized
    rows = read_trace(out / "trace.csv")
    hp = [r for r in rows if r.cls == "hp" and r.outcome is Outcome.OK]
    assert len(hp) > 50
    assert {r.node for r in hp} == {"fn"}


def test_lp_follows_ofn_availability(prioritized: tuple) -> None:
    out, summary, _ = prioritized
    avail = _availability(out)
    assert len(avail) > 10, "the OFN should have joined and left several times"
    # a barrier reply means the table changed; new connections may take the old path
    # up to ~4.5 ms real more (docs/architecture.md); a loaded CI machine gets 20 ms
    # real (1 model ms)
    margin = 1.0
    served = Counter()
    for r in read_trace(out / "trace.csv"):
        if r.cls != "lp" or r.outcome is not Outcome.OK:
            continue
        up = _state_at(avail, r.t_send, margin)
        if up is None:
            continue
        served[(up, r.node)] += 1
        assert r.node == ("ofn1" if up else "fn"), f"{r.request_id} sent at {r.t_send}"
    assert served[(True, "ofn1")] > 20 and served[(False, "fn")] > 20
    assert summary["rule_update_ms"]["count"] == len(avail) - 1


def test_flow_table_realises_the_policy(prioritized: tuple) -> None:
    out, _, _ = prioritized
    flows = (out / "flows.txt").read_text()
    groups = (out / "groups.txt").read_text()
    assert "ct_state=+new+trk" in flows and "nw_tos=184" in flows  # DSCP 46 = TOS 184
    hp_line = next(ln for ln in flows.splitlines() if "nw_tos=184" in ln)
    assert "group:1" in hp_line
    g1 = next(ln for ln in groups.splitlines() if "group_id=1," in ln)
    assert "nat(dst=10.0.0.1)" in g1 and "10.0.0.2" not in g1  # HP: the FN only
    last = _availability(out)[-1]
    g2 = next(ln for ln in groups.splitlines() if "group_id=2," in ln)
    want = "10.0.0.2" if last["state"] == "available" else "10.0.0.1"
    assert f"nat(dst={want})" in g2 and g2.count("bucket=") == 1
    # no task needed a packet-in: the controller saw only ARP for the service address
    events = [json.loads(x) for x in (out / "controller-events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["event"] == "of_error"]
    assert len([e for e in events if e["event"] == "arp_reply"]) <= 2


def test_every_request_appears_exactly_once(prioritized: tuple) -> None:
    out, summary, _ = prioritized
    rows = read_trace(out / "trace.csv")
    ids = [r.request_id for r in rows]
    assert len(ids) == len(set(ids)) == summary["requests"]
    progress = json.loads((out / "load-engine.progress").read_text())
    sent = sum(progress[f"c{k}"][0] for k in (1, 2))
    assert sent == len(rows)
    assert {r.outcome for r in rows} <= set(Outcome)
    ok = [r for r in rows if r.outcome is Outcome.OK]
    assert len(ok) / len(rows) > 0.9
    for r in ok:
        assert r.response_ms >= r.node_ms > 0


def test_nothing_left_after_a_normal_run(prioritized: tuple) -> None:
    _, _, before = prioritized
    assert_clean(before)


def test_nodiff_split_is_consistent_with_alpha(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "nodiff", duration_ms=300, policy={"name": "nodiff", "alpha": 0.75},
                  churn={"eta": 0, "xi": 0}, workload={"lambda_hp": 0.3, "lambda_lp": 0.3,
                                                       "clients": 2})
    rows = [r for r in read_trace(out / "trace.csv") if r.outcome is not Outcome.TIMEOUT]
    ok = [r for r in rows if r.outcome is Outcome.OK or r.outcome is Outcome.BLOCKED]
    at_fn = sum(1 for r in ok if r.node == "fn")
    assert len(ok) > 100
    assert {r.node for r in ok} == {"fn", "ofn1"}
    test = binomtest(at_fn, len(ok), 0.75)
    assert test.pvalue > 0.001, (at_fn, len(ok))


def test_basic_never_uses_the_ofn(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "basic", duration_ms=200, policy={"name": "basic"},
                  churn={"eta": 0, "xi": 0})
    rows = read_trace(out / "trace.csv")
    assert len(rows) > 50
    assert {r.node for r in rows if r.outcome is Outcome.OK} == {"fn"}


def test_drop_loses_what_the_ofn_held_and_accounts_for_it(tmp_path: Path) -> None:
    out, summary = _run(tmp_path, "drop", duration_ms=300, seed=2, timeout_ms=100,
                        churn={"eta": 0.2, "xi": 0.2, "leave": "drop"})
    rows = read_trace(out / "trace.csv")
    ids = [r.request_id for r in rows]
    assert len(ids) == len(set(ids))
    lost = [r for r in rows if r.outcome is Outcome.LOST]
    dropped = sum(int(a["dropped"] or 0) for a in _availability(out))
    assert dropped > 0 and len(lost) == dropped
    assert {r.node for r in lost} == {"ofn1"} and {r.cls for r in lost} == {"lp"}


def test_sigterm_mid_run_keeps_results_and_leaves_nothing(tmp_path: Path) -> None:
    before = footprint()
    p, out = start_runner(tmp_path, "term", 3.0)
    p.send_signal(signal.SIGTERM)
    text, _ = p.communicate(timeout=60)
    assert p.returncode == 130, text.decode()[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    rows = read_trace(out / "trace.csv")
    assert 0 < len(rows) == summary["requests"]
    assert len({r.request_id for r in rows}) == len(rows)
    assert max(r.t_send for r in rows) < 1500
    assert_clean(before)


def test_per_request_policy_decides_each_connection_once(tmp_path: Path) -> None:
    """The threshold example policy runs live unchanged: one packet-in per task."""
    out, summary = _run(tmp_path, "thresh", duration_ms=250, seed=4,
                        policy={"name": "threshold", "params": {"threshold": 1}},
                        churn={"eta": 0, "xi": 0})
    rows = read_trace(out / "trace.csv")
    events = [json.loads(x) for x in (out / "controller-events.jsonl").read_text().splitlines()]
    decisions = [e for e in events if e["event"] == "decision"]
    assert len(decisions) == len(rows) > 50
    # each connection decided once: the decisions' (client, port) are the trace's, as
    # many times each (the kernel may give a port again once its connection has closed:
    # a CI run saw 7 ports of 191 reused, each a connection of its own)
    connections = Counter((r.client, int(p)) for r in rows for p in r.ports.split(">") if p)
    assert Counter((e["client"], e["port"]) for e in decisions) == connections
    for e in decisions:
        if e["cls"] == "hp":
            assert e["node"] == "fn"
        else:
            assert e["node"] == ("ofn1" if e["load"]["fn"] > 1 else "fn"), e
    served = Counter(r.node for r in rows if r.cls == "lp" and r.outcome is Outcome.OK)
    assert served["ofn1"] > 0 and served["fn"] > 0
    assert {r.node for r in rows if r.cls == "hp" and r.outcome is Outcome.OK} == {"fn"}
    # the exact prediction comes from the chain built from the policy object, and every
    # compared figure carries its interval
    assert summary["predicted"]["model"]["chain"] == "policy"
    for cls in ("hp", "lp"):
        comp = summary["comparison"][cls]
        for metric in ("W", "blocking", "outage"):
            assert comp[metric]["ci95"] is not None and comp[metric]["ci95"] >= 0, metric
        assert set(comp["percentiles"]) == {"p50", "p90", "p95", "p99"}
    # the decisions came from the controller's own count, not from asking the workers:
    # each judged against what its request met at its node (20 s runs here: 96-98 %
    # exact, mean +0.02 requests; with the workers asked at each packet-in, or arrival
    # reports cut at 10 queued datagrams, 73 % and +0.9), and the decision path timed
    dec = summary["decisions"]
    assert dec["count"] == len(decisions)
    assert 0 < dec["path_ms"]["p50"] <= dec["path_ms"]["p99"] <= dec["path_ms"]["max"]
    assert dec["path_model_ms"]["p50"] == pytest.approx(dec["path_ms"]["p50"] / SCALE)
    st = dec["staleness"]
    assert st["decisions"] > 0.95 * len(decisions) and st["reports"] >= 2 * len(rows)
    assert st["exact_share"] > 0.85 and abs(st["mean"]) < 0.15, st
    assert sum(e["seen"] == e["load"][e["node"]] for e in decisions) == len(decisions)


def test_handoff_moves_what_the_ofn_held_to_the_fn(tmp_path: Path) -> None:
    out, summary = _run(tmp_path, "handoff", duration_ms=300, seed=6,
                        churn={"eta": 1 / 3, "xi": 1 / 3, "leave": "handoff"})
    rows = read_trace(out / "trace.csv")
    assert len({r.request_id for r in rows}) == len(rows) == summary["requests"]
    moved = sum(int(a["handed_off"] or 0) for a in _availability(out))
    handed = [r for r in rows if r.error.startswith("handed off from ofn1")]
    failed = [r for r in rows if r.outcome is Outcome.LOST and "handoff" in r.error]
    assert moved > 0 and len(handed) + len(failed) == moved
    assert all(r.node == "fn" and r.outcome is Outcome.OK and r.cls == "lp" for r in handed)
    # the sojourn runs from arrival at the OFN to completion at the FN
    assert all(r.node_ms >= r.service_ms > 0 for r in handed)


def test_clean_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    """SIGKILL gives the runner no chance to tear down: `--clean` must, from its record."""
    before = footprint()
    p, _ = start_runner(tmp_path, "killed", 1.0)
    p.kill()
    p.wait(10)
    left = footprint()
    assert left["bridges"] - before["bridges"], "a killed run should leave its bridge"
    assert left["records"] - before["records"]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--clean"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "bridge fz" in r.stdout, r.stdout + r.stderr
    time.sleep(0.5)
    assert_clean(before)
    # a second clean finds nothing more
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--clean"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "nothing" in r.stdout


def test_default_run_serves_at_its_nominal_rate(tmp_path: Path) -> None:
    """The guard against the emulation's own service bias (x1.05 at the FN once): on a
    short run of the default scenario at its own time scale, the typical request is
    served for its nominal time. The median, not the mean: a loaded machine stretches
    the tail, a systematic stretch moves the median."""
    import statistics

    from fogsdn.core.scenario import load_scenario
    from fogsdn.live.proc_memory import ovs_pid
    from fogsdn.live.queueing_run import run_emulation

    sc = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(
        {"duration_ms": 3000.0, "warmup_ms": 0.0})
    summary = run_emulation(sc, tmp_path / "default", show_progress=False)
    assert summary["crashed"] is False
    assert isinstance(summary["emulation_bias"]["large"], bool)
    # each node's arrivals against their drawn instants: every request's arrival is
    # later than drawn (the client sends, the switch forwards), by well under the run
    timing = summary["arrival_timing"]
    assert set(timing) == {"fn", "ofn1"} and math.isfinite(timing["fn"]["hp"])
    assert 0 < timing["fn"]["lag_p50_ms"] < timing["fn"]["lag_p99_ms"] < 300
    # the workers run SCHED_FIFO in their containers (root; fogsdn/live/cgroups.py gives each
    # node's group its real-time share where the kernel groups it)
    assert summary["realtime_workers"] == {"fn": True, "ofn1": True}
    # so did the switch's threads, given back at teardown
    assert summary["realtime_switch"] is True
    switch = ovs_pid()
    assert switch is not None
    assert all(os.sched_getscheduler(int(t)) == os.SCHED_OTHER
               for t in os.listdir(f"/proc/{switch}/task"))
    # requests routed against the drawn OFN state: 1.4-1.6 % without steal since each new
    # connection is translated afresh (fogsdn.controller.pipeline.PerConnection), 7-8 % without
    # steal and 9-11 % at 7-14 % steal when the switch's cached flows kept the old choice
    # (docs/emulation.md). CPU the hypervisor takes delays the rule installs too (measured
    # with the fix: 5.5 % at 19 % steal, 8.9 % at 29 %), so the bound grows with it
    steal = float(summary.get("cpu_steal_share") or 0.0)
    assert summary["routing"]["checked"] > 500
    assert summary["routing"]["share"] < 0.05 + 0.15 * steal, (steal, summary["routing"])
    rows = [r for r in read_trace(tmp_path / "default" / "trace.csv")
            if r.outcome is Outcome.OK and r.nominal_ms >= 0.5]  # above timer granularity
    for node in ("fn", "ofn1"):
        ratios = [r.service_ms / r.nominal_ms for r in rows if r.node == node]
        assert len(ratios) > 100, node
        median = statistics.median(ratios)
        assert 0.995 <= median <= 1.02, (node, median)


def test_a_time_varying_workload_runs_live_phase_by_phase(tmp_path: Path) -> None:
    """workload.profile live: the clients send at twice the rates in busy phases and not
    at all in idle ones (a request may start a few model ms late, never early); the
    comparison is per phase."""
    profile = {"phases": [{"duration_ms": 100, "factor": 2.0},
                          {"duration_ms": 100, "factor": 0.0}]}
    out, summary = _run(tmp_path, "varying", duration_ms=400, seed=7,
                        workload={"profile": profile})
    rows = read_trace(out / "trace.csv")
    assert len(rows) == summary["measured"]["hp"]["count"] + summary["measured"]["lp"]["count"]
    in_idle = [r.t_send for r in rows if 100 + 5 <= r.t_send % 200 < 200]
    assert in_idle == []
    # the clients sent exactly the drawn requests: those of the profile's stream
    sc = parse_scenario(scenario_dict(name="varying", time_scale=SCALE, duration_ms=400,
                                      seed=7, workload={"profile": profile}))
    drawn = list(arrivals(sc.workload, 7, sc.duration_ms))
    assert sorted(r.request_id for r in rows) == sorted(
        f"c{a.client + 1}-{i:07d}" for a, i in _per_client_index(drawn))
    assert all(a.t_ms % 200 < 100 for a in drawn)  # drawn in busy phases only
    assert poisson.ppf(0.0005, 320) <= len(drawn) <= poisson.ppf(0.9995, 320)
    assert [p["phase"] for p in summary["phases"]] == [0, 1]
    assert summary["phases"][0]["measured"]["hp"]["count"] > 50
    assert summary["phases"][1]["outside_model"] == "no arrivals in this phase"
    assert summary["comparison"]["hp"]["W"]["predicted"] > 0  # the busy phase's alone


def _per_client_index(drawn: list[Arrival]) -> list[tuple[Arrival, int]]:
    """Each arrival with its number among its client's requests (the request id's)."""
    seen: Counter[int] = Counter()
    out = []
    for a in drawn:
        out.append((a, seen[a.client]))
        seen[a.client] += 1
    return out
