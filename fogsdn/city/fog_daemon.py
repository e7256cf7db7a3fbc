"""A fog node of the live city (seed 003): slots for clients, probes, coordinates.

One process per fog host, bound to its address: a probe port whose echoes carry the
node's state, an ops port (`join`, `leave`, `task`, `view`) and a Meridian port
(`fogsdn.city.meridian_node`); docs/coordinates.md, What runs where. Its client count goes on
the member board at every join and leave, which the runner turns into link delay.

    python -m fogsdn.city.fog_daemon --config RUN/city.json --name fog0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypedDict

from pydantic import TypeAdapter

from fogsdn.city.meridian_node import AgentTiming, MeridianAgent, Ping, Send
from fogsdn.core import rx_stamp
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.realtime import go_realtime
from fogsdn.core.timebase import Timebase
from fogsdn.nodes.ncs.discovery import ClientParams
from fogsdn.nodes.ncs.meridian import MeridianConfig
from fogsdn.nodes.ncs.vivaldi import Coordinate, VivaldiConfig, VivaldiError, VivaldiNode
from fogsdn.nodes.probe import (
    ECHO,
    MAX_DATAGRAM,
    PING,
    MalformedDatagram,
    ProbeMessage,
    Turnarounds,
    decode,
    echo_of,
    held_ns,
    round_trip_ms,
)

PROBE_PORT = 7000
OPS_PORT = 7001
MERIDIAN_PORT = 7002
# the largest UDP payload over IPv4: a node's view lists every node (some 140 bytes
# each, 4.1 KB at the seed's 29), so a smaller buffer cut it and the client dropped it
MAX_OP = 65_507
START_PROBE_S = 0.25  # real s between the start's probes to peers not measured yet


@dataclass(frozen=True)
class FogInfo:
    name: str
    ip: str
    slots: int
    load_ms: tuple[float, ...]  # load term (model ms) with 0, 1, ..., slots + 1 clients

    def load(self, clients: int) -> float:
        return self.load_ms[min(max(clients, 0), len(self.load_ms) - 1)]


@dataclass(frozen=True)
class CityConfig:
    """What the runner tells every fog and client process (one JSON file per point): the
    network's addresses and timing, and the clients' knobs (`ClientParams`)."""

    fogs: dict[str, FogInfo]
    clients: dict[str, str]  # name -> ip
    time_scale: float
    state_dir: Path
    epoch: float  # time.monotonic() at which clients may start (shared by namespaces)
    duration_live_s: float
    seed: int
    client: ClientParams = ClientParams(start_s=(0.5, 2.0))
    # the omniscient baseline's and the scores' latency: load included, or the network
    # distance alone (the study's `optimal_reference`, as the simulator reads it)
    optimal_reference: Literal["current", "static"] = "current"
    node_probe_s: float = 1.0  # model s between a node's rounds of peer probes

    @property
    def timebase(self) -> Timebase:
        """Model time against real time, from the point's `time_scale` and `epoch`."""
        return Timebase(self.time_scale, self.epoch)
    # set: `epoch` is not known yet; the runner writes it (one number) to this file once
    # every process of the point is started, which takes minutes with hundreds of them
    epoch_file: Path | None = None

    def write(self, path: Path) -> Path:
        path.write_bytes(TypeAdapter(CityConfig).dump_json(self))
        return path

    @staticmethod
    def read(path: Path, wait_s: float = 900.0) -> CityConfig:
        """The point's configuration, with its epoch (waiting for the epoch file if any)."""
        return CityConfig.read_unstarted(path).with_epoch(wait_s)

    @staticmethod
    def read_unstarted(path: Path) -> CityConfig:
        """The point's configuration as written, its epoch perhaps not known yet."""
        return TypeAdapter(CityConfig).validate_json(Path(path).read_bytes())

    def with_epoch(self, wait_s: float = 900.0,
                   stop: Callable[[], bool] = lambda: False) -> CityConfig:
        """This configuration with its epoch, waiting for the epoch file if there is one;
        RuntimeError after `wait_s` or once `stop()` is true."""
        if self.epoch_file is None:
            return self
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return replace(self, epoch=float(self.epoch_file.read_text()), epoch_file=None)
            except (OSError, ValueError):
                if stop():
                    raise RuntimeError("stopped before the point's epoch") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no epoch in {self.epoch_file} after {wait_s:.0f} s"
                                       ) from None
                time.sleep(0.05)


class MemberBoard:
    """Every fog node's client count now, one int32 per node (sorted by name): each daemon
    writes its own at every join and leave, a reader takes them all in one `pread`, so
    live scores see the loads of the instant as simulated ones do (docs/coordinates.md,
    "Live against simulated")."""

    def __init__(self, path: Path, names: Sequence[str]) -> None:
        self.names = sorted(names)
        self._fd = os.open(path, os.O_RDWR)

    @staticmethod
    def create(path: Path, n: int) -> Path:
        path.write_bytes(bytes(4 * n))
        return path

    def write(self, name: str, members: int) -> None:
        os.pwrite(self._fd, struct.pack("<i", members), 4 * self.names.index(name))

    def read(self) -> dict[str, int]:
        n = len(self.names)
        return dict(zip(self.names, struct.unpack(f"<{n}i", os.pread(self._fd, 4 * n, 0)),
                        strict=True))

    def close(self) -> None:
        os.close(self._fd)


def member_board_path(state_dir: Path) -> Path:
    return state_dir / "members.bin"


# `Counts.to_dict`: datagrams by kind each way, and the totals in and out
CountsDoc = TypedDict("CountsDoc", {"sent": dict[str, int], "received": dict[str, int],
                                   "in": int, "out": int})


@dataclass
class Counts:
    """Datagrams by kind, each way."""

    sent: Counter[str] = field(default_factory=Counter)
    received: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.sent.values()) + sum(self.received.values())

    def to_dict(self) -> CountsDoc:
        return {"sent": dict(self.sent), "received": dict(self.received),
                "in": sum(self.received.values()), "out": sum(self.sent.values())}


class NodeState(TypedDict):
    """What a node's probe echoes carry (`FogNode.state`): its name and coordinate, its
    free slots, and what one more client costs and one fewer gains (model ms)."""

    n: str
    coord: dict[str, object]  # `Coordinate.to_dict`
    free: int
    join: float
    leave: float


class FogStateDoc(TypedDict):
    """A daemon's state file (`FogDaemon.write_state`), rewritten as it runs."""

    members: int
    refused: int
    rtt_ms: dict[str, float]  # per peer, model ms
    coord: dict[str, object]
    counts: CountsDoc
    meridian_hops: list[int]
    turnarounds: dict[str, dict[str, float]]  # "echoed", "taken_off": `Turnarounds.to_dict`


class FogNode:
    """The node's logic, separate from its sockets (tested without a network)."""

    def __init__(self, info: FogInfo, cfg: CityConfig) -> None:
        self.info = info
        self.cfg = cfg
        self.members: set[str] = set()
        self.vivaldi = VivaldiNode(VivaldiConfig(dimensions=cfg.client.dimensions),
                                   random.Random(f"{cfg.seed}-fog-{info.name}"))
        self.view: dict[str, dict[str, object]] = {}  # peer -> its last echoed state
        self.peer_rtt_ms: dict[str, float] = {}  # model ms
        self.counts = Counts()
        self.refused = 0
        # the one peer whose echo this round moves the coordinate (`next_round`)
        self.coordinate_peer: str | None = None
        self._round_rng = random.Random(f"{cfg.seed}-round-{info.name}")
        self.meridian = MeridianAgent(
            info.name, {n: (f.ip, MERIDIAN_PORT) for n, f in cfg.fogs.items()},
            MeridianConfig(), random.Random(f"{cfg.seed}-meridian-{info.name}"),
            AgentTiming.on_model_clock(cfg.timebase,
                                       cfg.timebase.real_s(cfg.client.timeout_ms)),
            self.counts.sent, self.counts.received)

    @property
    def free(self) -> int:
        return self.info.slots - len(self.members)

    def state(self) -> NodeState:
        k = len(self.members)
        here = self.info.load(k)
        return {"n": self.info.name, "coord": self.vivaldi.coord.to_dict(), "free": self.free,
                "join": k * (self.info.load(k + 1) - here),
                "leave": (k - 1) * (here - self.info.load(k - 1)) if k > 0 else 0.0}

    def op(self, msg: Mapping[str, object]) -> dict[str, object] | None:
        """One ops datagram in; the reply (None: no reply)."""
        kind = msg.get("op")
        client = str(msg.get("client", ""))
        if kind == "join":
            if client in self.members or self.free > 0:
                self.members.add(client)
                return {"op": "joined", "ok": True}
            self.refused += 1
            return {"op": "joined", "ok": False}
        if kind == "leave":
            self.members.discard(client)
            return None
        if kind == "task":
            if client not in self.members:
                return None  # sent to a node that holds no slot for it: lost
            self._learn_from_client(client, msg)
            return {"op": "done", "seq": msg.get("seq"), "state": self.state()}
        if kind == "view":
            nodes = {n: {"coord": s["coord"], "free": s["free"]} for n, s in self.view.items()}
            own = self.state()
            nodes[self.info.name] = {"coord": own["coord"], "free": own["free"]}
            return {"op": "view", "nodes": nodes}
        return None

    def next_round(self) -> None:
        """A new round of peer probes: every peer is probed, but only one, drawn at random,
        moves the coordinate, as in the simulator (docs/coordinates.md, "Live against
        simulated")."""
        peers = sorted(n for n in self.cfg.fogs if n != self.info.name)
        self.coordinate_peer = self._round_rng.choice(peers) if peers else None

    def _learn_from_client(self, client: str, msg: Mapping[str, object]) -> None:
        """Fold a Vivaldi client's coordinate and its last task's RTT here into ours, as a
        simulated node does (one task late: the node cannot time the client's trip)."""
        rtt = msg.get("rtt")
        if isinstance(rtt, bool) or not isinstance(rtt, int | float) or not rtt > 0:
            return
        with suppress(VivaldiError):
            coord = Coordinate.from_dict(msg.get("coord"), self.cfg.client.dimensions)
            self.vivaldi.update(client, coord, float(rtt))

    def peer_echo(self, peer: str, rtt_real_ms: float, payload: bytes) -> None:
        """A peer's echo: its state into the view, the RTT into the rings, and into our
        coordinate if it is this round's coordinate peer."""
        try:
            st = json.loads(payload.decode("utf-8"))
            if not isinstance(st, dict):
                raise TypeError
            coord = Coordinate.from_dict(st["coord"], self.cfg.client.dimensions)
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, VivaldiError):
            return
        rtt = self.cfg.timebase.model_ms_of_real_ms(rtt_real_ms)
        self.view[peer] = st
        self.peer_rtt_ms[peer] = rtt
        self.meridian.measured(peer, rtt)
        if peer == self.coordinate_peer:
            with suppress(VivaldiError):
                self.vivaldi.update(peer, coord, rtt)


class FogDaemon:
    def __init__(self, node: FogNode) -> None:
        self.node = node
        ip = node.info.ip
        self.probe_sock = self._sock(ip, PROBE_PORT)
        self.ops_sock = self._sock(ip, OPS_PORT)
        self.peer_sock = self._sock(ip, 0)
        rx_stamp.enable(self.peer_sock)  # its echoes time the node's probes
        rx_stamp.enable(self.probe_sock)  # its echoes carry how long it held each ping
        rx_stamp.enable(self.ops_sock)  # and its replies how long it held each request
        # the turnarounds this node put on its echoes and took off its probes' round trips
        self.turnaround_out = Turnarounds()
        self.turnaround_in = Turnarounds()
        self.meridian_sock = self._sock(ip, MERIDIAN_PORT)
        # seq -> (peer, or a Meridian probe's token, t_send_ns)
        self.pending: dict[int, tuple[str | tuple[str, str], int]] = {}
        self.seq = 0
        self.stop = False
        self.board = MemberBoard(member_board_path(node.cfg.state_dir), list(node.cfg.fogs))
        self.probe_period_s = node.cfg.timebase.real_s(node.cfg.node_probe_s * 1000.0)

    @staticmethod
    def _sock(ip: str, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((ip, port))
        return s

    def _probe_in(self) -> None:
        c = self.node.counts
        data, sender, received_s = rx_stamp.recvfrom_stamped(self.probe_sock,
                                                              MAX_DATAGRAM + 1)
        try:
            msg = decode(data)
        except MalformedDatagram:
            c.received["malformed"] += 1
            return
        c.received["probe"] += 1
        if msg.kind != PING:
            return
        payload = json.dumps(self.node.state(), separators=(",", ":")).encode()
        echo = echo_of(msg, payload, received_s)  # its wait for a core is not the network's
        self.probe_sock.sendto(echo.encode(), sender)
        c.sent["probe"] += 1
        self.turnaround_out.add(echo.turnaround_ns / 1e6)

    def _ops_in(self) -> None:
        c = self.node.counts
        data, sender, received_s = rx_stamp.recvfrom_stamped(self.ops_sock, MAX_OP)
        try:
            msg = json.loads(data)
            if not isinstance(msg, dict):
                raise TypeError
            kind = str(msg["op"])
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            c.received["malformed"] += 1
            return
        c.received[kind] += 1
        before = len(self.node.members)
        reply = self.node.op(msg)
        if len(self.node.members) != before:
            self.board.write(self.node.info.name, len(self.node.members))
        if reply is not None:  # with the request's id, which the client matches
            reply["id"] = msg.get("id")
            # how long it held the request, which the client takes off the task's round
            # trip (as the probes' turnaround): its wait for a core is not the network's
            reply["held_ns"] = held = held_ns(received_s)
            self.turnaround_out.add(held / 1e6)
            self.ops_sock.sendto(json.dumps(reply, separators=(",", ":")).encode(), sender)
            c.sent[str(reply["op"])] += 1

    def _peer_in(self) -> None:
        c = self.node.counts
        # the kernel's receive stamp: not when this daemon next got a core
        data, t_recv_s = rx_stamp.recv_stamped(self.peer_sock, MAX_DATAGRAM + 1)
        t_recv = round(t_recv_s * 1e9)
        try:
            msg = decode(data)
        except MalformedDatagram:
            c.received["malformed"] += 1
            return
        sent = self.pending.pop(msg.seq, None)
        if msg.kind != ECHO or sent is None or sent[1] != msg.t_send_ns:
            c.received["probe"] += 1
            return
        rtt_real_ms = round_trip_ms(sent[1], t_recv, msg.turnaround_ns)
        self.turnaround_in.add(msg.turnaround_ns / 1e6)
        if isinstance(sent[0], tuple):  # Meridian's probe to a client
            c.received["m_probe"] += 1
            self._meridian_do(self.node.meridian.client_rtt(
                sent[0], self.node.cfg.timebase.model_ms_of_real_ms(rtt_real_ms), time.monotonic()))
            return
        c.received["probe"] += 1
        self.node.peer_echo(sent[0], rtt_real_ms, msg.payload)

    def _meridian_in(self) -> None:
        data, _sender = self.meridian_sock.recvfrom(MAX_OP)
        try:
            msg = json.loads(data)
            if not isinstance(msg, dict):
                raise TypeError
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError):
            self.node.counts.received["malformed"] += 1
            return
        self._meridian_do(self.node.meridian.message(msg, time.monotonic()))

    def _meridian_do(self, actions: list[Ping | Send]) -> None:
        """Carry out what the Meridian agent asks for (it has counted its datagrams)."""
        for a in actions:
            if isinstance(a, Send):
                self.meridian_sock.sendto(json.dumps(a.msg, separators=(",", ":")).encode(),
                                          a.dest)
                continue
            self._ping(a.dest, a.token, "m_probe")

    def _ping(self, dest: tuple[str, int], key: str | tuple[str, str], kind: str) -> None:
        self.seq = (self.seq + 1) % 2**32
        t = time.monotonic_ns()
        self.peer_sock.sendto(ProbeMessage(PING, self.seq, t).encode(), dest)
        self.pending[self.seq] = (key, t)
        self.node.counts.sent[kind] += 1

    def _ping_peers(self, only: Sequence[str] | None = None) -> None:
        """A round of probes to every peer, one of which, drawn, moves the Vivaldi
        coordinate; or probes to `only` that start no round (the start's: an echo moves
        the coordinate only as the round's drawn peer, whose own echo never came)."""
        now = time.monotonic_ns()
        horizon_ns = 2e9 * self.probe_period_s  # two rounds' time
        self.pending = {s: v for s, v in self.pending.items() if now - v[1] < horizon_ns}
        if only is None:
            self.node.next_round()
        for name, f in self.node.cfg.fogs.items():
            if name != self.node.info.name and (only is None or name in only):
                self._ping((f.ip, PROBE_PORT), name, "probe")

    def write_state(self) -> None:
        n = self.node
        doc: FogStateDoc = {
            "members": len(n.members), "refused": n.refused, "rtt_ms": n.peer_rtt_ms,
            "coord": n.vivaldi.coord.to_dict(), "counts": n.counts.to_dict(),
            "meridian_hops": n.meridian.hops,
            "turnarounds": {"echoed": self.turnaround_out.to_dict(),
                            "taken_off": self.turnaround_in.to_dict()}}
        write_json_atomic(n.cfg.state_dir / f"{n.info.name}.json", doc)

    def serve(self) -> None:
        # until the overlay starts (every peer measured: their daemons are up), the peers
        # not measured yet are probed every START_PROBE_S, so that its start (gossip,
        # then its rings) files measured peers as the simulator's does; the rounds
        # proper at a drawn phase
        next_start_probe = time.monotonic()
        next_ping = time.monotonic() + random.Random(self.node.info.name).uniform(
            0, self.probe_period_s)
        next_state = 0.0
        handlers = {self.probe_sock: self._probe_in, self.ops_sock: self._ops_in,
                    self.peer_sock: self._peer_in, self.meridian_sock: self._meridian_in}
        while not self.stop:
            ready, _, _ = select.select(list(handlers), [], [], 0.02)
            for s in ready:
                handlers[s]()
            now = time.monotonic()
            agent = self.node.meridian
            if agent.started is None and now >= next_start_probe:
                self._ping_peers(only=agent.unmeasured())
                next_start_probe = now + START_PROBE_S
            self._meridian_do(agent.tick(now))
            if now >= next_ping:
                self._ping_peers()
                next_ping = now + self.probe_period_s
            if now >= next_state:
                self.write_state()
                next_state = now + 0.1
        self.write_state()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--realtime", action="store_true", help="run SCHED_FIFO (root)")
    args = ap.parse_args(argv)
    cfg = CityConfig.read(args.config)
    if args.name not in cfg.fogs:
        ap.error(f"--name: {args.name!r} is not a fog node of {args.config}")
    daemon = FogDaemon(FogNode(cfg.fogs[args.name], cfg))

    def _stop(signum: int, frame: object) -> None:
        daemon.stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.realtime:
        go_realtime()
    print("ready", flush=True)
    daemon.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
