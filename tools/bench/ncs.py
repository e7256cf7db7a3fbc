"""Accuracy of our network coordinates on any RTT matrix (NaN = unknown pair).

    python scripts/bench_ncs.py --matrix FILE.npz [--key rtt_ms] [--json]
        [--cycles 1000] [--servers 20] [--seed 1] [--meridian-k K]
        [--meridian-alpha 1] [--meridian-s 1.5] [--gossip-rounds N] [--meridian-only]

Vivaldi (2-D + height, 8-D + height): the median relative error over known pairs.
Meridian (`--servers` hosts; k primaries per ring, by default the seed's floor(log_1.6
servers); the Meridian paper simulated k = 16, s = 2): hit rate, extra ms over the true
closest, probes and messages per query, beside picking at random. `--meridian-only`
skips Vivaldi (minutes on hundreds of hosts). Method: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from fogsdn.nodes.ncs.meridian import MeridianConfig, MeridianError
from tools.bench.common import OneLineParser, fail
from tools.rigs.ncs_accuracy import MatrixError, meridian_and_random, vivaldi_median_error


def load_matrix(path: Path, key: str) -> np.ndarray:
    if not path.is_file():
        raise MatrixError(f"--matrix: no such file {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            if key not in data.files:
                have = ", ".join(data.files)
                raise MatrixError(f"--key: {key!r} not in {path.name} (has {have})")
            return np.array(data[key], dtype=float)
    except (OSError, ValueError) as err:
        if isinstance(err, MatrixError):
            raise
        raise MatrixError(f"--matrix: cannot read {path}: {err}") from None


def bench(m: np.ndarray, cycles: int, servers: int, seed: int,
          config: MeridianConfig, gossip_rounds: int | None = None,
          vivaldi: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "hosts": int(m.shape[0]),
        "known_pairs": int(np.isfinite(m).sum() - np.isfinite(np.diag(m)).sum()),
    }
    if vivaldi:
        for key, dims in (("vivaldi_2dh", 2), ("vivaldi_8dh", 8)):
            error = vivaldi_median_error(m, dims, cycles, seed)
            out[key] = {"median_rel_error": round(error, 4), "cycles": cycles}
    mer, rnd = meridian_and_random(m, servers, seed, config, gossip_rounds)
    return out | {
        "meridian": {"hit_rate": round(mer.hit_rate, 4),
                     "mean_extra_ms": round(mer.mean_extra_ms, 3),
                     "median_extra_ms": round(mer.median_extra_ms, 3),
                     "probes_per_query": round(mer.probes_per_query or 0.0, 2),
                     "messages_per_query": round(mer.messages_per_query or 0.0, 2),
                     "servers": servers, "queries": mer.queries,
                     "k": config.primaries(servers), "alpha_ms": config.alpha_ms,
                     "s": config.s, "beta": config.beta, "rings": config.rings,
                     "gossip_rounds": mer.gossip_rounds,
                     "known_share": round(mer.known_share or 0.0, 4)},
        "random": {"hit_rate": round(rnd.hit_rate, 4),
                   "mean_extra_ms": round(rnd.mean_extra_ms, 3),
                   "median_extra_ms": round(rnd.median_extra_ms, 3)},
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="bench_ncs.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrix", type=Path, required=True)
    ap.add_argument("--key", default="rtt_ms")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--servers", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--meridian-k", type=int, default=None,
                    help="primaries per ring (default: floor(log_1.6 servers), the seed's)")
    ap.add_argument("--meridian-alpha", type=float, default=1.0)
    ap.add_argument("--meridian-s", type=float, default=1.5)
    ap.add_argument("--gossip-rounds", type=int, default=None,
                    help="Meridian gossip rounds (default: until every server knows the others)")
    ap.add_argument("--meridian-only", action="store_true", help="skip Vivaldi")
    args = ap.parse_args(argv)
    if args.cycles < 1:
        ap.error("--cycles: must be >= 1")
    if args.meridian_k is not None and args.meridian_k < 1:
        ap.error(f"--meridian-k: must be >= 1, got {args.meridian_k}")
    if args.gossip_rounds is not None and args.gossip_rounds < 0:
        ap.error(f"--gossip-rounds: must be >= 0, got {args.gossip_rounds}")
    try:
        config = MeridianConfig(k=args.meridian_k, alpha_ms=args.meridian_alpha, s=args.meridian_s)
        out = bench(load_matrix(args.matrix, args.key), args.cycles, args.servers, args.seed,
                    config, args.gossip_rounds, vivaldi=not args.meridian_only)
    except (MatrixError, MeridianError) as err:
        return fail(f"bench_ncs.py: error: {err}")
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.matrix.name}[{args.key}]: {out['hosts']} hosts, {out['known_pairs']} known "
          f"directed pairs, seed {args.seed}")
    for key in [k for k in ("vivaldi_2dh", "vivaldi_8dh") if k in out]:
        print(f"  {key}: median relative error {out[key]['median_rel_error']:.1%} "
              f"after {args.cycles} cycles")
    mer, rnd = out["meridian"], out["random"]
    print(f"  meridian ({args.servers} servers, k {mer['k']}, alpha {config.alpha_ms} ms, "
          f"s {config.s}, beta {config.beta}; {mer['gossip_rounds']} gossip rounds, "
          f"{mer['known_share']:.0%} of server pairs known): "
          f"hit rate {mer['hit_rate']:.1%}, extra ms mean {mer['mean_extra_ms']:.2f} "
          f"median {mer['median_extra_ms']:.2f}, {mer['probes_per_query']:.1f} probes and "
          f"{mer['messages_per_query']:.1f} messages per query")
    print(f"  random: hit rate {rnd['hit_rate']:.1%}, extra ms mean {rnd['mean_extra_ms']:.2f} "
          f"median {rnd['median_extra_ms']:.2f}")
    print(f"  ({out['seconds']} s)")
    return 0

