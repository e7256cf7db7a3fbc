"""Live paths as the action (seed 002a): a connection's chosen path is installed on every
switch of it, both ways, and carries the connection, while the shortest path's switches
carry nothing (root, Open vSwitch; run under the emulation lock)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT

from fogsdn.controller.pipeline import PRIO_CONNECTION_PATH
from fogsdn.core.scenario import PolicySpec, load_scenario
from fogsdn.live.live_network import live_network
from fogsdn.live.queueing_run import run_emulation
from tools.rigs.probe_network import service_session, session_result

pytestmark = pytest.mark.emulation

_PACKETS = re.compile(r"n_packets=(\d+)")


def _table(bridge: str, table: int) -> list[str]:
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge, f"table={table}"],
                       capture_output=True, text=True, timeout=10, check=True)
    return [ln for ln in r.stdout.splitlines() if "priority=" in ln]


def _packets(line: str) -> int:
    m = _PACKETS.search(line)
    assert m is not None, line
    return int(m.group(1))


def test_a_chosen_path_is_installed_end_to_end_and_carries_the_connection(
        tmp_path: Path) -> None:
    # power-greedy: on an idle network the direct link s1-s6 wakes the fewest watts, so
    # c1's connection takes it, not the shortest path s1-s3-s6 (nor s1-s5-s6)
    sc = load_scenario(ROOT / "scenarios" / "seed002a.yaml").with_overrides(
        {"policy.name": "path_fewest_switches"})
    with live_network(sc, tmp_path / "paths") as live:
        g = live.graph
        srvs, cli = service_session(live, "c1", ["srv1", "srv2"], seconds=4.0)
        time.sleep(2.0)  # the connection is established and echoing
        tables = {s: _table(live.bridges[s], 2) for s in ("s1", "s3", "s5", "s6")}
        arp = {s: [ln for ln in _table(live.bridges[s], 0) if "arp" in ln]
               for s in ("s1", "s3", "s5", "s6")}
        run = session_result(srvs[0], cli)
        for srv in srvs[1:]:
            srv.terminate()
            srv.wait(timeout=5)
    assert run["errors"] == [] and run["sent"] == run["echoed"] > 50, run
    events = [json.loads(ln) for ln in (tmp_path / "paths" / "controller-events.jsonl")
              .read_text().splitlines()]
    decisions = [e for e in events if e["event"] == "decision"]
    assert [(e["client"], e["path"]) for e in decisions] == [("c1", ["s1", "s6"])], decisions
    port, node = decisions[0]["port"], decisions[0]["node"]
    own = {s: [ln for ln in lines if f"priority={PRIO_CONNECTION_PATH}," in ln
               and (f"tp_src={port}" in ln or f"tp_dst={port}" in ln)]
           for s, lines in tables.items()}
    # s1: the way out (its conntrack and client rule bring the replies home); s6 both ways
    assert len(own["s1"]) == 1 and len(own["s6"]) == 2, own
    # dumped 2 s into the session: over a hundred pings at 10 ms intervals by then
    assert all(_packets(ln) > 50 for ln in own["s1"] + own["s6"]), own
    assert own["s3"] == own["s5"] == [], own
    # nothing went the shortest way: s3's and s5's rules towards the servers saw no packet
    server_ip = g.nodes[node]["ip"]
    for s in ("s3", "s5"):
        towards = [ln for ln in tables[s] if f"nw_dst={server_ip}" in ln
                   or f"nw_dst={g.nodes['c1']['ip']}" in ln]
        assert towards and all(_packets(ln) == 0 for ln in towards), tables[s]
    # ARP never crossed a switch link: the server's switch answered its question for the
    # client itself, and no ARP rule of s3 or s5 saw a packet
    c1_ip = g.nodes["c1"]["ip"]
    answered = [ln for ln in arp["s6"] if "arp_op=1" in ln and f"arp_tpa={c1_ip}" in ln]
    assert len(answered) == 1 and _packets(answered[0]) >= 1, arp["s6"]
    assert all(_packets(ln) == 0 for s in ("s3", "s5") for ln in arp[s]), arp


def test_path_cpn_learns_live_from_the_controllers_measured_response_times(
        tmp_path: Path) -> None:
    """Seed 002a's per-request RNN is told each connection's measured time live, as the
    simulator tells it each request's: its learning curve carries answered requests'
    response times (none were told before the controller called `answered`)."""
    sc = load_scenario(ROOT / "scenarios" / "seed002a.yaml").model_copy(update={
        "duration_ms": 300.0,  # some 90 connections: four epochs of 20
        "policy": PolicySpec(name="path_cpn", params={"epoch_requests": 20, "seed": 1})})
    summary = run_emulation(sc, tmp_path / "live", show_progress=False)
    assert summary["policy"]["name"] == "path_cpn" and summary["policy"]["errors"] == 0
    curve = (tmp_path / "live" / "learning_curve.csv").read_text().splitlines()
    cols = curve[0].split(",")
    rows = [dict(zip(cols, ln.split(","), strict=True)) for ln in curve[1:]]
    told = [float(r["response_ms"]) for r in rows if r["response_ms"] != "nan"]
    assert len(rows) >= 3 and len(told) >= len(rows) - 1, curve
    # a request is two round trips plus its service: told times are a model ms or more,
    # and below the client's timeout on this idle-to-busy profile
    assert all(0.5 < t < sc.timeout_ms for t in told), told
    events = [json.loads(x) for x in (tmp_path / "live" / "controller-events.jsonl")
              .read_text().splitlines()]
    assert not [e for e in events if e["event"] in ("policy_error", "learner_untold")]
