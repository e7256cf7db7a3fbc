"""Replay an RTT matrix through Vivaldi and Meridian and score them (pure; behind
`scripts/bench_ncs.py`). NaN or a non-positive entry is an unknown pair: never sampled,
left out of the error, unanswered by a probe. Meridian is scored on a settled overlay
(docs/benchmarks.md).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

import numpy as np

from fogsdn.nodes.ncs.meridian import MeridianConfig, MeridianOverlay, matrix_measure
from fogsdn.nodes.ncs.vivaldi import VivaldiConfig, VivaldiNode, relative_errors, simulate

MAX_GOSSIP_ROUNDS = 1000  # the cap when gossiping until every server knows the others


class MatrixError(ValueError):
    """An RTT matrix that cannot be replayed; the message says why."""


def check_matrix(rtt_ms: np.ndarray) -> np.ndarray:
    m = np.asarray(rtt_ms, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise MatrixError(f"matrix: must be square 2-D, got shape {m.shape}")
    if m.shape[0] < 3:
        raise MatrixError(f"matrix: needs at least 3 hosts, got {m.shape[0]}")
    m = m.copy()
    m[~np.isfinite(m) | (m <= 0)] = np.nan
    np.fill_diagonal(m, np.nan)
    if np.isnan(m).all():
        raise MatrixError("matrix: no known RTT at all")
    return m


def vivaldi_median_error(rtt_ms: np.ndarray, dimensions: int, cycles: int, seed: int) -> float:
    """Median relative error over known pairs after `cycles` rounds of random probing."""
    m = check_matrix(rtt_ms)
    truth = m.tolist()
    config = VivaldiConfig(dimensions=dimensions)
    nodes = [VivaldiNode(config, random.Random(seed * 7919 + i)) for i in range(len(truth))]
    simulate(nodes, truth, cycles, random.Random(seed))
    return statistics.median(relative_errors([n.coord for n in nodes], truth))


@dataclass(frozen=True)
class SelectionScore:
    hit_rate: float
    mean_extra_ms: float
    median_extra_ms: float
    probes_per_query: float | None
    messages_per_query: float | None
    queries: int
    gossip_rounds: int | None = None  # the overlay's, before the queries
    known_share: float | None = None  # of measurable server pairs, when queries start


def known_share(overlay: MeridianOverlay, reachable: dict[str, set[str]]) -> float:
    """The share of (server, measurable other server) pairs the server has filed."""
    total = sum(len(r) for r in reachable.values())
    known = sum(len(reachable[n] & node.knows()) for n, node in overlay.nodes.items())
    return known / total if total else 1.0


def settle(overlay: MeridianOverlay, reachable: dict[str, set[str]], rng: random.Random,
           gossip_rounds: int | None) -> int:
    """Bootstrap, gossip and manage rings; the gossip rounds run. `gossip_rounds` None:
    until every server knows its `reachable` set (at most MAX_GOSSIP_ROUNDS)."""
    overlay.bootstrap(rng)
    rounds = 0
    while (rounds < gossip_rounds if gossip_rounds is not None
           else rounds < MAX_GOSSIP_ROUNDS and known_share(overlay, reachable) < 1.0):
        overlay.gossip_round(rng)
        rounds += 1
    overlay.manage_rings()
    return rounds


def meridian_and_random(rtt_ms: np.ndarray, servers: int, seed: int,
                        config: MeridianConfig | None = None,
                        gossip_rounds: int | None = None
                        ) -> tuple[SelectionScore, SelectionScore]:
    """`servers` random hosts run a settled Meridian overlay and every other host asks a
    random entry server for its closest; scored beside picking at random."""
    m = check_matrix(rtt_ms)
    n = len(m)
    if not 2 <= servers < n:
        raise MatrixError(f"servers: must be in [2, {n - 1}] for {n} hosts, got {servers}")
    rng = random.Random(seed)
    names = [f"h{i}" for i in range(n)]
    server_idx = sorted(rng.sample(range(n), servers))
    server_names = [names[i] for i in server_idx]
    overlay = MeridianOverlay(server_names, matrix_measure(names, m), config or MeridianConfig())
    reachable = {names[a]: {names[b] for b in server_idx if b != a and math.isfinite(m[a, b])}
                 for a in server_idx}
    rounds = settle(overlay, reachable, rng, gossip_rounds)
    share = known_share(overlay, reachable)
    pick_rng = random.Random(seed + 1)  # the random baseline does not depend on Meridian's draws
    mer_hits, mer_extra, rnd_hits, rnd_extra, msgs, probes = 0, [], 0, [], [], []
    for c in range(n):
        if c in server_idx:
            continue
        known = [(m[c, s], s) for s in server_idx if math.isfinite(m[c, s])]
        if not known:
            continue
        optimum = min(known)[0]
        before_probes = overlay.messages.by_kind["probe"]
        result = overlay.closest(names[c], rng.choice(server_names))
        msgs.append(result.messages)
        probes.append((overlay.messages.by_kind["probe"] - before_probes) / 2)
        got = result.latency_ms if result.node is not None else math.nan
        if math.isfinite(got):
            mer_hits += got <= optimum
            mer_extra.append(got - optimum)
        pick = pick_rng.choice(known)[0]
        rnd_hits += pick <= optimum
        rnd_extra.append(pick - optimum)
    queries = len(msgs)
    if queries == 0:
        raise MatrixError("matrix: no client knows its RTT to any server")
    mer = SelectionScore(mer_hits / queries,
                         statistics.mean(mer_extra) if mer_extra else math.nan,
                         statistics.median(mer_extra) if mer_extra else math.nan,
                         statistics.mean(probes), statistics.mean(msgs), queries,
                         rounds, share)
    rnd = SelectionScore(rnd_hits / queries, statistics.mean(rnd_extra),
                         statistics.median(rnd_extra), None, None, queries)
    return mer, rnd
