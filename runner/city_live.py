"""Seed 003's city, live: fog daemons and mobile clients on an emulated city network.

One network for the whole study (`topologies.city_net`: a switch per fog node and per
client, link delays from the latency model, under our controller), built for the
largest client count; then, per selector and client/slot ratio, fresh fog daemons
(`nodes.city_fog`) and that many clients (`nodes.city_client`) for `duration_s`
seconds. Meanwhile the runner moves the clients (random waypoint or a trace, every
`tick_s`) and changes their links' delays to follow them, changes each fog node's
access delay to follow its clients (eqs. 8, 9, 12), and writes the configured RTTs
(the truth file) that the omniscient selector and the scores read. Every point starts
from the same positions and walks, as in the simulator.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fogsdn.scenario import NodeSpec, Role, Scenario, Workload
from fogsdn.topology import LinkSpec
from nodes.city_fog import CityConfig, FogInfo, write_json_atomic
from runner.cleanup import die_with_parent
from runner.emulate import live_network
from sim.city_output import live_metrics
from sim.city_study import client_params
from topologies.city_latency import LatencyParams, load_ms
from topologies.city_layout import (
    CityLayout,
    PositionTrace,
    Waypoint,
    WaypointParams,
    advance,
    parse_trace,
    random_positions,
    start_walker,
)
from topologies.city_net import (
    CityStudy,
    city_topology,
    client_fog_ms,
    client_name,
    client_switch,
    fog_access_ms,
    fog_switch,
    link_id,
    true_rtt_ms,
)

ROOT = Path(__file__).resolve().parent.parent
Point = tuple[float, float]


def live_scenario(study: CityStudy, layout: CityLayout, positions: list[Point],
                  p: LatencyParams) -> Scenario:
    """The testbed scenario carrying the city's graph: fog nodes as FNs, no workload of
    its own (the city's clients and fog daemons make the traffic)."""
    return Scenario(
        name=study.name, seed=study.seed, duration_ms=study.duration_s * 1000 / study.time_scale,
        time_scale=study.time_scale, containers=False,
        # a nominal rate: live_network starts no workload clients; the city clients run
        workload=Workload(lambda_hp=0.0, lambda_lp=0.001, clients=len(positions)),
        nodes=tuple(NodeSpec(name=s.name, role=Role.FN, mu=1.0, capacity=s.slots)
                    for s in layout.fog_nodes),
        topology=city_topology(layout, positions, p))


def start_positions(study: CityStudy, layout: CityLayout, n: int) -> list[Point]:
    """The simulator's draw for n clients (same seed, same streets)."""
    return random_positions(n, layout.side_m, random.Random(f"clients-{study.seed}"))


class Mobility:
    """Where each client is, `dt` later."""

    def __init__(self, study: CityStudy, layout: CityLayout, n: int) -> None:
        self.kind = study.mobility.kind
        self.wp = WaypointParams(layout.side_m, study.mobility.speed_mps, study.mobility.pause_s)
        self.rng = random.Random(f"move-{study.seed}")
        self.trace: PositionTrace | None = None
        self.names: list[str] = []
        if self.kind == "trace":
            assert study.mobility.trace is not None
            self.trace = parse_trace(Path(study.mobility.trace).read_text().splitlines(),
                                     layout.side_m)
            self.names = self.trace.clients()
            if len(self.names) < n:
                raise ValueError(f"mobility.trace: has {len(self.names)} clients, "
                                 f"the run needs {n}")
            start = [self.trace.at(c, 0.0) for c in self.names[:n]]
        else:
            start = start_positions(study, layout, n)
        self.walkers: list[Waypoint] = [
            start_walker(p0, self.wp, random.Random(f"walk-{study.seed}-{i}"))
            for i, p0 in enumerate(start)]

    def positions(self, t_s: float, dt_s: float) -> list[Point]:
        if self.kind == "static":
            return [w.position for w in self.walkers]
        if self.trace is not None:
            return [self.trace.at(c, t_s) for c in self.names[:len(self.walkers)]]
        self.walkers = [advance(w, dt_s, self.wp, self.rng) for w in self.walkers]
        return [w.position for w in self.walkers]


class CityLive:
    def __init__(self, study: CityStudy, out: Path, stop: threading.Event,
                 show: bool = True) -> None:
        self.study = study
        self.out = out
        self.stop = stop
        self.show = show
        self.p = study.params()
        self.layout = study.layout()
        self.sites = {s.name: s for s in self.layout.fog_nodes}
        self.fog_index = {s.name: i for i, s in enumerate(self.layout.fog_nodes)}
        self.emu: Any = None
        self.current: dict[str, float] = {}  # link id -> model ms now
        self.link_updates = 0

    def _say(self, msg: str) -> None:
        if self.show:
            print(f"[city] {msg}", flush=True)

    def _set(self, lid: str, delay_ms: float) -> None:
        if abs(self.current.get(lid, -1.0) - delay_ms) < 1e-4:
            return
        self.emu.network.update_link(lid, LinkSpec(delay_ms=delay_ms))
        self.current[lid] = delay_ms
        self.link_updates += 1

    def _place(self, positions: list[Point], members: dict[str, int]) -> None:
        for k, pos in enumerate(positions):
            for s in self.layout.fog_nodes:
                i = self.fog_index[s.name]
                self._set(link_id(client_switch(k), fog_switch(i)),
                          client_fog_ms(pos, s, self.layout, self.p))
        for name, s in self.sites.items():
            self._set(self.emu.network.host_link(name), fog_access_ms(members[name], s, self.p))

    def _truth(self, positions: list[Point], members: dict[str, int]) -> dict[str, Any]:
        out = {}
        for k, pos in enumerate(positions):
            rtt = {n: true_rtt_ms(pos, s, members[n], self.layout, self.p)
                   for n, s in self.sites.items()}
            join = {n: true_rtt_ms(pos, s, members[n] + 1, self.layout, self.p)
                    for n, s in self.sites.items()}
            out[client_name(k)] = {"rtt": rtt, "join_rtt": join, "pos": pos}
        return {"t": time.monotonic(), "clients": out}

    def _popen(self, host: str, label: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.out / f"{label}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = self.emu.net.get(host).popen(
            [sys.executable, "-m", *args], cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
            env={"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"},
            preexec_fn=die_with_parent)
        log.close()
        self.emu.rec.add_pid(label, proc.pid)
        return proc

    def run_point(self, selector: str, ratio: float) -> dict[str, Any]:
        st = self.study
        n = st.clients_at(ratio)
        point = self.out / f"{selector}-{ratio:g}"
        point.mkdir(parents=True, exist_ok=True)
        state_dir = self.emu.sock_dir / f"{selector}-{ratio:g}"
        state_dir.mkdir(parents=True, exist_ok=True)
        mobility = Mobility(st, self.layout, n)
        positions = [w.position for w in mobility.walkers]
        members = dict.fromkeys(self.sites, 0)
        self._place(positions, members)
        truth_path = state_dir / "truth.json"
        write_json_atomic(truth_path, self._truth(positions, members))
        epoch = time.monotonic() + 3.0  # time for the processes to start
        cfg = CityConfig(
            fogs={name: FogInfo(name, self.emu.graph.nodes[name]["ip"], s.slots,
                                tuple(load_ms(c, s.slots, self.p) for c in range(s.slots + 2)))
                  for name, s in self.sites.items()},
            clients={client_name(k): self.emu.graph.nodes[client_name(k)]["ip"]
                     for k in range(n)},
            time_scale=st.time_scale, state_dir=state_dir, epoch=epoch,
            duration_s=st.duration_s, seed=st.seed, client=client_params(st))
        cfg_path = cfg.write(point / "city.json")
        rt = ["--realtime"] if st.realtime else []
        fogs = {name: self._popen(name, f"{point.name}-{name}",
                                  ["nodes.city_fog", "--config", str(cfg_path), "--name", name,
                                   *rt])
                for name in self.sites}
        clients = {c: self._popen(c, f"{point.name}-{c}", [
            "nodes.city_client", "--config", str(cfg_path), "--name", c, "--selector", selector,
            "--truth", str(truth_path), "--out", str(point / f"{c}.json"), *rt])
            for c in cfg.clients}
        updates0 = self.link_updates
        last = time.monotonic()
        while time.monotonic() < epoch + st.duration_s and not self.stop.is_set():
            time.sleep(st.tick_s)
            now = time.monotonic()
            for name in self.sites:
                try:
                    members[name] = int(json.loads(
                        (state_dir / f"{name}.json").read_text())["members"])
                except (OSError, ValueError, KeyError):
                    pass
            if now > epoch:
                positions = mobility.positions(now - epoch, now - last)
            last = now
            self._place(positions, members)
            write_json_atomic(truth_path, self._truth(positions, members))
        if self.stop.is_set():  # interrupted: the clients write what they have now
            for proc in clients.values():
                proc.terminate()
        for c, proc in clients.items():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.terminate()
                self._say(f"client {c} did not finish; stopped")
        for proc in fogs.values():
            proc.terminate()
        for proc in fogs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        results = {}
        for c in clients:
            try:
                results[c] = json.loads((point / f"{c}.json").read_text())
            except (OSError, json.JSONDecodeError):
                self._say(f"client {c} left no result (see {point.name}-{c}.log)")
        fog_states = {}
        for name in self.sites:
            try:
                fog_states[name] = json.loads((state_dir / f"{name}.json").read_text())
            except (OSError, json.JSONDecodeError):
                self._say(f"fog node {name} left no state (see {point.name}-{name}.log)")
        (point / "fogs.json").write_text(json.dumps(fog_states, indent=1))
        row: dict[str, Any] = {"selector": selector, "ratio": ratio, "clients": n,
                               "slots": self.layout.total_slots, "seed": st.seed,
                               "duration_s": st.duration_s, "engine": "emulate"}
        row |= live_metrics(results, fog_states)
        row["link_updates"] = self.link_updates - updates0
        row["clients_reporting"] = len(results)
        row["fogs_reporting"] = len(fog_states)
        return row

    def run(self) -> list[dict[str, Any]]:
        st = self.study
        self.out.mkdir(parents=True, exist_ok=True)
        k = st.max_clients
        positions = start_positions(st, self.layout, k)
        sc = live_scenario(st, self.layout, positions, self.p)
        t0 = time.monotonic()
        rows: list[dict[str, Any]] = []
        with live_network(sc, self.out / "network") as emu:
            self.emu = emu
            assert emu.network is not None
            for lid, (u, v) in ((d["id"], (u, v)) for u, v, d in emu.graph.edges(data=True)):
                self.current[lid] = float(emu.graph.edges[u, v]["delay_ms"])
            self._say(f"{len(self.sites)} fog nodes ({self.layout.total_slots} slots), {k} "
                      f"client hosts, {len(emu.network.elements)} link elements up in "
                      f"{time.monotonic() - t0:.1f} s")
            for selector in st.selectors:
                for ratio in st.ratios:
                    if self.stop.is_set():
                        break
                    row = self.run_point(selector, ratio)
                    rows.append(row)
                    self._say(f"{selector:>10} ratio {ratio:g}: {row['clients']} clients, "
                              f"latency {row['mean_latency_ms']:.2f} ms, lost "
                              f"{row['client_lost']:.2f}, optimal {row['optimal_rate']:.0%}, "
                              f"probes {row['probe_messages']}, coord err "
                              f"{row['coord_median_rel_error']:.0%}")
        return rows


def run_city_live(study: CityStudy, out: Path, stop: threading.Event | None = None,
                  show: bool = True) -> list[dict[str, Any]]:
    return CityLive(study, out, stop or threading.Event(), show).run()
