"""Live topologies: link delay accuracy, a delay change at run time, a link failure with
re-route, and W_e2e on default_delay (root, Open vSwitch; run under the emulation lock)."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import load_scenario, parse_scenario
from fogsdn.core.topology import LinkSpec
from fogsdn.live.live_network import live_network
from fogsdn.live.queueing_run import run_emulation
from tools.rigs.probe_network import (
    measure_reroutes,
    ping_rtts_ms,
    session_result,
    tcp_echo_session,
)

pytestmark = pytest.mark.emulation


def _close(measured: float, configured: float, rel: float, floor_ms: float = 0.5) -> bool:
    return abs(measured - configured) <= max(floor_ms, rel * configured)


def test_link_delay_is_accurate_and_changes_at_run_time(tmp_path: Path) -> None:
    """Ping c1 -> fn over three links in a row (six element traversals per round trip):
    never faster than configured, and a run-time change of the delay moves the round
    trip by what was configured. (Each traversal also costs the relay some scheduling
    time on a loaded machine; the links benchmark measures one element alone.)"""
    # c1 - s1 - s2 - fn: three links of 1 model ms = 5 real ms each way at time scale 5
    sc = parse_scenario(scenario_dict(time_scale=5, topology={
        "kind": "line", "length": 2, "link": {"delay_ms": 1.0}, "hop_cost": "keep"}))
    with live_network(sc, tmp_path / "delay") as live:
        assert live.links["mechanism"] in ("netem", "userspace") and live.links["shaped"] == 5
        before = ping_rtts_ms(live, "c1", "fn", count=40)
        assert min(before) >= 2 * 3 * 5.0 - 0.2, before
        assert statistics.median(before) <= 1.2 * 2 * 3 * 5.0, before
        for link in ("c1-s1", "s1-s2", "fn-s2"):
            live.update_link(link, LinkSpec(delay_ms=3.0))
        after = ping_rtts_ms(live, "c1", "fn", count=40)
        assert min(after) >= 2 * 3 * 15.0 - 0.2, after
        change = statistics.median(after) - statistics.median(before)
        # 10 %: a clean-clone CI run on a machine losing CPU to its hypervisor measured
        # +63-64 ms (ping's own wake-ups); no change or a doubled one is 0 or 120 ms
        assert _close(change, 2 * 3 * 10.0, 0.10), (before, after)


def test_the_cost_per_hop_is_measured_and_deducted_and_its_probe_leaves_nothing(
        tmp_path: Path) -> None:
    """c1 - s1 - s2 - fn, three links of 0.1 ms each way: with `hop_cost: deduct` each
    element delays 0.1 ms less the measured cost per hop, so the round trip is shorter
    than with `keep` by six times that (0.1 at most); the probe chain is gone after."""
    medians: dict[str, float] = {}
    reports: dict[str, dict[str, object]] = {}
    for mode in ("keep", "deduct"):
        sc = parse_scenario(scenario_dict(time_scale=1, topology={
            "kind": "line", "length": 2, "link": {"delay_ms": 0.1}, "hop_cost": mode}))
        with live_network(sc, tmp_path / mode) as live:
            tag = live.tag
            report = dict(live.links["hop_cost"])
            assert set(live.supervisor.record.bridges) >= {f"{tag}hb0", f"{tag}hb2"}
            medians[mode] = statistics.median(ping_rtts_ms(live, "c1", "fn", count=60))
        reports[mode] = report
        assert not [b for b in subprocess.run(["ovs-vsctl", "list-br"], capture_output=True,
                                              text=True).stdout.split() if b.startswith(tag)]
        assert not list(Path("/sys/class/net").glob(f"{tag}h*"))
    per_hop = float(reports["deduct"]["per_hop_real_ms"])  # type: ignore[arg-type]
    assert 0.005 < per_hop < 1.0, reports
    kept = reports["keep"]["applied_model_ms"]
    assert isinstance(kept, dict) and {"c1-s1", "s1-s2", "fn-s2"} <= set(kept), reports
    assert set(kept.values()) == {0.1}, reports  # keep: every element as configured
    applied = reports["deduct"]["applied_model_ms"]
    assert applied == pytest.approx({k: max(0.0, 0.1 - per_hop) for k in applied}, abs=1e-5)
    expected = 6 * min(0.1, per_hop)
    print("hop cost", per_hop, medians, "expected shorter by", expected)
    # every element delays at least what it was given, both ways over three links
    assert medians["keep"] >= 6 * 0.1 and medians["deduct"] >= 6 * min(applied.values()), (
        medians, reports)
    # Not asserted: that deduct's round trip is shorter by `expected`. Two networks built
    # one after the other differ by more than that here (on a fresh machine, 2026-12-06:
    # keep - deduct = +0.23, -0.13, -0.10 ms against +0.19 to +0.24 expected; the paired
    # rounds in docs/links.md, "The cost of a hop", found +0.013 +- 0.012 model ms)


def test_link_failure_reroutes_and_keeps_established_connections(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "multipath.yaml").with_overrides(
        {"topology.link.delay_ms": 0.0})
    with live_network(sc, tmp_path / "fail") as live:
        fn_srv, fn_cli = tcp_echo_session(live, "c1", "fn", seconds=6.0)
        cloud_srv, cloud_cli = tcp_echo_session(live, "c2", "cloud", seconds=6.0, port=7201)
        # off every path: re-route rewrites all forwarding and must break nothing
        off = measure_reroutes(live, "c3", "ofn1", "s3-s4", failures=2)
        # on the short path: traffic moves to s3-s4 and back
        on = measure_reroutes(live, "c3", "ofn1", "s1-s2", failures=5)
        fn_run = session_result(fn_srv, fn_cli)
        cloud_run = session_result(cloud_srv, cloud_cli)
        t_end = time.monotonic()  # the teardown takes every link down after this
    assert [o is not None and o.lost for o in off] == [0, 0], off
    print("re-route", on)
    # each failure on the path recovers within 1 s; one the real-time switch's fast-failover
    # group takes before the next datagram is hitless (lost 0); at least one costs datagrams,
    # so the failures did hit the stream's path
    # (a recovery at or just before the failure's instant: the new path's first datagram
    # overtook the last lost one's slot)
    assert all(o is not None and (o.lost == 0 or o.recovery_ms < 1000) for o in on), on
    assert sum(o.lost for o in on if o is not None) > 0, on
    for run in (fn_run, cloud_run):
        assert run["errors"] == [] and run["sent"] == run["echoed"] > 50, run
    events = [json.loads(ln) for ln in (tmp_path / "fail" / "controller-events.jsonl")
              .read_text().splitlines()]
    reroutes = [e for e in events if e["event"] == "reroute" and e["t_event"] < t_end]
    assert [(e["link"], e["up"]) for e in reroutes] == (
        [("s3-s4", False), ("s3-s4", True)] * 2 + [("s1-s2", False), ("s1-s2", True)] * 5)
    assert all(e["barrier_ok"] for e in reroutes)


def test_default_delay_adds_the_paths_round_trips_live(tmp_path: Path) -> None:
    """W_e2e - W is two round trips of the path (TCP connect, request and reply): 16 model ms,
    at the scenario's own time scale (10). Never less than the path gives; the hosts' own
    cost comes on top: ~2 real ms (~1 %) on a quiet machine, up to ~11 real ms (+7 %) on a
    loaded CI machine, hence the one-sided allowance."""
    sc = load_scenario(ROOT / "scenarios" / "default_delay.yaml").with_overrides(
        {"duration_ms": 1000, "warmup_ms": 20})
    summary = run_emulation(sc, tmp_path / "dd", show_progress=False)
    assert summary["links"]["mechanism"] in ("netem", "userspace")
    for cls in ("hp", "lp"):
        m = summary["measured"][cls]
        assert m["ok"] > 50
        assert 16.0 * 0.98 <= m["W_e2e"] - m["W"] <= 16.0 * 1.15, m
