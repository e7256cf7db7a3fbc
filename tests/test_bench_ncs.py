"""bench_ncs.py and the replay behind it: NaN pairs, scoring, the JSON keys, bad input."""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from fogsdn.nodes.ncs.meridian import MeridianConfig
from tools.rigs.ncs_accuracy import (
    MatrixError,
    check_matrix,
    meridian_and_random,
    vivaldi_median_error,
)

SEATTLE = Path(__file__).parent / "data" / "seattle99.npz"


def _plane(n: int, seed: int, side: float = 40.0, base_ms: float = 2.0) -> np.ndarray:
    rng = random.Random(seed)
    pts = [(rng.uniform(0, side), rng.uniform(0, side)) for _ in range(n)]
    return np.array([[math.dist(p, q) + base_ms for q in pts] for p in pts])


def test_vivaldi_replay_skips_unknown_pairs() -> None:
    m = _plane(20, 1)
    holes = m.copy()
    holes[0, 1:6] = np.nan
    holes[3, 4] = 0.0  # non-positive counts as unknown
    assert vivaldi_median_error(holes, 2, 300, seed=2) < 0.05


def test_meridian_beats_random_on_a_plane() -> None:
    mer, rnd = meridian_and_random(_plane(60, 3), servers=20, seed=4)
    assert mer.queries == 40
    assert mer.hit_rate > 2 * rnd.hit_rate
    assert mer.mean_extra_ms < rnd.mean_extra_ms / 3
    assert mer.probes_per_query is not None and mer.probes_per_query >= 1


def test_meridian_with_the_papers_ring_size_finds_the_closest_on_a_metric() -> None:
    """220 hosts on a 100 ms plane (a metric), 20 servers, k = 16, s = 2 (the Meridian
    paper's simulation): on the settled overlay nearly every query finds the closest
    server (98 % for this seed). Ten gossip rounds leave servers not knowing each other,
    and fewer queries find it (84 %)."""
    m = _plane(220, 1, side=100.0, base_ms=1.0)
    config = MeridianConfig(k=16, s=2.0)
    settled, _ = meridian_and_random(m, servers=20, seed=1, config=config)
    assert settled.known_share == 1.0 and settled.gossip_rounds is not None
    assert settled.hit_rate >= 0.9
    assert settled.probes_per_query is not None and settled.probes_per_query < 20
    early, _ = meridian_and_random(m, servers=20, seed=1, config=config, gossip_rounds=10)
    assert early.gossip_rounds == 10 and early.known_share is not None
    assert early.known_share < 0.9
    assert early.hit_rate < settled.hit_rate


def _reference_hit_rate(m: np.ndarray, servers: int, seed: int, k: int, s: float,
                        beta: float = 0.5, rings: int = 8) -> float:
    """A simplified Meridian (the Meridian paper's query, alpha = 1 ms): every server
    knows all the others and keeps k random ones per ring; it asks the members within
    [(1 - beta) d, (1 + beta) d], ignores answers beyond (2 beta + 1) d, moves to the
    nearest answer while it is at most beta * d, and the query returns the nearest
    node measured."""
    rng = random.Random(seed)
    n = len(m)
    idx = sorted(rng.sample(range(n), servers))
    members: dict[int, list[int]] = {}
    for a in idx:
        by_ring: dict[int, list[int]] = {}
        for b in idx:
            if b != a:
                i = 0 if m[a, b] <= 1.0 else math.ceil(math.log(m[a, b]) / math.log(s) - 1e-12)
                by_ring.setdefault(min(max(i, 0), rings - 1), []).append(b)
        members[a] = [x for ring in by_ring.values() for x in rng.sample(ring, min(k, len(ring)))]
    hits = 0
    clients = [c for c in range(n) if c not in idx]
    for c in clients:
        node = rng.choice(idx)
        d, best, visited = m[node, c], m[node, c], {node}
        while True:
            band = [x for x in members[node] if x not in visited
                    and (1 - beta) * d <= m[node, x] <= (1 + beta) * d]
            answers = {x: m[x, c] for x in band if m[x, c] <= (2 * beta + 1) * d}
            if not answers:
                break
            nearest = min(answers, key=lambda x: answers[x])
            best = min(best, answers[nearest])
            if answers[nearest] > beta * d:
                break
            node, d = nearest, answers[nearest]
            visited.add(node)
        hits += best <= min(m[c, x] for x in idx)
    return hits / len(clients)


def test_meridian_matches_a_simplified_reference() -> None:
    """At the Meridian paper's parameters (k = 16, s = 2, beta = 0.5), ours on a settled
    overlay finds the closest server as often as the simplified reference (random ring
    members, full knowledge): within 5 points over three seeds."""
    m = _plane(220, 2, side=100.0, base_ms=1.0)
    ours = statistics.mean(
        meridian_and_random(m, 20, seed, MeridianConfig(k=16, s=2.0))[0].hit_rate
        for seed in (1, 2, 3))
    reference = statistics.mean(_reference_hit_rate(m, 20, seed, k=16, s=2.0)
                                for seed in (1, 2, 3))
    assert reference > 0.85
    assert abs(ours - reference) < 0.05


@pytest.mark.parametrize("bad, why", [
    (np.zeros((3, 4)), "square"),
    (np.full((5, 5), np.nan), "no known RTT"),
    (np.ones((2, 2)), "at least 3"),
])
def test_bad_matrices_are_named(bad: np.ndarray, why: str) -> None:
    with pytest.raises(MatrixError, match=why):
        check_matrix(bad)


def test_servers_out_of_range() -> None:
    with pytest.raises(MatrixError, match="servers"):
        meridian_and_random(_plane(10, 1), servers=10, seed=1)


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_ncs.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_script_json_on_seattle() -> None:
    r = _script("--matrix", str(SEATTLE), "--key", "rtt_sym_ms", "--cycles", "30", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("vivaldi_2dh", "vivaldi_8dh"):
        assert 0 < out[key]["median_rel_error"] < 1
    assert set(out["meridian"]) >= {"hit_rate", "mean_extra_ms", "probes_per_query"}
    assert set(out["random"]) >= {"hit_rate", "mean_extra_ms"}
    assert out["meridian"]["mean_extra_ms"] < out["random"]["mean_extra_ms"]


def test_script_names_a_missing_key(tmp_path: Path) -> None:
    f = tmp_path / "m.npz"
    np.savez(f, other=_plane(5, 1))
    r = _script("--matrix", str(f))
    assert r.returncode == 2
    assert "--key: 'rtt_ms' not in m.npz (has other)" in r.stderr


def test_script_meridian_only_with_k(tmp_path: Path) -> None:
    r = _script("--matrix", str(SEATTLE), "--key", "rtt_sym_ms", "--meridian-only",
                "--meridian-k", "16", "--meridian-s", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "vivaldi_2dh" not in out
    mer = out["meridian"]
    assert mer["k"] == 16 and mer["s"] == 2.0 and mer["known_share"] == 1.0
    assert 1 <= mer["probes_per_query"] <= 20 and 0 <= mer["hit_rate"] <= 1


@pytest.mark.parametrize("args, flag", [
    (("--meridian-k", "0"), "--meridian-k"),
    (("--meridian-k", "many"), "--meridian-k"),
    (("--gossip-rounds", "-1"), "--gossip-rounds"),
])
def test_script_flag_errors_are_one_line(args: tuple[str, ...], flag: str) -> None:
    r = _script("--matrix", str(SEATTLE), *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench_ncs.py: error:") and flag in lines[0]
