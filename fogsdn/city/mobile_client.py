"""A mobile client of the live city (seed 003): discovers a fog node, holds a slot there,
sends one task per step, every message counted (docs/coordinates.md, What runs where).

Selection runs here, as seed 003 puts it: the shared step (`fogsdn.nodes.ncs.discovery`) with
a context from live data (the runner's truth file, a node's `view`, probes, or a
Meridian query among the daemons). The runner moves the client by changing its links'
delays. Every client of a point runs in one process, the city's client engine
(`fogsdn.city.client_engine`), each on its own thread with its own sockets in its own
host.
"""

from __future__ import annotations

import json
import math
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict

from fogsdn.city.fog_daemon import (
    MAX_OP,
    MERIDIAN_PORT,
    OPS_PORT,
    PROBE_PORT,
    CityConfig,
    Counts,
    CountsDoc,
)
from fogsdn.city.meridian_node import query_message
from fogsdn.core import rx_stamp
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.summary import json_float, json_int, json_object
from fogsdn.nodes.ncs.discovery import (
    VIVALDI_SELECTORS,
    ClientTally,
    TallyDoc,
    discovery_step,
    make_selector,
)
from fogsdn.nodes.ncs.selection import ProbeAnswer, SelectionContext, Selector
from fogsdn.nodes.ncs.vivaldi import Coordinate, VivaldiConfig, VivaldiError, VivaldiNode
from fogsdn.nodes.probe import ProbeCounters, Prober, Turnarounds


class Truth(TypedDict):
    """The runner's truth for one client (its truth file's entry): each node's load-free
    RTT now, model ms (the simulator's static part); none before the first read."""

    static: NotRequired[dict[str, float]]


class Transport(Protocol):
    """What the client can do on the network (a fake one in tests). Replies and echoes
    are JSON objects as received: their fields are checked where they are read."""

    reply_at: float | None  # when the kernel received the last ops reply (time.monotonic)
    undecodable: int  # datagrams received that were no JSON object (counted, not lost)

    def ping(self, fog: str) -> tuple[float | None, dict[str, object] | None]:
        """One probe: RTT in model ms and the node's echoed state (None, None if lost)."""

    def held_s(self, reply: Mapping[str, object]) -> float:
        """How long the node said it held the request whose reply this is (s), which the
        client takes off the task's round trip."""

    def op(self, fog: str, msg: Mapping[str, object], want_reply: bool
           ) -> dict[str, object] | None:
        """One ops datagram, and its reply when one is wanted (None: none came)."""

    def truth(self) -> Truth:
        """The runner's load-free RTTs for this client now (the simulator's static part):
        {"static": {node: model ms}}."""

    def meridian(self, fog: str, qid: str, eligible: list[str]) -> dict[str, object] | None:
        """A closest-node query to `fog`; the `m_result` (from whichever node ends it)."""


class ResultDoc(TallyDoc):
    """`ClientResult.to_dict`: the tally and what only a live client measures."""

    excess: list[float]
    probe_excess: list[float]
    counts: CountsDoc
    meridian_hops: list[int]
    step_ms: list[float]


class ClientResultDoc(ResultDoc):
    """A client's result file (`client_result`)."""

    coordinate_errors: dict[str, float]


class ClientStatus(TypedDict):
    """A client's status file (`CityClient.status`), rewritten each step."""

    node: str | None
    coord: dict[str, object] | None


@dataclass
class ClientResult(ClientTally):
    """The shared tally, plus what only a live client measures."""

    excess: list[float] = field(default_factory=list)  # task RTT minus the configured one
    probe_excess: list[float] = field(default_factory=list)  # the same for a probe's RTT
    counts: Counts = field(default_factory=Counts)
    meridian_hops: list[int] = field(default_factory=list)  # per answered query
    # per step, model ms from its first message to its task's end: the clients that step
    # meanwhile decide without it (what `step_time: messages` simulates)
    step_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> ResultDoc:
        self.messages = self.counts.total
        return {**self.to_doc(), "excess": list(self.excess),
                "probe_excess": list(self.probe_excess), "counts": self.counts.to_dict(),
                "meridian_hops": list(self.meridian_hops), "step_ms": list(self.step_ms)}


class CityClient:
    """One live client: `fogsdn.nodes.ncs.discovery.discovery_step` on its sockets (it is the
    step's `ClientEngine`)."""

    def __init__(self, name: str, cfg: CityConfig, selector: str, net: Transport,
                 rng: random.Random, members: Callable[[], dict[str, int]],
                 steps: random.Random | None = None) -> None:
        self.name = name
        self.cfg = cfg
        self.kind = selector
        self.selector: Selector = make_selector(selector, cfg.client)
        self.net = net
        self.rng = rng
        # its first step's and its periods' draws (`step_times_rng`; default: `rng`'s)
        self.steps = rng if steps is None else steps
        self.members = members  # every node's client count now (`MemberBoard.read`)
        self.fogs = sorted(cfg.fogs)
        self.slots = {n: f.slots for n, f in cfg.fogs.items()}
        self.node: str | None = None
        self.result = ClientResult()
        self.vivaldi = VivaldiNode(VivaldiConfig(dimensions=cfg.client.dimensions),
                                   random.Random(f"{cfg.seed}-client-{name}")) \
            if selector in VIVALDI_SELECTORS else None
        self.coords: dict[str, Coordinate] = {}
        self.last_rtt: dict[str, float] = {}  # per node, its last task's RTT (model ms)
        self.queries = 0
        self._truth: Truth = {"static": {}}
        self._loads: dict[str, int] = {}  # the members counted for this selection

    # -- counting ---------------------------------------------------------------
    def _count(self, kind: str, sent: int, received: int) -> None:
        self.result.counts.sent[kind] += sent
        self.result.counts.received[kind] += received

    def ping(self, fog: str) -> tuple[float | None, dict[str, object] | None]:
        rtt, state = self.net.ping(fog)
        self._count("probe", 1, 0 if rtt is None else 1)
        static = self._truth.get("static", {})
        if rtt is not None and fog in static:
            # over what the links to `fog` carry now (its access link: its members' load)
            load = self.cfg.fogs[fog].load(self.members().get(fog, 0))
            self.result.probe_excess.append(rtt - (static[fog] + load))
        if rtt is not None and state is not None:
            self._learn(fog, state, rtt)
        return rtt, state

    def request(self, fog: str, msg: Mapping[str, object], want_reply: bool = True
                ) -> dict[str, object] | None:
        reply = self.net.op(fog, {**msg, "client": self.name}, want_reply)
        self._count(str(msg["op"]), 1, 0 if reply is None else 1)
        return reply

    def _learn(self, fog: str, state: Mapping[str, object], rtt_ms: float | None) -> None:
        if self.vivaldi is None:
            return
        try:
            coord = Coordinate.from_dict(state.get("coord"), self.cfg.client.dimensions)
        except VivaldiError:
            return
        self.coords[fog] = coord
        if rtt_ms is not None:
            with suppress(VivaldiError):
                self.vivaldi.update(fog, coord, rtt_ms)

    # -- discovery --------------------------------------------------------------
    def _view(self) -> dict[str, int]:
        """Ask a node for its view: coordinates (learned) and free slots (returned)."""
        node = self.node or self.rng.choice(self.fogs)
        reply = self.request(node, {"op": "view"})
        free = {n: self.slots[n] for n in self.fogs}
        if reply is None:
            return free
        for n, st in json_object(reply.get("nodes", {}), "view: nodes").items():
            if n in free:
                st = json_object(st, f"view: {n}")
                free[n] = json_int(st.get("free", free[n]))
                self._learn(n, st, None)
        return free

    def _meridian(self) -> Callable[[Callable[[str], bool]], str | None]:
        entry = self.node or self.rng.choice(self.fogs)

        def query(eligible: Callable[[str], bool]) -> str | None:
            self.queries += 1
            reply = self.net.meridian(entry, f"{self.name}-{self.queries}",
                                      [n for n in self.fogs if eligible(n)])
            self._count("m_query", 1, 0)
            if reply is None:
                return None
            self._count("m_result", 0, 1)
            self.result.meridian_hops.append(json_int(reply.get("hops", 0)))
            node = reply.get("node")
            return node if node in self.slots and isinstance(node, str) and eligible(node) \
                else None

        return query

    def context(self, excluded: frozenset[str]) -> SelectionContext:
        kind = self.kind
        self._loads = self.members()
        true = dict(self.true_rtt()) if kind == "optimal" else None
        free: dict[str, int] | None = None
        est: dict[str, float] | None = None
        if kind in VIVALDI_SELECTORS:
            free = self._view()
            assert self.vivaldi is not None
            own = self.vivaldi.coord
            est = {n: own.distance_to(self.coords[n]) if n in self.coords else math.inf
                   for n in self.fogs}
        meridian = None
        if kind == "meridian":
            # a full node does not take part in queries
            free = {n: self.slots[n] - self._loads.get(n, 0) for n in self.fogs}
            meridian = self._meridian()
        probe = self._probe_answer if kind == "load_aware" else None
        return SelectionContext(self.fogs, self.slots, self.node, excluded, true, est, free,
                                meridian, probe)

    def _probe_answer(self, n: str) -> ProbeAnswer:
        rtt, st = self.ping(n)
        if rtt is None or st is None:
            return ProbeAnswer(math.inf, 0)
        return ProbeAnswer(rtt, json_int(st.get("free", 0)), json_float(st.get("join", 0.0)),
                           json_float(st.get("leave", 0.0)))

    def _latency(self, loads: dict[str, int], joining: str | None = None) -> dict[str, float]:
        """Eq. 7 per node under `loads`; this client counts already at `joining` and would
        be one more anywhere else."""
        fogs = self.cfg.fogs
        return {n: v + fogs[n].load(loads.get(n, 0) + (joining not in (None, n)))
                for n, v in self._static().items()}

    def _static(self) -> dict[str, float]:
        return {n: float(v) for n, v in self._truth["static"].items()}

    def true_rtt(self) -> dict[str, float]:
        """The latency the omniscient baseline and the scores take: now, load included
        (the loads counted for this selection), or the network distance alone."""
        if self.cfg.optimal_reference == "static":
            return self._static()
        return self._latency(self._loads)

    def join(self, node: str) -> bool:
        """False for a full node, or no answer in time; then a leave, in case the node
        took the client after all (a slot held by no one)."""
        reply = self.request(node, {"op": "join"})
        if reply is None:
            self.leave(node)
        return reply is not None and bool(reply.get("ok"))

    def leave(self, node: str) -> None:
        self.request(node, {"op": "leave"}, want_reply=False)

    def probe(self, node: str) -> None:
        self.ping(node)

    def step(self, t_s: float) -> None:
        """One discovery step and one task (t_s: model seconds since the run's epoch)."""
        self._truth = self.net.truth()
        began = time.monotonic()
        self.node = discovery_step(self, self.selector, self.node, self.fogs, self.cfg.client,
                                   self.result, self.rng, t_s, self.vivaldi is not None)
        self.result.step_ms.append(self.cfg.timebase.model_ms(time.monotonic() - began))

    def task(self, node: str) -> None:
        r = self.result
        # the node's access link carries its load term for these counts (the runner
        # follows the board within a poll): the configured RTT, and every alternative's
        loads = self.members()
        msg: dict[str, object] = {"op": "task", "seq": r.delivered + r.lost}
        if self.vivaldi is not None:  # the node learns from its clients, as simulated
            msg |= {"coord": self.vivaldi.coord.to_dict(), "rtt": self.last_rtt.get(node)}
        t0 = time.monotonic()
        reply = self.request(node, msg)
        if reply is None or reply.get("op") != "done":
            r.lost += 1
            return
        t1 = self.net.reply_at if self.net.reply_at is not None else time.monotonic()
        rtt = self.cfg.timebase.model_ms(max(t1 - t0 - self.net.held_s(reply), 0.0))
        self.last_rtt[node] = rtt
        # the best this task could have had: here, or as one more client anywhere else
        at = self._latency(loads, joining=node)
        if self.cfg.optimal_reference == "static":  # the RTT at the load-agnostic optimum
            static = self._static()
            r.deliver(rtt, at[min(static, key=lambda n: (static[n], n))])
        else:
            r.deliver(rtt, min(at.values()))
        r.excess.append(rtt - at[node])  # over what its links carry
        state = reply.get("state")
        if isinstance(state, dict):
            self._learn(node, state, rtt)

    def status(self) -> ClientStatus:
        """Its chosen node and Vivaldi coordinate (None: none yet, or no coordinate kept)."""
        return {"node": self.node,
                "coord": self.vivaldi.coord.to_dict() if self.vivaldi is not None else None}

    def coordinate_errors(self) -> dict[str, float]:
        """|estimate - configured| / configured per node with a known coordinate
        (configured: the latency its links carry now)."""
        if self.vivaldi is None:
            return {}
        self._truth = self.net.truth() or self._truth
        own, rtt = self.vivaldi.coord, self._latency(self.members())
        return {n: abs(own.distance_to(c) - rtt[n]) / rtt[n] for n, c in self.coords.items()}


class UdpTransport:
    """The real network: probes to the fog nodes' probe ports, ops to their ops ports."""

    def __init__(self, cfg: CityConfig, name: str, truth_path: Path) -> None:
        self.cfg = cfg
        self.name = name
        ip = cfg.clients[name]
        self.prober = Prober((ip, 0))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, 0))
        rx_stamp.enable(self.sock)
        self.reply_at: float | None = None
        self.undecodable = 0
        self.timeout_s = cfg.timebase.real_s(cfg.client.timeout_ms)
        self.seq = 0  # the last ops request's id
        self.truth_path = truth_path
        self._truth: Truth = {}
        self.task_turnarounds = Turnarounds()  # what the nodes held this client's tasks

    def ping(self, fog: str) -> tuple[float | None, dict[str, object] | None]:
        s = self.prober.ping((self.cfg.fogs[fog].ip, PROBE_PORT), self.timeout_s)
        if s.rtt_ms is None:
            return None, None
        try:
            state = json.loads(s.payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            state = None
        rtt = self.cfg.timebase.model_ms_of_real_ms(s.rtt_ms)
        return rtt, state if isinstance(state, dict) else None

    def held_s(self, reply: Mapping[str, object]) -> float:
        """How long the node said it held the request (s; 0 where it did not say or
        said something that is not a time), taken off the task's round trip."""
        held = reply.get("held_ns")
        if isinstance(held, bool) or not isinstance(held, int) or not 0 <= held < 10**10:
            return 0.0
        self.task_turnarounds.add(held / 1e6)
        return held / 1e9

    def op(self, fog: str, msg: Mapping[str, object], want_reply: bool
           ) -> dict[str, object] | None:
        """Each request carries an id its reply echoes: a reply that comes after its
        request timed out is not taken for the answer to the next one."""
        self.seq += 1
        self.reply_at = None
        self.sock.sendto(json.dumps({**msg, "id": self.seq}).encode(),
                         (self.cfg.fogs[fog].ip, OPS_PORT))
        if not want_reply:
            return None
        return self._await(self.timeout_s, lambda r: r.get("id") == self.seq)

    def _await(self, timeout_s: float, ours: Callable[[dict[str, object]], bool]
               ) -> dict[str, object] | None:
        """The first datagram within `timeout_s` that is a JSON object `ours` accepts."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data, at = rx_stamp.recv_stamped(self.sock, MAX_OP)
                reply = json.loads(data)
            except TimeoutError:
                return None
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.undecodable += 1
                continue  # not an answer of ours
            if isinstance(reply, dict) and ours(reply):
                self.reply_at = at  # the kernel's stamp: not when this thread got the GIL
                return reply
        return None

    def meridian(self, fog: str, qid: str, eligible: list[str]) -> dict[str, object] | None:
        ip, port = self.sock.getsockname()
        msg = query_message(qid, self.name, (ip, PROBE_PORT), (ip, port), eligible)
        self.sock.sendto(json.dumps(msg).encode(), (self.cfg.fogs[fog].ip, MERIDIAN_PORT))
        # the query may visit every node, each waiting at most a probe's timeout
        return self._await(self.timeout_s * 3,
                           lambda r: r.get("op") == "m_result" and r.get("qid") == qid)

    def truth(self) -> Truth:
        try:
            self._truth = json.loads(self.truth_path.read_text())["clients"][self.name]
        except (OSError, json.JSONDecodeError, KeyError):
            pass  # a torn read cannot happen (atomic replace); keep the last one
        return self._truth


def client_status_path(state_dir: Path, name: str) -> Path:
    """Where a client keeps its chosen node and coordinate, rewritten each step."""
    return state_dir / f"client-{name}.json"


def drive(client: CityClient, cfg: CityConfig, stop: threading.Event,
          status_path: Path) -> None:
    """The client's life: its first step at a drawn start, one step a drawn period after
    the last, until the point's end or `stop`; its chosen node and coordinate rewritten
    to `status_path` each step (the view's). The study's times are model seconds,
    `time_scale` real seconds each as its latencies are, so a step's messages take the
    share of its period they take in the simulator."""
    scale = cfg.time_scale
    end = cfg.epoch + cfg.duration_live_s
    t = cfg.epoch + client.steps.uniform(*cfg.client.start_s) * scale
    while not stop.is_set():
        now = time.monotonic()
        if now >= end:
            break
        if now < t:
            stop.wait(min(t, end) - now)  # asleep to the instant, not polling
            continue
        client.step((now - cfg.epoch) / scale)
        write_json_atomic(status_path, client.status())
        t = max(t + client.steps.uniform(*cfg.client.period_s) * scale, time.monotonic())


def client_result(client: CityClient, responder: ProbeCounters) -> ClientResultDoc:
    """What the client writes at its end: its tally, with the Meridian probes its echo
    responder answered, and its coordinates' errors."""
    counts = client.result.counts
    counts.received["m_probe"] += responder.received
    counts.sent["m_probe"] += responder.sent
    if client.net.undecodable:
        counts.received["malformed"] += client.net.undecodable
    return {**client.result.to_dict(), "coordinate_errors": client.coordinate_errors()}
