"""Seed 003's city, live: fog daemons and mobile clients on one emulated city network.

Per selector and client/slot ratio it starts fresh daemons and clients, moves the
clients by changing link delays and writes the truth file (docs/coordinates.md,
"Runner"); supervised as the queueing run, with the same exit codes and summary keys.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from fogsdn.city.client_engine import ENGINE_STATS
from fogsdn.city.fog_daemon import CityConfig, FogInfo, MemberBoard, member_board_path
from fogsdn.city.geo_latency import LatencyParams, load_ms, processing_ms
from fogsdn.city.layout import (
    CityLayout,
    PositionTrace,
    Waypoint,
    WaypointParams,
    advance,
    random_positions,
    read_position_trace,
    start_walker,
)
from fogsdn.city.map_view import CityNow, CityView, start_city_view
from fogsdn.city.sim_output import live_metrics, turnaround_columns
from fogsdn.city.study_spec import (
    CityStudy,
    city_star_topology,
    city_topology,
    client_fog_matrix,
    client_name,
    client_switch,
    fog_access_ms,
    fog_pair_rtt_ms,
    fog_switch,
    link_id,
    star_peer_delays,
)
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.network_spec import FogHost, NetworkSpec
from fogsdn.core.scenario import Role
from fogsdn.core.summary import (
    LinksReport,
    RunOutcome,
    json_float,
    json_int,
    json_list,
    json_object,
    write_summary,
)
from fogsdn.core.topology import LinkSpec
from fogsdn.live.live_network import LiveNetwork, new_supervisor
from fogsdn.live.live_view import ViewConfig
from fogsdn.live.proc_memory import MemoryPeak, MemorySummary
from fogsdn.live.results import crash_report
from fogsdn.netem.cluster_plan import ClusterSpec
from fogsdn.view.server import ViewServer

Point = tuple[float, float]


def city_network(study: CityStudy, layout: CityLayout, positions: list[Point],
                 p: LatencyParams) -> NetworkSpec:
    """The city's network: its fog sites as hosts, a client host per position, and the
    star or explicit graph; the city's own processes make the traffic."""
    return NetworkSpec(
        name=study.name, seed=study.seed, time_scale=study.time_scale,
        fog_hosts=tuple(FogHost(s.name, Role.FN) for s in layout.fog_nodes),
        clients=len(positions),
        topology=city_star_topology(layout, len(positions)) if study.network == "star"
        else city_topology(layout, positions, p),
        # a probe to a node not yet talked to would otherwise pay an ARP exchange over
        # the node's emulated access link: one more round trip (measured: a tenth of the
        # load-aware selector's probes at the paper's scale came back one RTT late)
        static_neighbours=True)


CLIENTS_END_S = 15.0  # for the client engine after the point's end (a Meridian query's wait)
EPOCH_AFTER_START_S = 2.0  # from the last process started to the point's epoch
# how often the fog nodes' access links catch up with their member counts (real s): a
# tick (`tick_s` model s, 1-2 real s) spans several joins and leaves at a node
LOAD_POLL_S = 0.01


def start_positions(study: CityStudy, layout: CityLayout, n: int) -> list[Point]:
    """The simulator's draw for n clients (same seed, same streets)."""
    return random_positions(n, layout.side_m, random.Random(f"clients-{study.seed}"))


class Mobility:
    """Where each client is, `dt` later."""

    def __init__(self, study: CityStudy, layout: CityLayout, n: int) -> None:
        self.kind = study.mobility.kind
        self.wp = WaypointParams(layout.side_m, study.mobility.speed_mps, study.mobility.pause_s)
        self.trace: PositionTrace | None = None
        self.names: list[str] = []
        if self.kind == "trace":
            assert study.mobility.trace is not None
            self.trace = read_position_trace(Path(study.mobility.trace), layout.side_m)
            self.names = self.trace.clients()
            if len(self.names) < n:
                raise ValueError(f"mobility.trace: has {len(self.names)} clients, "
                                 f"the run needs {n}")
            start = [self.trace.at(c, 0.0) for c in self.names[:n]]
        else:
            start = start_positions(study, layout, n)
        # each client's own draws, as the simulator's: the same walk in both engines
        self.rngs = [random.Random(f"walk-{study.seed}-{i}") for i in range(len(start))]
        self.walkers: list[Waypoint] = [start_walker(p0, self.wp, rng)
                                        for p0, rng in zip(start, self.rngs, strict=True)]

    def positions(self, t_s: float, dt_s: float) -> list[Point]:
        if self.kind == "static":
            return [w.position for w in self.walkers]
        if self.trace is not None:
            return [self.trace.at(c, t_s) for c in self.names[:len(self.walkers)]]
        self.walkers = [advance(w, dt_s, self.wp, rng)
                        for w, rng in zip(self.walkers, self.rngs, strict=True)]
        return [w.position for w in self.walkers]


class ClientTruth(TypedDict):
    """A client's truth file entry: its load-free RTT to each node (model ms) and where
    it is (`fogsdn.city.mobile_client.Truth` reads `static`)."""

    static: dict[str, float]
    pos: Point


class CityScale(TypedDict):
    fog_nodes: int
    slots: int
    clients: int  # the most clients of any point (one host each)


class CityPointReport(TypedDict):
    """summary.json `points`: how one point went, beside its row (a live row's columns)."""

    selector: str
    ratio: float
    clients: int
    clients_reporting: int
    fogs_reporting: int
    rtt_excess_ms: float
    turnaround_real_ms_mean: float
    turnaround_real_ms_max: float
    spawned_s: float
    tick_busy_ms: float
    client_engine: dict[str, float]


class CitySummary(RunOutcome):
    """summary.json of a live city study: how the run went (`RunOutcome`, as every live
    run), the scale, start-up, memory and the links, and each point's own figures."""

    engine: Literal["emulate"]
    study: Literal["city"]
    scenario: str
    network: str  # star | graph
    cpus: int | None
    scale: CityScale
    startup_s: float
    peak_memory_mb: float
    offset_ms: float  # median task RTT minus the configured one, model ms
    startup: dict[str, float]
    memory: MemorySummary
    links: LinksReport
    link_elements: int
    points: list[CityPointReport]
    # a run over several servers (fogsdn.live.cluster_site.ClusterSite.report)
    cluster: NotRequired[Mapping[str, object]]
    notes: NotRequired[list[str]]


@dataclass
class CityLiveResult:
    """The points' rows (the simulator's columns, and the live ones) and summary.json."""

    rows: list[dict[str, object]]
    summary: CitySummary


class CityLive:
    def __init__(self, study: CityStudy, out: Path, stop: threading.Event,
                 show: bool = True, view: ViewConfig | None = None,
                 cluster: ClusterSpec | None = None) -> None:
        self.study = study
        self.cluster = cluster  # the servers the network runs on (docs/scale-out.md)
        self.mirrors: dict[str, subprocess.Popen[Any]] = {}  # server -> its site_mirror
        self.mirrored_counts: dict[str, int] = {}  # the board as the mirrors have it
        self.clients_away: set[str] = set()  # clients on a server, not this machine
        self.view_config = view
        self.view: CityView | None = None
        self.out = out
        self.stop = stop
        self.show = show
        self.p = study.params()
        self.layout = study.layout()
        self.sites = {s.name: s for s in self.layout.fog_nodes}
        self.live: LiveNetwork | None = None
        self.current: dict[str, float] = {}  # link id -> model ms now
        self.tables: dict[str, dict[str, float]] = {}  # star: fog host link -> its table
        self._hosts_at_start: list[Point] = []
        self.placed = np.zeros((0, 0))  # the clients' `client_fog_matrix` now
        self.members: dict[str, int] = dict.fromkeys(self.sites, 0)  # the nodes' counts
        self.link_updates = 0
        self.memory = MemoryPeak(os.getpid())
        self.startup_s = math.nan
        self.elements = 0

    def _say(self, msg: str) -> None:
        if self.show:
            print(f"[city] {msg}", flush=True)

    @property
    def net(self) -> LiveNetwork:
        assert self.live is not None, "the city network is not up"
        return self.live

    def _set(self, lid: str, delay_ms: float) -> None:
        if abs(self.current.get(lid, -1.0) - delay_ms) < 1e-4:
            return
        self.net.update_link(lid, LinkSpec(delay_ms=delay_ms))
        self.current[lid] = delay_ms
        self.link_updates += 1

    def _place(self, positions: list[Point]) -> None:
        """The clients' paths to the fog nodes where they stand now."""
        if self.study.network == "star":
            if not self._hosts_at_start:
                self._hosts_at_start = start_positions(self.study, self.layout,
                                                       self.study.max_clients)
            # the hosts of no client this point stand where they started
            positions = [*positions, *self._hosts_at_start[len(positions):]]
        self.placed = client_fog_matrix(positions, self.layout, self.p)
        self._write_delays()

    def _load_links(self, members: dict[str, int]) -> None:
        """Each fog node's load term follows its member count on the board."""
        if members != self.members:
            self.members = dict(members)
            self._write_delays()

    def _write_delays(self) -> None:
        """Every client-node and node-node delay for `placed` and the counts now, written
        only where it changed (pairs: per link; star: per table)."""
        sites = self.layout.fog_nodes
        counts = [self.members[s.name] for s in sites]
        if self.study.network != "star":
            access = [fog_access_ms(c, s, self.p) for c, s in zip(counts, sites, strict=True)]
            for k in range(len(self.placed)):
                for i in range(len(sites)):
                    self._set(link_id(client_switch(k), fog_switch(i)),
                              float(self.placed[k, i]) + access[i])
            for i, a in enumerate(sites):
                for j in range(i + 1, len(sites)):
                    self._set(link_id(fog_switch(i), fog_switch(j)),
                              fog_pair_rtt_ms(a, counts[i], sites[j], counts[j],
                                              self.layout, self.p) / 2.0)
            return
        fog_ips = [self.net.ip(s.name) for s in sites]
        ips = [self.net.ip(client_name(k)) for k in range(len(self.placed))]
        tables = star_peer_delays(self.placed, self.layout, self.p, fog_ips, ips, counts)
        for s, table in zip(sites, tables, strict=True):
            lid = self.net.host_link(s.name)
            old = self.tables.get(lid)
            if old is not None and all(abs(old[a] - v) < 1e-4 for a, v in table.items()):
                continue
            self.net.update_peers(lid, table)
            self.tables[lid] = table
            self.link_updates += 1

    def _truth(self, positions: list[Point]) -> dict[str, ClientTruth]:
        """Each client's load-free RTT per node (the client adds the load term, eq. 7)."""
        cf = client_fog_matrix(positions, self.layout, self.p)
        names = list(self.sites)
        static = 2.0 * cf + processing_ms(self.p)
        return {client_name(k): ClientTruth(static=dict(zip(names, static[k].tolist(),
                                                            strict=True)), pos=pos)
                for k, pos in enumerate(positions)}

    def _write_truth(self, folder: Path, truth: dict[str, ClientTruth]) -> None:
        """One small file per client: 200 clients parsing one shared file every step
        would cost a core here. A client on a server gets its file there."""
        t = time.monotonic()
        away: dict[str, dict[str, object]] = {}
        for c, mine in truth.items():
            doc = {"t": t, "clients": {c: mine}}
            if self.net.runs_here(c):
                write_json_atomic(folder / f"{c}.json", doc)
            else:
                away.setdefault(self.net.server_name(c), {})[str(folder / f"{c}.json")] = doc
        for server, files in away.items():
            self._mirror(server, {"files": files})

    def _mirror(self, server: str, msg: Mapping[str, object]) -> None:
        """One change to a server's copy of the city's shared state (fogsdn.city.site_mirror)."""
        proc = self.mirrors[server]
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(msg, separators=(",", ":")) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: the supervisor has the incident

    def _start_mirrors(self, state_dir: Path, truth_dir: Path) -> None:
        """A site_mirror on every server with a client, the point's folders made there."""
        for c in sorted(self.clients_away):
            server = self.net.server_name(c)
            if server not in self.mirrors:
                self.mirrors[server] = self.net.start_on_server(
                    server, f"mirror {server}",
                    ["fogsdn.city.site_mirror", "--root", str(self.net.sock_dir)],
                    self.out / f"mirror-{server}.log",
                    action="the city's clients there see no new truth, loads or epoch; "
                    "the run goes on and exits non-zero")
        for server in self.mirrors:
            self._mirror(server, {"mkdir": str(truth_dir)})
            self._mirror(server, {"mkdir": str(state_dir)})

    def _mirror_board(self, state_dir: Path, counts: Mapping[str, int]) -> None:
        """The member board's counts to every server's copy, when they changed."""
        if not self.mirrors or counts == self.mirrored_counts:
            return
        self.mirrored_counts = dict(counts)
        row = [int(counts[n]) for n in sorted(counts)]  # MemberBoard's order
        for server in self.mirrors:
            self._mirror(server, {"board": str(member_board_path(state_dir)), "counts": row})

    def _config(self, n: int, state_dir: Path, epoch_file: Path) -> CityConfig:
        """What every daemon and client of one point reads."""
        st = self.study
        return CityConfig(
            fogs={name: FogInfo(name, self.net.ip(name), s.slots,
                                tuple(load_ms(c, s.slots, self.p) for c in range(s.slots + 2)))
                  for name, s in self.sites.items()},
            clients={client_name(k): self.net.ip(client_name(k)) for k in range(n)},
            time_scale=st.time_scale, state_dir=state_dir, epoch=0.0, epoch_file=epoch_file,
            duration_live_s=st.duration_live_s, seed=st.seed, client=st.client_params(),
            optimal_reference=st.optimal_reference, node_probe_s=st.node_probe_s)

    def run_point(self, selector: str, ratio: float) -> dict[str, object]:
        st = self.study
        n = st.clients_at(ratio)
        point = self.out / f"{selector}-{ratio:g}"
        point.mkdir(parents=True, exist_ok=True)
        state_dir = self.net.sock_dir / f"{selector}-{ratio:g}"
        state_dir.mkdir(parents=True, exist_ok=True)
        mobility = Mobility(st, self.layout, n)
        positions = [w.position for w in mobility.walkers]
        board = MemberBoard(MemberBoard.create(member_board_path(state_dir), len(self.sites)),
                            list(self.sites))
        self.members = dict.fromkeys(self.sites, 0)  # the board's, as it starts
        self._place(positions)
        self._load_links(board.read())
        truth_dir = state_dir / "truth"
        truth_dir.mkdir(exist_ok=True)
        self.mirrored_counts.clear()
        if self.clients_away:
            self._start_mirrors(state_dir, truth_dir)
            self._mirror_board(state_dir, board.read())
        self._write_truth(truth_dir, self._truth(positions))
        t_start = time.monotonic()
        # the epoch once every process is started (each imports for some 0.4 CPU s: with
        # hundreds of them on two cores that is minutes); they wait for it asleep
        epoch_file = state_dir / "epoch"
        cfg = self._config(n, state_dir, epoch_file)
        cfg_path = cfg.write(point / "city.json")
        rt = ["--realtime"] if st.realtime else []
        # a daemon runs until the point stops it; a client's exit status 0 is its normal end
        fogs = {name: self.net.start_in_host(
            name, f"daemon {name}",
            ["fogsdn.city.fog_daemon", "--config", str(cfg_path), "--name", name, *rt],
            self.out / f"{point.name}-{name}.log",
            action=f"point {point.name}: its clients' tasks are lost; the run goes on and "
            "exits non-zero") for name in self.sites}
        self.memory.sample()
        # every client as a thread of one engine per machine, in its first client's host
        # (each client's sockets are made in its own host)
        groups: dict[str, list[str]] = {}
        for c in cfg.clients:
            groups.setdefault(self.net.server_name(c), []).append(c)
        clients: dict[str, subprocess.Popen[Any]] = {}
        for where, names in groups.items():
            label = "clients" if len(groups) == 1 else f"clients {where}"
            stats = [] if len(groups) == 1 else ["--stats", str(point / f"engine-{where}.json")]
            hosts = ",".join(f"{c}={self.net.host(c).pid}" for c in names)
            clients[label] = self.net.start_in_host(
                names[0], label,
                ["fogsdn.city.client_engine", "--config", str(cfg_path), "--selector",
                 selector, "--clients", hosts, "--truth-dir", str(truth_dir), "--out-dir",
                 str(point), *stats, *rt],
                self.out / f"{point.name}-{label.replace(' ', '-')}.log",
                action=f"point {point.name}: its clients report nothing; the run goes on "
                "and exits non-zero", exit_zero_ends=True)
        spawned_s = time.monotonic() - t_start
        epoch = time.monotonic() + EPOCH_AFTER_START_S
        sup = self.net.supervisor
        sup.epoch, sup.timebase = epoch, st.timebase
        for server in self.mirrors:
            self._mirror(server, {"files": {str(epoch_file): epoch}})
        write_json_atomic(epoch_file, epoch)
        updates0 = self.link_updates
        last = time.monotonic()
        self._show(selector, ratio, state_dir, positions, epoch)
        busy: list[float] = []  # seconds each tick's work took (updates, truth)
        scale = st.time_scale  # real seconds per model second: every time of the study
        next_tick = time.monotonic() + st.tick_s * scale
        while time.monotonic() < epoch + st.duration_live_s and not self.stop.is_set():
            # the access links follow the nodes' counts within a poll; positions, the
            # truth and the view move once a tick
            time.sleep(LOAD_POLL_S)
            counts = board.read()
            self._mirror_board(state_dir, counts)
            self._load_links(counts)
            now = time.monotonic()
            if now < next_tick:
                continue
            next_tick = now + st.tick_s * scale
            if now - self.memory.last >= 1.0:  # a walk of /proc: once a second
                self.memory.sample()
            if now > epoch:
                positions = mobility.positions((now - epoch) / scale,
                                               (now - max(last, epoch)) / scale)
            last = now
            self._place(positions)
            self._write_truth(truth_dir, self._truth(positions))
            self._show(selector, ratio, state_dir, positions, epoch)
            busy.append(time.monotonic() - now)
        self._show(selector, ratio, state_dir, positions, epoch, done=True)
        self._stop_point(fogs, clients)
        self._stop_mirrors()
        board.close()
        results = {}
        for c in cfg.clients:
            try:
                results[c] = json.loads((point / f"{c}.json").read_text())
            except (OSError, json.JSONDecodeError):
                self._say(f"client {c} left no result (see {point.name}-clients.log)")
        engines = []
        for where in groups:
            path = point / (ENGINE_STATS if len(groups) == 1 else f"engine-{where}.json")
            try:
                engines.append(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError):
                pass
        engine = merge_engine_stats(engines)
        fog_states = {}
        for name in self.sites:
            try:
                fog_states[name] = json.loads((state_dir / f"{name}.json").read_text())
            except (OSError, json.JSONDecodeError):
                self._say(f"fog node {name} left no state (see {point.name}-{name}.log)")
        (point / "fogs.json").write_text(json.dumps(fog_states, indent=1))
        return {"selector": selector, "ratio": ratio, "clients": n,
                "slots": self.layout.total_slots, "seed": st.seed,
                "duration_live_s": st.duration_live_s,
                "duration_model_s": st.model_span_s(), "engine": "emulate",
                **live_metrics(results, fog_states),
                **turnaround_columns(engines, fog_states),
                "link_updates": self.link_updates - updates0,
                "clients_reporting": len(results), "fogs_reporting": len(fog_states),
                "client_engine": {k: engine[k] for k in ("cpu_s", "wall_s", "max_rss_kb",
                                                         "threads") if k in engine},
                "spawned_s": round(spawned_s, 2),
                "tick_busy_ms": round(1000 * statistics.median(busy), 1) if busy else math.nan,
                "excess": [x for r in results.values() for x in r.get("excess", [])]}

    def _show(self, selector: str, ratio: float, state_dir: Path, positions: list[Point],
              epoch: float, done: bool = False) -> None:
        """The view's picture of this tick (`--view`)."""
        if self.view is not None:
            self.view.now = CityNow(selector, ratio, state_dir,
                                    tuple(client_name(k) for k in range(len(positions))),
                                    tuple(positions), epoch, done)

    def _stop_mirrors(self) -> None:
        """Each server's site_mirror ends at the end of its stdin (the point's end)."""
        sup = self.net.supervisor
        for server, proc in self.mirrors.items():
            sup.release(f"mirror {server}")
            self.net.stop_process(proc)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.mirrors.clear()

    def _stop_point(self, fogs: dict[str, subprocess.Popen[Any]],
                    engines: dict[str, subprocess.Popen[Any]]) -> None:
        """The clients end at the point's end (interrupted: now, writing what they
        have), then the daemons; a client engine that dies while ending is still an
        incident."""
        sup = self.net.supervisor
        for label, clients in engines.items():
            if self.stop.is_set():
                self.net.stop_process(clients)
            try:
                clients.wait(timeout=CLIENTS_END_S)
            except subprocess.TimeoutExpired:
                sup.release(label)
                self.net.stop_process(clients)
                self._say(f"the client engine ({label}) did not finish; stopped")
                try:
                    clients.wait(timeout=CLIENTS_END_S)
                except subprocess.TimeoutExpired:
                    clients.kill()
                    clients.wait()
        sup.check()  # a client engine that failed while ending, before it is released
        for label in (*(f"daemon {f}" for f in fogs), *engines):
            sup.release(label)
        for proc in fogs.values():
            self.net.stop_process(proc)
        for proc in fogs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()

    def _summary(self, rows: list[dict[str, object]]) -> CitySummary:
        """summary.json; `offset_ms` is the median task RTT minus the configured one
        (model ms), `peak_memory_mb` the RSS of all the run's processes."""
        excess = [json_float(x) for r in rows for x in json_list(r.get("excess", []), "excess")]
        st = self.study
        outcome = self.net.supervisor.summary_fields()
        summary = CitySummary(
            run=outcome["run"], interrupted=outcome["interrupted"],
            crashed=outcome["crashed"], incidents=outcome["incidents"],
            failure=outcome["failure"],
            engine="emulate", study="city", scenario=st.name, network=st.network,
            cpus=os.cpu_count(),
            scale=CityScale(fog_nodes=len(self.sites), slots=self.layout.total_slots,
                            clients=st.max_clients),
            startup_s=round(self.startup_s, 2), peak_memory_mb=round(self.memory.peak_mb, 1),
            offset_ms=round(statistics.median(excess), 3) if excess else math.nan,
            startup=dict(self.net.timings), memory=self.memory.summary(),
            links=self.net.links, link_elements=self.elements,
            points=[_point_report(r) for r in rows])
        if self.net.cluster is not None:
            summary["cluster"] = self.net.cluster.report()
            summary["notes"] = list(self.net.notes)
        return summary

    def run(self) -> CityLiveResult:
        st = self.study
        self.out.mkdir(parents=True, exist_ok=True)
        k = st.max_clients
        positions = start_positions(st, self.layout, k)
        network = city_network(st, self.layout, positions, self.p)
        net_dir = self.out / "network"
        tables = {f"{s.name}-s0": len(self.sites) - 1 + k for s in self.layout.fog_nodes} \
            if st.network == "star" else None
        self.live = live = LiveNetwork(network, net_dir, new_supervisor(net_dir, self.stop),
                                       peer_tables=tables, cluster=self.cluster)
        clients = [n for n, d in live.graph.nodes(data=True) if d.get("role") == "client"]
        self.clients_away = {c for c in clients if not live.runs_here(c)}
        sup = live.supervisor
        t0 = time.monotonic()
        rows: list[dict[str, object]] = []
        server: ViewServer | None = None
        try:
            if self.view_config is not None:
                self.view, server = start_city_view(self.layout, st.duration_live_s, st.time_scale,
                                                    self.view_config)
            live.start({}, t0)
            self.current = live.link_delays_ms()
            if st.network == "star":
                self._place(positions)
            self.startup_s = time.monotonic() - t0
            self.elements = live.link_elements
            self.memory.sample()
            self._say(f"{len(self.sites)} fog nodes ({self.layout.total_slots} slots), "
                      f"{k} client hosts, {live.link_elements} link elements up in "
                      f"{self.startup_s:.1f} s")
            for selector in st.selectors:
                for ratio in st.ratios:
                    if self.stop.is_set():
                        break
                    row = self.run_point(selector, ratio)
                    rows.append(row)
                    self._say(f"{selector:>10} ratio {ratio:g}: {row['clients']} clients, "
                              f"latency {row['mean_latency_ms']:.2f} ms, lost "
                              f"{row['client_lost']:.2f}, optimal {row['optimal_rate']:.1%}, "
                              f"probes {row['probe_messages']}, coord err "
                              f"{row['coord_median_rel_error']:.0%}, step "
                              f"{row['step_ms']:.0f} model ms (p90 {row['step_ms_p90']:.0f})"
                              + _undecodable_note(row))
        except KeyboardInterrupt:  # stopped while the network was being built
            self.stop.set()
        except Exception as err:  # whatever failed, what was collected is kept
            sup.failure = f"{err.__class__.__name__}: {err}"
            print(f"\n[city] FAILED: {sup.failure}; keeping what was collected",
                  file=sys.stderr, flush=True)
        finally:
            if server is not None:
                server.stop()
            live.teardown()
        sup.interrupted = self.stop.is_set() and sup.failure is None
        summary = self._summary(rows)
        for r in rows:
            r.pop("excess", None)
        write_summary(self.out / "summary.json", summary)
        if summary["interrupted"]:
            print("[city] INTERRUPTED: partial results", file=sys.stderr, flush=True)
        if summary["crashed"]:
            print(crash_report(summary), file=sys.stderr, flush=True)
        return CityLiveResult(rows, summary)


def _undecodable_note(row: Mapping[str, object]) -> str:
    """The point line's warning when clients received replies they could not read (a
    reply cut by a too small buffer was one: every such reply is a request lost)."""
    bad = row.get("replies_undecodable", 0)
    return f"; {bad} replies undecodable (their requests count as unanswered)" \
        if isinstance(bad, int) and bad > 0 else ""


def merge_engine_stats(engines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One point's client engines' statistics as one (one engine per machine): CPU
    seconds, clients and threads summed, the longest wall time, the largest RSS."""
    if len(engines) == 1:
        return dict(engines[0])
    out: dict[str, Any] = {}
    for key, fold in (("cpu_s", sum), ("clients", sum), ("threads", sum), ("wall_s", max),
                      ("max_rss_kb", max)):
        values = [e[key] for e in engines if isinstance(e.get(key), int | float)]
        if values:
            out[key] = fold(values)
    return out


def _point_report(row: Mapping[str, object]) -> CityPointReport:
    """A point's own figures, from its row (`CityLive.run_point`)."""
    engine = json_object(row["client_engine"], "client_engine")
    return CityPointReport(
        selector=str(row["selector"]), ratio=json_float(row["ratio"]),
        clients=json_int(row["clients"]), clients_reporting=json_int(row["clients_reporting"]),
        fogs_reporting=json_int(row["fogs_reporting"]),
        rtt_excess_ms=json_float(row["rtt_excess_ms"]),
        turnaround_real_ms_mean=json_float(row["turnaround_real_ms_mean"]),
        turnaround_real_ms_max=json_float(row["turnaround_real_ms_max"]),
        spawned_s=json_float(row["spawned_s"]), tick_busy_ms=json_float(row["tick_busy_ms"]),
        client_engine={k: json_float(v) for k, v in engine.items()})


def run_city_live(study: CityStudy, out: Path, stop: threading.Event | None = None,
                  show: bool = True, view: ViewConfig | None = None,
                  cluster: ClusterSpec | None = None) -> CityLiveResult:
    """The live study: its rows, and summary.json's content (also written to `out`);
    `view`: serve the run's page (`fogsdn.city.map_view`); `cluster`: the servers its
    network runs on (docs/scale-out.md)."""
    study.check_live_span()
    study.check_live_choices()
    return CityLive(study, out, stop or threading.Event(), show, view, cluster).run()
