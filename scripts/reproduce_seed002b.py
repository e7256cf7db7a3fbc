#!/usr/bin/env python3
"""Seed 002b: the figures and the claims table.

Figures (SITA-E, TAGS, Random, Least-Work-Left: model curves with simulated points, and
the TAGS / SITA-E ratio): the study driver on scenarios/seed002b_{load,alpha,ratio}.yaml,
writing docs/figures/seed002b_*.{png,csv}; every option not listed below goes to
scripts/sweep.py. Claims: the six claims of the seed's abstract with a verdict each
(`fogsdn/measure/seed002b_claims.py`), the light-traffic and QoS tables and figures
(docs/figures/seed002b_light_h.png, seed002b_light_alpha.png, seed002b_qos.png, and
seed002b-claims.{json,md}); --doc replaces the table between
`<!-- seed002b-claims:begin -->` and `<!-- seed002b-claims:end -->`.

    python scripts/reproduce_seed002b.py [--figures-only | --claims-only]
        [--claims-requests N] [--claims-replications R] [--claims-workers W]
        [--json F] [--markdown F] [--doc docs/size_based.md] [--from-json F] [--figures DIR]
        [sweep.py's options: --requests N --replications R --workers W --plot-only ...]

The claims' light-traffic points read docs/figures/seed002b_alpha.csv (claim 1) if
present; run the figures first.
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

ROOT = Path(__file__).resolve().parent.parent
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
    result: dict[str, Any] = {
        "light_load": c.LIGHT_LOAD,
        "simulated": {"requests": requests, "replications": replications},
        "light_i": c.light_rows(1.0, c.I_HIGHS, c.I_HOSTS),
        "light_ii": [r for a in c.II_ALPHAS for r in c.light_rows(a, c.II_HIGHS, c.II_HOSTS)],
        "light_sim": c.light_sim_rows(light),
        "two_server": c.two_server_rows(),
        "qos": c.qos_rows(qos),
        "qos_setup": {"size": c.QOS_SIZE, "lambda": c.QOS_LAMBDA,
                      "targets": {k: [vars(x) for x in v] for k, v in c.QOS_TARGETS.items()}},
        "alpha_csv": _alpha_csv(FIGS / "seed002b_alpha.csv"),
    }
    result["claims"] = c.claim_rows(result)
    result["wall_s"] = time.perf_counter() - t0
    return result


def _g(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.2e}"


def markdown(result: dict[str, Any]) -> str:
    sim = result["simulated"]
    out = ["| # | claim (seed 002b's abstract) | ours | verdict | deciding choice |",
           "|---|---|---|---|---|"]
    for i, r in enumerate(result["claims"], 1):
        out.append(f"| {i} | {r['claim']} | {r['ours']} | {r['verdict']} | "
                   f"{r['deciding'] or '-'} |")
    out += ["", "Light traffic, alpha = 1: kappa_TAGS / kappa_SITA-E (claim i; TAGS at "
            "SITA-E's cutoffs, per-host approximation and exact; response-optimal TAGS):", "",
            "| H/L | h | fixed, approx. | fixed, exact | (2h-1)/h | response-optimal |",
            "|---|---|---|---|---|---|"]
    for r in result["light_i"]:
        out.append(f"| {r['high']:.0e} | {r['hosts']} | {_g(r['fixed_approx'])} | "
                   f"{_g(r['fixed_exact'])} | {_g(r['limit_fixed'])} | "
                   f"{_g(r['response_optimal'])} |")
    out += ["", "Light traffic, alpha != 1, growing h (claim ii):", "",
            "| alpha | H/L | h | fixed, approx. | fixed, exact | response-optimal |",
            "|---|---|---|---|---|---|"]
    for r in result["light_ii"]:
        out.append(f"| {r['alpha']:g} | {r['high']:.0e} | {r['hosts']} | "
                   f"{_g(r['fixed_approx'])} | {_g(r['fixed_exact'])} | "
                   f"{_g(r['response_optimal'])} |")
    out += ["", f"Simulated at load {result['light_load']:g} (H/L = 100; "
            f"{sim['replications']} x {sim['requests']:,} requests, ratio per replication, "
            "95 % interval) beside the light-traffic limit and the model at that load:", "",
            "| alpha | h | TAGS | simulated | light traffic, exact | approx. (limit) "
            "| approx. at the load |", "|---|---|---|---|---|---|---|"]
    for r in result["light_sim"]:
        s = r["sim"]
        out.append(f"| {r['alpha']:g} | {r['hosts']} | "
                   f"{'fixed' if r['tags'] == 'tags_fixed' else 'response-optimal'} | "
                   f"{_g(s['mean'])} ± {_g(s['ci95'])} | {_g(r['light_exact'])} | "
                   f"{_g(r['light_approx']) if 'light_approx' in r else '-'} | "
                   f"{_g(r['model_at_load']) if 'model_at_load' in r else '-'} |")
    qs = result["qos_setup"]
    out += ["", f"QoS design (claim iii; sizes bounded Pareto {qs['size']}, lambda = "
            f"{qs['lambda']:g} per model ms, hosts of mu = 1):", "",
            "| targets | policy | sizes | target | hosts | cutoffs inside | model | "
            "simulated | met |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["qos"]:
        if "none" in r:
            out.append(f"| {r['targets']} | {r['policy'].upper()} | all | - | none | - | - "
                       f"| - | {r['none']} |")
            continue
        s = r["sim"]
        lo, hi = r["sizes"]
        cut = ", ".join(f"{x:.3g}" for x in r["cutoffs"]) or "-"
        out.append(f"| {r['targets']} | {r['policy'].upper()} | ({lo:g}, {hi:g}] | "
                   f"{r['metric']} <= {r['target']:g} | {r['hosts']} | {cut} | "
                   f"{_g(r['model'])} | {_g(s['mean'])} ± {_g(s['ci95'])} | "
                   f"{'yes' if r['meets_sim'] else 'no'} |")
    return "\n".join(out) + "\n"


def draw(result: dict[str, Any], figs: Path) -> None:
    from fogsdn.measure.figures import draw_seed002b_light, draw_seed002b_qos

    figs.mkdir(parents=True, exist_ok=True)
    sim = result["light_sim"]
    draw_seed002b_light(figs / "seed002b_light_h.png", result["light_i"],
                        [r for r in sim if r["alpha"] == 1.0], "high", "hosts",
                        "seed 002b (i): light traffic, alpha = 1")
    ii = [r for r in result["light_ii"] if r["high"] == 100.0]  # the simulated points
    draw_seed002b_light(figs / "seed002b_light_alpha.png", ii,
                        [r for r in sim if r["alpha"] != 1.0], "hosts", "alpha",
                        "seed 002b (ii): light traffic, H/L = 100")
    draw_seed002b_qos(figs / "seed002b_qos.png", result["qos"])


def claims(a: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from fogsdn.core.summary import json_safe

    result = (json.loads(a.from_json.read_text()) if a.from_json is not None
              else run_claims(a.claims_requests, a.claims_replications, a.claims_workers))
    table = markdown(result)
    a.json.write_text(json.dumps(json_safe(result), indent=1) + "\n")
    a.markdown.write_text(table)
    draw(result, a.figures)
    if a.doc is not None:
        text = a.doc.read_text()
        head, s1, rest = text.partition(BEGIN)
        _, s2, tail = rest.partition(END)
        if not (s1 and s2):
            raise SystemExit(f"{a.doc}: no {BEGIN} ... {END} markers")
        a.doc.write_text(f"{head}{BEGIN}\n{table}{END}{tail}")
    print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="seed 002b: figures and claims table")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--figures-only", action="store_true")
    only.add_argument("--claims-only", action="store_true")
    ap.add_argument("--claims-requests", type=int, default=200_000)
    ap.add_argument("--claims-replications", type=int, default=3)
    ap.add_argument("--claims-workers", type=int, default=1)
    ap.add_argument("--json", type=Path, default=FIGS / "seed002b-claims.json")
    ap.add_argument("--markdown", type=Path, default=FIGS / "seed002b-claims.md")
    ap.add_argument("--doc", type=Path, default=None)
    ap.add_argument("--figures", type=Path, default=FIGS,
                    help="where the claims' figures go (default docs/figures)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="render the table and figures of an earlier run (no simulation)")
    a, rest = ap.parse_known_args(argv)
    rc = 0 if a.claims_only else figures(rest)
    if a.figures_only:
        return rc
    return max(rc, claims(a))


if __name__ == "__main__":
    raise SystemExit(main())
