"""Meridian closest-node discovery (Wong, Slivkins, Sirer 2005), pure and message-counted.

Rings by measured latency, k hypervolume-diverse primaries per ring, gossip, and the
recursive closest-node query, whose step ("wong" or the seed's wording) is a set of pure
functions the live daemons call too; docs/coordinates.md (Meridian) has it in full.
Latencies come from a `measure` callable; every message is counted in `Messages`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

# RTT in ms between two named hosts, math.nan when the probe got no answer.
Measure = Callable[[str, str], float]


class MeridianError(ValueError):
    """Bad configuration or query; the message names the field."""


@dataclass(frozen=True)
class MeridianConfig:
    # primaries per ring; None: the seed's floor(log_1.6 N) for N nodes (primary_size)
    k: int | None = None
    alpha_ms: float = 1.0
    s: float = 1.5
    rings: int = 8
    beta: float = 0.5
    # when the query moves on: "wong" (Wong et al. 2005) or "seed" (seed 003's wording);
    # docs/coordinates.md, Seed 003 as written
    termination: Literal["wong", "seed"] = "wong"

    def __post_init__(self) -> None:
        if not self.alpha_ms > 0:
            raise MeridianError(f"alpha_ms: must be > 0, got {self.alpha_ms!r}")
        if not self.s > 1:
            raise MeridianError(f"s: must be > 1, got {self.s!r}")
        if self.rings < 1:
            raise MeridianError(f"rings: must be >= 1, got {self.rings!r}")
        if self.k is not None and self.k < 1:
            raise MeridianError(f"k: must be >= 1, got {self.k!r}")
        if not 0 <= self.beta < 1:
            raise MeridianError(f"beta: must be in [0, 1), got {self.beta!r}")

    def ring_of(self, latency_ms: float) -> int:
        """The ring a latency files into; the outermost ring is unbounded."""
        if latency_ms <= self.alpha_ms:
            return 0
        i = math.ceil(math.log(latency_ms / self.alpha_ms) / math.log(self.s) - 1e-12)
        return min(max(i, 1), self.rings - 1)

    def primaries(self, n_nodes: int) -> int:
        """k for an overlay of `n_nodes`: the configured one, else the seed's."""
        return self.k if self.k is not None else primary_size(n_nodes)


@dataclass(frozen=True)
class Upkeep:
    """When an overlay keeps itself up, in model seconds, the same in both engines: it
    starts converged (`start_gossip_rounds` rounds of gossip, then its rings managed
    once), then gossips every `gossip_s` and manages its rings every `manage_s`. Our
    choice: the seed gives no schedule."""

    gossip_s: float = 5.0
    manage_s: float = 30.0
    start_gossip_rounds: int = 10


UPKEEP = Upkeep()


def primary_size(n_nodes: int) -> int:
    """k = floor(log_1.6 N), at least 1."""
    return max(1, math.floor(math.log(max(n_nodes, 1)) / math.log(1.6) + 1e-9))


@dataclass
class Messages:
    """Every message the protocol sends, by kind and by sender/receiver."""

    by_kind: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    received: Counter[str] = field(default_factory=Counter)

    def send(self, kind: str, src: str, dst: str, count: int = 1) -> None:
        self.by_kind[kind] += count
        self.sent[src] += count
        self.received[dst] += count

    def probe(self, src: str, dst: str) -> None:
        """An RTT measurement: a ping and its echo."""
        self.send("probe", src, dst)
        self.send("probe", dst, src)

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def log_hypervolume(points: np.ndarray) -> float:
    """log of the volume of the simplex spanned by the rows of `points` (-inf if flat)."""
    if len(points) < 2:
        return 0.0
    edges = points[1:] - points[0]
    sign, logdet = np.linalg.slogdet(edges @ edges.T)
    if sign <= 0:
        return -math.inf
    return 0.5 * float(logdet) - math.lgamma(len(edges) + 1)


def most_diverse(members: list[str], distances: np.ndarray, k: int) -> list[str]:
    """The k members whose latency vectors (rows of `distances`) span the largest volume,
    by greedily dropping the member whose removal loses least."""
    keep = list(range(len(members)))
    while len(keep) > k:
        best_drop, best_volume = keep[-1], -math.inf
        for r in keep:
            rest = [i for i in keep if i != r]
            vol = log_hypervolume(distances[rest])
            if vol > best_volume:
                best_drop, best_volume = r, vol
        keep.remove(best_drop)
    return [members[i] for i in keep]


@dataclass
class Ring:
    primary: dict[str, float] = field(default_factory=dict)
    secondary: dict[str, float] = field(default_factory=dict)

    def members(self) -> dict[str, float]:
        return {**self.primary, **self.secondary}


@dataclass
class MeridianNode:
    name: str
    config: MeridianConfig
    k: int
    l: int  # noqa: E741 (the paper's name)
    rings: list[Ring] = field(init=False)

    def __post_init__(self) -> None:
        self.rings = [Ring() for _ in range(self.config.rings)]

    def latency_to(self, member: str) -> float | None:
        for ring in self.rings:
            for group in (ring.primary, ring.secondary):
                if member in group:
                    return group[member]
        return None

    def knows(self) -> set[str]:
        return {m for ring in self.rings for m in ring.members()}

    def file(self, member: str, latency_ms: float) -> None:
        """Insert or move `member` to the ring its (new) latency belongs to."""
        if member == self.name or not math.isfinite(latency_ms):
            return
        self.drop(member)
        ring = self.rings[self.config.ring_of(latency_ms)]
        if len(ring.primary) < self.k:
            ring.primary[member] = latency_ms
        elif len(ring.secondary) < self.l:
            ring.secondary[member] = latency_ms

    def drop(self, member: str) -> None:
        for ring in self.rings:
            ring.primary.pop(member, None)
            ring.secondary.pop(member, None)

    def manage_rings(self, measure: Measure, messages: Messages) -> None:
        """Choose each ring's primaries for diversity. The members report their latencies
        to each other (one request and one report per member, counted); those latencies
        come from `measure`."""
        for ring in self.rings:
            everyone = ring.members()
            if len(everyone) <= self.k:
                ring.primary, ring.secondary = everyone, {}
                continue
            names = sorted(everyone)
            n = len(names)
            dist = np.zeros((n, n))
            for i, a in enumerate(names):
                messages.send("ring_manage", self.name, a)
                messages.send("ring_manage", a, self.name)
                for j in range(i + 1, n):
                    d = measure(a, names[j])
                    dist[i, j] = dist[j, i] = d if math.isfinite(d) else 0.0
            chosen = set(most_diverse(names, dist, self.k))
            ring.primary = {m: everyone[m] for m in names if m in chosen}
            spare = sorted((m for m in names if m not in chosen), key=lambda m: everyone[m])
            ring.secondary = {m: everyone[m] for m in spare[: self.l]}


@dataclass(frozen=True)
class QueryStep:
    """What a node does with the answers it got: the nearest answer (None if none), its
    latency, and whether the query moves there (it improved on d by the threshold)."""

    nearest: str | None
    latency_ms: float
    forward: bool


def band_members(node: MeridianNode, d: float, visited: Iterable[str],
                 eligible: Callable[[str], bool]) -> list[str]:
    """The primaries `node` asks to measure a target it is `d` away from: those whose
    latency to it is in [(1 - beta) d, (1 + beta) d], not yet visited, eligible."""
    lo, hi, seen = (1 - node.config.beta) * d, (1 + node.config.beta) * d, set(visited)
    band = sorted(((m, lat) for ring in node.rings for m, lat in ring.primary.items()
                   if lo <= lat <= hi), key=lambda x: x[1])
    return [m for m, _lat in band if m not in seen and eligible(m)]


def within_cutoff(config: MeridianConfig, d: float, dm: float) -> bool:
    """An answer counts only if finite and at most (2 beta + 1) d: a farther one cannot
    come from a node closer to the target (a member does not even send it)."""
    return math.isfinite(dm) and dm <= (2 * config.beta + 1) * d


def next_step(config: MeridianConfig, d: float, answers: dict[str, float]) -> QueryStep:
    """The nearest answer (ties by name) and whether the query moves there: when it is at
    most beta * d ("wong"), or whenever there is one ("seed")."""
    if not answers:
        return QueryStep(None, math.inf, False)
    nearest = min(answers, key=lambda m: (answers[m], m))
    forward = config.termination == "seed" or answers[nearest] <= config.beta * d
    return QueryStep(nearest, answers[nearest], forward)


def fallback_groups(node: MeridianNode, eligible: Callable[[str], bool]) -> list[list[str]]:
    """No eligible answer came from the band: ask every eligible member, the primaries
    first and, if none of them answers, the secondaries."""
    return [[m for r in node.rings for m in r.primary if eligible(m)],
            [m for r in node.rings for m in r.secondary if eligible(m)]]


@dataclass(frozen=True)
class QueryResult:
    node: str | None  # None when no eligible node answered
    latency_ms: float
    hops: int
    messages: int


@dataclass
class MeridianOverlay:
    """A set of Meridian nodes sharing one `measure` and one message counter."""

    names: list[str]
    measure: Measure
    config: MeridianConfig = field(default_factory=MeridianConfig)
    messages: Messages = field(default_factory=Messages)
    nodes: dict[str, MeridianNode] = field(init=False)

    def __post_init__(self) -> None:
        if len(set(self.names)) != len(self.names) or not self.names:
            raise MeridianError("names: must be non-empty and unique")
        k = self.config.primaries(len(self.names))
        l = max(len(self.names) - k, 0)  # noqa: E741
        self.nodes = {n: MeridianNode(n, self.config, k, l) for n in self.names}

    def _probe(self, src: str, dst: str) -> float:
        self.messages.probe(src, dst)
        return self.measure(src, dst)

    def bootstrap(self, rng: random.Random, seeds_per_node: int = 2) -> None:
        """Every node starts knowing a few random others (measured)."""
        for name, node in self.nodes.items():
            others = [n for n in self.names if n != name]
            for peer in rng.sample(others, min(seeds_per_node, len(others))):
                node.file(peer, self._probe(name, peer))

    def gossip_round(self, rng: random.Random) -> None:
        """Each node sends one random known peer one member per non-empty ring plus
        itself; the peer measures and files those it did not know."""
        for name, node in self.nodes.items():
            known = sorted(node.knows())
            if not known:
                continue
            peer = rng.choice(known)
            packet = [name] + [rng.choice(sorted(r.members())) for r in node.rings if r.members()]
            self.messages.send("gossip", name, peer)
            receiver = self.nodes[peer]
            for member in packet:
                if member != peer and receiver.latency_to(member) is None:
                    receiver.file(member, self._probe(peer, member))

    def remeasure(self) -> None:
        """Each node probes every member it knows and refiles it by the RTT now, so the
        rings follow the latencies as they change (with the nodes' loads, say)."""
        for name, node in self.nodes.items():
            for member in sorted(node.knows()):
                node.file(member, self._probe(name, member))

    def manage_rings(self) -> None:
        for node in self.nodes.values():
            node.manage_rings(self.measure, self.messages)

    def converge(self, rng: random.Random, gossip_rounds: int = 10) -> None:
        self.bootstrap(rng)
        for _ in range(gossip_rounds):
            self.gossip_round(rng)
        self.manage_rings()

    def closest(self, target: str, entry: str,
                eligible: Callable[[str], bool] | None = None) -> QueryResult:
        """Recursive closest-node search for `target` (a client or any host) from `entry`;
        nodes for which `eligible` is false still route the query but are neither asked
        to measure nor returned."""
        if entry not in self.nodes:
            raise MeridianError(f"entry: unknown Meridian node {entry!r}")
        ok = eligible or (lambda _n: True)
        start = self.messages.total
        self.messages.send("query", target, entry)
        current = entry
        d = self._probe(current, target)
        best: tuple[str | None, float] = (current, d) if ok(current) and math.isfinite(d) \
            else (None, math.inf)
        visited = {current}
        hops = 0
        while math.isfinite(d):
            answers = self._ask(current, band_members(self.nodes[current], d, visited, ok),
                                target, d)
            step = next_step(self.config, d, answers)
            if step.nearest is None:
                break
            if step.latency_ms < best[1]:
                best = (step.nearest, step.latency_ms)
            if not step.forward:
                break
            self.messages.send("query", current, step.nearest)
            current, d = step.nearest, step.latency_ms
            visited.add(current)
            hops += 1
        if best[0] is None:
            best = self._fallback(current, target, ok)
        self.messages.send("answer", current, target)
        return QueryResult(best[0], best[1], hops, self.messages.total - start)

    def _fallback(self, current: str, target: str,
                  ok: Callable[[str], bool]) -> tuple[str | None, float]:
        """No eligible node was found in the band (the entry is full, say): the node asks
        every eligible member it knows, primaries first, and takes the closest."""
        for group in fallback_groups(self.nodes[current], ok):
            step = next_step(self.config, math.inf, self._ask(current, group, target, math.inf))
            if step.nearest is not None:
                return step.nearest, step.latency_ms
        return None, math.inf

    def _ask(self, current: str, members: list[str], target: str, d: float
             ) -> dict[str, float]:
        """`current` asks `members` to measure `target`; those within the cutoff for `d`
        answer (d = inf: every finite answer)."""
        answers: dict[str, float] = {}
        for member in members:
            self.messages.send("query", current, member)
            dm = self._probe(member, target)
            if within_cutoff(self.config, d, dm):
                self.messages.send("answer", member, current)
                answers[member] = dm
        return answers


def matrix_measure(names: Iterable[str], rtt_ms: np.ndarray) -> Measure:
    """A `measure` backed by a matrix (NaN = no answer); row = prober."""
    index = {n: i for i, n in enumerate(names)}

    def measure(a: str, b: str) -> float:
        v = float(rtt_ms[index[a], index[b]])
        return v if v > 0 else math.nan

    return measure
