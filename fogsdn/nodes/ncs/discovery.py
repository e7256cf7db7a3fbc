"""Seed 003's client, once for both engines (pure): the discovery step (select,
join or reconnect, one task), the client's knobs, its tally, and the metric row.

The simulator runs `discovery_step` through a simulated `ClientEngine`, the live client
(`fogsdn.city.mobile_client`) through its sockets; `city_metrics` gives both the same columns.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict

from fogsdn.nodes.ncs.selection import (
    SELECTORS,
    LoadAware,
    SelectionContext,
    SelectionError,
    Selector,
)

# the selectors whose clients keep a Vivaldi coordinate (and probe a random node per step)
VIVALDI_SELECTORS = ("vivaldi", "load_aware")
METRIC_COLUMNS = ("client_messages", "client_lost", "client_reconnections", "client_handovers",
                  "node_in", "node_out", "node_total", "optimal_rate", "selection_rmse_ms",
                  "unique_per_step", "mean_latency_ms", "connection_error_ms", "delivered")


@dataclass(frozen=True)
class ClientParams:
    """What a client does per step, the same in both engines (the study file's fields)."""

    period_s: tuple[float, float] = (0.5, 1.0)
    start_s: tuple[float, float] = (3.0, 10.0)
    max_attempts: int = 3
    timeout_ms: float = 100.0
    dimensions: int = 2  # Vivaldi
    bound_ms: float = 2.0  # load-aware shortlist bound
    # a pick that ties the best RTT: optimal (counted) or not, only the reference is
    optimal_ties: Literal["counted", "uncounted"] = "counted"


def make_selector(kind: str, params: ClientParams) -> Selector:
    if kind not in SELECTORS:
        raise SelectionError(f"selector: unknown {kind!r} (known: {', '.join(SELECTORS)})")
    return LoadAware(params.bound_ms) if kind == "load_aware" else SELECTORS[kind]()


TIE_MS = 1e-9  # RTTs this close are equal


def step_times_rng(seed: int, index: int) -> random.Random:
    """Client `index`'s own draws of its first step and its periods, the same in both
    engines (as its walk is): a live client steps when its simulated twin does, so the
    spread of the simulator's draws is all a live run of the same seed may add."""
    return random.Random(f"steps-{seed}-{index}")


def reference_node(rtt: Mapping[str, float]) -> str:
    """The optimal node: the lowest RTT, the first name among equals (as `Optimal` picks)."""
    return min(rtt, key=lambda n: (rtt[n], n))


def is_optimal(rtt: Mapping[str, float], chosen: str, ties: bool) -> bool:
    """Whether `chosen` is an optimal pick: any node within `TIE_MS` of the best RTT
    (`ties`), or only `reference_node`; the second never holds where the first does not."""
    if not ties:
        return chosen == reference_node(rtt)
    return rtt[chosen] <= min(rtt.values()) + TIE_MS


class TallyDoc(TypedDict):
    """`ClientTally` as JSON (`ClientTally.to_doc`; a live client's result file)."""

    lost: int
    reconnections: int
    handovers: int
    selections: int
    optimal_hits: int
    sq_sel_err: float
    sq_conn_err: float
    delivered: int
    messages: int
    latencies: list[float]
    picks: list[tuple[int, str]]


@dataclass
class ClientTally:
    """One client's record: what `city_metrics` needs, written by either engine."""

    lost: int = 0
    reconnections: int = 0
    handovers: int = 0
    selections: int = 0
    optimal_hits: int = 0
    sq_sel_err: float = 0.0
    sq_conn_err: float = 0.0
    delivered: int = 0
    messages: int = 0  # sent and received, every kind
    latencies: list[float] = field(default_factory=list)
    picks: list[tuple[int, str]] = field(default_factory=list)  # (whole second, node)

    def score(self, rtt: Mapping[str, float], chosen: str, t_s: float,
              ties: bool = True) -> None:
        """A selection against the best node by the true RTTs at that moment (`ties`:
        whether a pick tying the best counts as optimal, `is_optimal`)."""
        best = min(rtt.values())
        self.selections += 1
        self.optimal_hits += is_optimal(rtt, chosen, ties)
        self.sq_sel_err += (rtt[chosen] - best) ** 2
        self.picks.append((int(t_s), chosen))

    def deliver(self, rtt_ms: float, best_ms: float) -> None:
        """A task answered after `rtt_ms`; `best_ms`: the best RTT any node offered it."""
        self.delivered += 1
        self.latencies.append(rtt_ms)
        self.sq_conn_err += (rtt_ms - best_ms) ** 2

    def to_doc(self) -> TallyDoc:
        return {"lost": self.lost, "reconnections": self.reconnections,
                "handovers": self.handovers, "selections": self.selections,
                "optimal_hits": self.optimal_hits, "sq_sel_err": self.sq_sel_err,
                "sq_conn_err": self.sq_conn_err, "delivered": self.delivered,
                "messages": self.messages, "latencies": list(self.latencies),
                "picks": list(self.picks)}

    @classmethod
    def from_doc(cls, doc: TallyDoc) -> ClientTally:
        """The tally `to_doc` wrote (its picks as JSON gives them back: lists)."""
        return cls(doc["lost"], doc["reconnections"], doc["handovers"], doc["selections"],
                   doc["optimal_hits"], doc["sq_sel_err"], doc["sq_conn_err"],
                   doc["delivered"], doc["messages"], doc["latencies"], doc["picks"])


class ClientEngine(Protocol):
    """One client's network, the simulator's or the sockets: what the selector may know
    now (discovery messages are the engine's); every node's true RTT now (the score);
    take a slot (False when full: the step's task is lost) or give it back; send the
    step's task and tally its reply or loss; one Vivaldi probe to a node."""

    def context(self, excluded: frozenset[str]) -> SelectionContext: ...

    def true_rtt(self) -> Mapping[str, float]: ...

    def join(self, node: str) -> bool: ...

    def leave(self, node: str) -> None: ...

    def task(self, node: str) -> None: ...

    def probe(self, node: str) -> None: ...


def discovery_step(engine: ClientEngine, selector: Selector, node: str | None,
                   nodes: Sequence[str], params: ClientParams, tally: ClientTally,
                   rng: random.Random, t_s: float, vivaldi: bool) -> str | None:
    """One step: ask the selector; a new node with a free slot takes the client (the old
    slot is released); a full one loses the step's task and the client reconnects,
    excluding it, at most `max_attempts` times; then one task. Returns the node held."""
    excluded: set[str] = set()
    for _ in range(params.max_attempts):
        chosen = selector.select(engine.context(frozenset(excluded)), rng)
        if chosen is None:
            break
        tally.score(engine.true_rtt(), chosen, t_s, params.optimal_ties == "counted")
        if chosen == node:
            break
        if engine.join(chosen):
            if node is not None:
                engine.leave(node)
                tally.handovers += 1
            node = chosen
            break
        tally.lost += 1
        tally.reconnections += 1
        excluded.add(chosen)
    if node is not None:
        engine.task(node)
        if vivaldi:
            engine.probe(rng.choice(list(nodes)))
    return node


def city_metrics(clients: Sequence[ClientTally], node_in: Sequence[int],
                 node_out: Sequence[int]) -> dict[str, float]:
    """The study's metric columns (`METRIC_COLUMNS`) from the clients' tallies and the fog
    nodes' incoming and outgoing message counts; NaN where there is nothing to average."""
    nan = math.nan

    def mean(xs: Sequence[float]) -> float:
        return statistics.mean(xs) if xs else nan

    sel = sum(c.selections for c in clients)
    picks: dict[int, set[str]] = defaultdict(set)
    for c in clients:
        for t, n in c.picks:
            picks[t].add(n)
    lat = [x for c in clients for x in c.latencies]
    return {
        "client_messages": mean([c.messages for c in clients]),
        "client_lost": mean([c.lost for c in clients]),
        "client_reconnections": mean([c.reconnections for c in clients]),
        "client_handovers": mean([c.handovers for c in clients]),
        "node_in": mean(node_in),
        "node_out": mean(node_out),
        "node_total": mean([a + b for a, b in zip(node_in, node_out, strict=True)]),
        "optimal_rate": sum(c.optimal_hits for c in clients) / sel if sel else nan,
        "selection_rmse_ms": math.sqrt(sum(c.sq_sel_err for c in clients) / sel)
        if sel else nan,
        "unique_per_step": mean([len(s) for s in picks.values()]),
        "mean_latency_ms": mean(lat),
        "connection_error_ms": mean([math.sqrt(c.sq_conn_err / c.delivered)
                                     for c in clients if c.delivered]),
        "delivered": len(lat),
    }
