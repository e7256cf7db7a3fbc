#!/usr/bin/env python3
"""Seed 002b: the figures and the claims table.

Figures (SITA-E, TAGS, Random, Least-Work-Left: model curves with simulated points, and
the TAGS / SITA-E ratio): the study driver on scenarios/seed002b_{load,alpha,ratio}.yaml,
writing docs/figures/seed002b_*.{png,csv}; every option not listed below goes to
scripts/sweep.py. Claims: the six claims of the seed's abstract with a verdict each
(`fogsdn/measure/seed002b_claims.py`), the two-server, light-traffic and QoS tables and
figures (docs/figures/seed002b_two_server.png, seed002b_light_h.png,
seed002b_light_alpha.png, seed002b_qos.png, and seed002b-claims.{json,md}); --doc
replaces the table between `<!-- seed002b-claims:begin -->` and
`<!-- seed002b-claims:end -->`.

    python scripts/reproduce_seed002b.py [--figures-only | --claims-only]
        [--claims-requests N] [--claims-replications R] [--claims-workers W]
        [--json F] [--markdown F] [--doc docs/size_based.md] [--from-json F] [--figures DIR]
        [sweep.py's options: --requests N --replications R --workers W --plot-only ...]

The claims read the figures' docs/figures/seed002b_alpha.csv (claim 1) and
seed002b_ratio.csv (the two-server figure's load-0.1 points) if present; run the
figures first. The claims alone take 3-5 minutes at nice 19 on 2 shared cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import bootstrap  # the project on sys.path, OneLineParser and fail

ROOT = bootstrap.ROOT
FIGS = ROOT / "docs" / "figures"
BEGIN, END = "<!-- seed002b-claims:begin -->", "<!-- seed002b-claims:end -->"


def figures(argv: list[str]) -> int:
    return max(subprocess.call([sys.executable, str(ROOT / "scripts" / "sweep.py"),
                                "--scenario", str(ROOT / "scenarios" / f"seed002b_{fig}.yaml"),
                                "--out", str(FIGS), *argv])
               for fig in ("load", "alpha", "ratio"))


def _simulate(job: Any) -> dict[str, Any]:
    from fogsdn.measure.size_compare import SizeStats
    from fogsdn.sim.engine import simulate

    stats = SizeStats(job.scenario)
    simulate(job.scenario, stats, requests=job.requests, replication=job.replication)
    return stats.summary()


def _alpha_csv(path: Path) -> dict[str, float]:
    """Simulated mean slowdowns from the alpha sweep: {"policy@alpha": value}."""
    if not path.exists():
        return {}
    with path.open() as f:
        return {f"{r['policy']}@{float(r['x']):g}": float(r["slowdown_sim"])
                for r in csv.DictReader(f)}


def _ratio_csv(path: Path) -> list[dict[str, float]]:
    """Simulated TAGS / SITA-E mean wait from the ratio sweep (two hosts, load 0.1)."""
    if not path.exists():
        return []
    with path.open() as f:
        wait = {(r["policy"], float(r["x"])): float(r["wait_sim"]) for r in csv.DictReader(f)}
    return [{"high": x, "ratio": w / wait[("sita_e", x)]}
            for (policy, x), w in sorted(wait.items()) if policy == "tags"]


def run_claims(requests: int, replications: int, workers: int) -> dict[str, Any]:
    from fogsdn.measure import seed002b_claims as c

    t0 = time.perf_counter()
    jobs = c.light_jobs(requests, replications) + c.qos_jobs(requests, replications)
    print(f"[claims] {len(jobs)} simulations of {requests:,} requests", flush=True)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            summaries = list(pool.map(_simulate, jobs))
    else:
        summaries = [_simulate(j) for j in jobs]
    light: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    qos: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for job, s in zip(jobs, summaries, strict=True):
        (light if job.group == "light" else qos).setdefault(job.key, []).append(s)
    print("[claims] models", flush=True)
    result: dict[str, Any] = {
        "light_load": c.LIGHT_LOAD,
        "simulated": {"requests": requests, "replications": replications},
        "light_i": c.light_rows(1.0, c.I_HIGHS, c.I_HOSTS),
        "light_ii": [r for a in c.II_ALPHAS for r in c.light_rows(a, c.II_HIGHS, c.II_HOSTS)],
        "light_sim": c.light_sim_rows(light),
        "two_server": c.two_server_rows(),
        "two_server_peaks": [c.two_server_peak(load) for load in c.TWO_LOADS],
        "qos": c.qos_rows(qos),
        "qos_setup": {"size": c.QOS_SIZE, "lambda": c.QOS_LAMBDA,
                      "targets": {k: [vars(x) for x in v] for k, v in c.QOS_TARGETS.items()}},
        "alpha_csv": _alpha_csv(FIGS / "seed002b_alpha.csv"),
        "ratio_csv": _ratio_csv(FIGS / "seed002b_ratio.csv"),
    }
    result["claims"] = c.claim_rows(result)
    result["wall_s"] = time.perf_counter() - t0
    return result


def draw(result: dict[str, Any], figs: Path) -> None:
    from fogsdn.measure.figures import (
        draw_seed002b_light,
        draw_seed002b_qos,
        draw_seed002b_two_server,
    )

    figs.mkdir(parents=True, exist_ok=True)
    sim = result["light_sim"]
    draw_seed002b_two_server(figs / "seed002b_two_server.png", result["two_server"],
                             result["two_server_peaks"], sim, result.get("ratio_csv", []))
    draw_seed002b_light(figs / "seed002b_light_h.png", result["light_i"],
                        [r for r in sim if r["alpha"] == 1.0], "high", "hosts",
                        "seed 002b (i): light traffic, alpha = 1")
    ii = [r for r in result["light_ii"] if r["high"] == 100.0]  # the simulated points
    draw_seed002b_light(figs / "seed002b_light_alpha.png", ii,
                        [r for r in sim if r["alpha"] != 1.0], "hosts", "alpha",
                        "seed 002b (ii): light traffic, H/L = 100")
    draw_seed002b_qos(figs / "seed002b_qos.png", result["qos"])


def claims(a: argparse.Namespace) -> int:
    from fogsdn.core.summary import json_safe
    from fogsdn.measure.seed002b_claims import claims_markdown

    if a.from_json is not None:
        try:
            result = json.loads(a.from_json.read_text())
            table = claims_markdown(result)
        except (OSError, ValueError, KeyError, TypeError) as err:
            return bootstrap.fail(f"reproduce_seed002b.py: --from-json {a.from_json}: "
                                  f"{type(err).__name__}: {err}")
    else:
        result = run_claims(a.claims_requests, a.claims_replications, a.claims_workers)
        table = claims_markdown(result)
    if a.doc is not None:
        text = a.doc.read_text() if a.doc.exists() else ""
        head, s1, rest = text.partition(BEGIN)
        _, s2, tail = rest.partition(END)
        if not (s1 and s2):
            return bootstrap.fail(f"reproduce_seed002b.py: {a.doc}: no {BEGIN} ... {END} "
                                  "markers")
    a.json.write_text(json.dumps(json_safe(result), indent=1) + "\n")
    a.markdown.write_text(table)
    draw(result, a.figures)
    if a.doc is not None:
        a.doc.write_text(f"{head}{BEGIN}\n{table}{END}{tail}")
    print(table)
    return 0


def _positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = bootstrap.OneLineParser(prog="reproduce_seed002b.py",
                                 description="seed 002b: figures and claims table")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--figures-only", action="store_true")
    only.add_argument("--claims-only", action="store_true")
    ap.add_argument("--claims-requests", type=_positive, default=100_000)
    ap.add_argument("--claims-replications", type=_positive, default=4)
    ap.add_argument("--claims-workers", type=_positive, default=1)
    ap.add_argument("--json", type=Path, default=FIGS / "seed002b-claims.json")
    ap.add_argument("--markdown", type=Path, default=FIGS / "seed002b-claims.md")
    ap.add_argument("--doc", type=Path, default=None)
    ap.add_argument("--figures", type=Path, default=FIGS,
                    help="where the claims' figures go (default docs/figures)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="render the table and figures of an earlier run (no simulation)")
    a, rest = ap.parse_known_args(argv)
    if a.claims_only and rest:
        ap.error(f"unrecognized arguments with --claims-only: {' '.join(rest)}")
    rc = 0 if a.claims_only else figures(rest)
    if a.figures_only:
        return rc
    return max(rc, claims(a))


if __name__ == "__main__":
    raise SystemExit(main())
