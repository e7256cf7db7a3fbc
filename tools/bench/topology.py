"""Topology sections of scripts/bench_links.py (tools/bench/links.py): re-route time and
start-up time (docs/benchmarks.md). Each takes bench_links' context and returns its JSON
keys; needs root, Open vSwitch and the emulation lock.
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from fogsdn.core.scenario import Scenario, parse_scenario
from fogsdn.live.live_network import live_network
from tools.bench.common import ROOT
from tools.rigs.probe_network import measure_reroutes, ping_rtts_ms
from tools.rigs.traffic_probe import Outage

REROUTE_FAILURES = 100
STARTUP_SWITCHES, STARTUP_FOG, STARTUP_CLIENTS = 50, 51, 149  # 200 hosts in one /24


def _pcts(values: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(values, 50)), 3),
            "p99": round(float(np.percentile(values, 99)), 3)}


def _scenario(name: str, nodes: list[dict[str, Any]], clients: int,
              topology: dict[str, Any]) -> Scenario:
    return parse_scenario({
        "name": name, "duration_ms": 1000, "time_scale": 5,
        "workload": {"lambda_hp": 0.1, "lambda_lp": 0.1, "clients": clients},
        "nodes": nodes, "churn": {"eta": 0, "xi": 0}, "topology": topology,
    }, source=name)


def reroute_section(ctx: Any) -> dict[str, Any]:
    """Re-route after a link failure, with the controller and paused (failover_only)."""
    failures = int(getattr(ctx, "failures", REROUTE_FAILURES))
    sc = _scenario("bench-reroute", [{"name": "fn", "role": "fn", "mu": 1, "capacity": 5},
                                     {"name": "ofn1", "role": "ofn", "mu": 1, "capacity": 5}],
                   2, {"kind": "multipath"})
    with live_network(sc, Path(ctx.state_dir) / "reroute") as live:
        outages = measure_reroutes(live, "c1", "fn", "s1-s2", failures)
        events = [json.loads(ln) for ln in
                  (live.out / "controller-events.jsonl").read_text().splitlines()]
        assert live.controller is not None
        live.controller.send_signal(signal.SIGSTOP)  # PortStatus then waits in its socket
        try:
            alone = measure_reroutes(live, "c1", "fn", "s1-s2", max(1, failures // 5))
        finally:
            live.controller.send_signal(signal.SIGCONT)
    # the controller's own share: PortStatus in to barrier replies back, per link-down
    control = [(e["t_installed"] - e["t_event"]) * 1000.0 for e in events
               if e.get("event") == "reroute" and not e["up"]]
    out: dict[str, Any] = {"reroute_ms": {**_outage_figures(outages), "failures": failures,
                                          "controller_ms": _pcts(control) if control else None,
                                          "failover_only": _outage_figures(alone)}}
    r = out["reroute_ms"]
    for label, f in (("with the controller", r), ("fast failover alone", r["failover_only"])):
        print(f"  {label}, {f['recovered']} of {f['failures']} failures recovered, p50 / p99 "
              f"ms: sending time lost {f['p50']:.2f} / {f['p99']:.2f}; receiver's stall "
              f"{f['stall_ms']['p50']:.2f} / {f['stall_ms']['p99']:.2f}; first datagram on "
              f"the new path {f['recovery_ms']['p50']:.2f} / {f['recovery_ms']['p99']:.2f}",
              flush=True)
    print(f"  the controller's re-route (PortStatus to barrier): p50 "
          f"{r['controller_ms']['p50'] if control else float('nan'):.2f} ms", flush=True)
    return out


def _outage_figures(outages: list[Outage | None]) -> dict[str, Any]:
    """p50/p99 of the sending time lost (the headline), of the receiver's stall and of
    the first datagram on the new path (docs/topologies.md, Re-route)."""
    got = [o for o in outages if o is not None]
    return {**_pcts([o.lost_ms for o in got]),
            "stall_ms": _pcts([o.stall_ms for o in got]),
            "recovery_ms": _pcts([o.recovery_ms for o in got]),
            "failures": len(outages), "recovered": len(got),
            "hitless": sum(1 for o in got if o.lost == 0)}


def _startup_topology() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    switches = [f"s{i}" for i in range(1, STARTUP_SWITCHES + 1)]
    links = [{"a": a, "b": b} for a, b in zip(switches, switches[1:], strict=False)]
    links += [{"a": switches[i], "b": switches[i + 5]} for i in range(0, STARTUP_SWITCHES - 5, 5)]
    nodes = [{"name": f"f{i}", "role": "fn", "mu": 1, "capacity": 5}
             for i in range(1, STARTUP_FOG + 1)]
    hosts = [n["name"] for n in nodes] + [f"c{k}" for k in range(1, STARTUP_CLIENTS + 1)]
    place = {h: switches[i % STARTUP_SWITCHES] for i, h in enumerate(hosts)}
    return nodes, {"kind": "graph", "switches": switches, "links": links, "hosts": place}


def _plain_mininet_seconds(sc: Scenario) -> float:
    """The same graph as a plain Mininet network (no controller): build and start."""
    script = """
import time
from fogsdn.core.scenario import parse_scenario, scenario_graph
from mininet.link import TCULink
from mininet.net import Mininet
from mininet.node import OVSSwitch
import json, sys
sc = parse_scenario(json.loads(sys.stdin.read()))
g = scenario_graph(sc)
t0 = time.monotonic()
net = Mininet(topo=None, switch=OVSSwitch, link=TCULink, controller=None, build=False,
              waitConnected=False)
names = {}
for n, d in g.nodes(data=True):
    if d["kind"] == "switch":
        names[n] = "bm" + n
        net.addSwitch(names[n], dpid=f"{d['dpid']:016x}", datapath="user",
                      protocols="OpenFlow13", failMode="standalone")
    else:
        net.addHost(n, ip=d["ip"] + "/24", mac=d["mac"])
for u, v, d in g.edges(data=True):
    net.addLink(names.get(u, u), names.get(v, v))
net.build()
net.start()
print(time.monotonic() - t0, flush=True)
net.stop()
"""
    r = subprocess.run([sys.executable, "-c", script],
                       input=json.dumps(sc.to_dict()), capture_output=True, text=True,
                       cwd=str(ROOT), timeout=600, env={"PYTHONPATH": str(ROOT),
                                                        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if r.returncode != 0:
        raise RuntimeError(f"plain Mininet failed: {r.stderr.strip().splitlines()[-1:]}")
    return float(r.stdout.strip().splitlines()[-1])


def startup_section(ctx: Any) -> dict[str, Any]:
    nodes, topology = _startup_topology()
    sc = _scenario("bench-startup", nodes, STARTUP_CLIENTS, topology)
    t0 = time.monotonic()
    with live_network(sc, Path(ctx.state_dir) / "startup") as live:
        ours = time.monotonic() - t0
        timings = dict(live.timings)
        rtt = statistics.median(ping_rtts_ms(live, f"c{STARTUP_CLIENTS}", "f1", count=10))
    plain = _plain_mininet_seconds(sc)
    out = {"startup": {"switches": STARTUP_SWITCHES, "hosts": STARTUP_FOG + STARTUP_CLIENTS,
                       "seconds": round(ours, 2), "mininet_seconds": round(plain, 2),
                       "ratio": round(ours / plain, 2), "phases_s": timings,
                       "ping_far_hosts_ms": round(rtt, 3)}}
    s = out["startup"]
    print(f"  start-up, {s['switches']} switches + {s['hosts']} hosts: {s['seconds']:.1f} s "
          f"(controller, network, every table in) vs plain Mininet {s['mininet_seconds']:.1f} s "
          f"(x{s['ratio']:.2f}); ping across it {rtt:.2f} ms", flush=True)
    return out
