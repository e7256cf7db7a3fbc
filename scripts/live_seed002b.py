#!/usr/bin/env python3
"""Live points for seed 002b: SITA-E and TAGS (and Least-Work-Left) on the testbed at a few
loads, beside the model. Root + Open vSwitch; run it under the emulation lock:

    sudo flock /tmp/fogsdn-emulation.lock python scripts/live_seed002b.py \
        [--loads 0.3 0.5 0.7] [--policies sita_e tags] [--duration-s 20] [--time-scale 4]

Sizes: bounded Pareto alpha 1.5 on [1, 100] (a size-100 task lasts 100 model ms); two
hosts of mu = 1. Writes results/seed002b-live/<policy>-<load>/ and a table
(docs/figures/seed002b_live.csv with --out docs/figures).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=True, extras="")

from analysis.size_compare import bounded_pareto, size_scenario  # noqa: E402
from runner.queueing_run import run_emulation  # noqa: E402


def plot_live(folder: Path) -> None:
    """seed002b_live.png from seed002b_live.csv in `folder`."""
    import csv

    from runner.size_figures import live_plot

    with open(folder / "seed002b_live.csv") as fh:
        live_plot(folder / "seed002b_live.png", list(csv.DictReader(fh)),
                  bounded_pareto(1.5, 1.0, 100.0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--policies", nargs="+", default=["sita_e", "tags"])
    ap.add_argument("--duration-s", type=float, default=20.0, help="real seconds per point")
    ap.add_argument("--time-scale", type=float, default=4.0, help="real ms per model ms")
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "seed002b-live")
    ap.add_argument("--out", type=Path, help="folder for seed002b_live.{csv,png}")
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure from the csv")
    ns = ap.parse_args(argv)
    if ns.plot_only and ns.out is not None:
        plot_live(ns.out)
        return 0
    sizes = bounded_pareto(1.5, 1.0, 100.0)
    lines = ["policy,load,answered,other,W_live,W_live_ci95,W_model,wait_live,wait_model,"
             "slowdown_live,slowdown_model,model"]
    for pol in ns.policies:
        for load in ns.loads:
            dur = ns.duration_s * 1000.0 / ns.time_scale
            sc = size_scenario(pol, 2, load, sizes, seed=7, name=f"seed002b-live-{pol}",
                               duration_ms=dur, warmup_ms=min(50.0, dur / 10))
            sc = sc.with_overrides({"time_scale": ns.time_scale, "timeout_ms": 5000.0,
                                    "deadline_ms": 1000.0})
            out = ns.results / f"{pol}-{load:g}"
            summary = run_emulation(sc, out, show_progress=False)
            sb = summary.get("size_based") or json.loads(
                (out / "summary.json").read_text()).get("size_based", {})
            m = sb["measured"]["overall"]
            p = (sb.get("predicted") or {}).get("overall", {})
            kind = "none" if not p else ("exact" if sb["predicted"]["exact"] else "approx")

            def f(x: object) -> str:
                return "" if x is None else f"{float(x):.6g}"  # type: ignore[arg-type]

            lines.append(",".join([pol, f"{load:g}", str(m["count"]),
                                   str(sb["measured"]["other_outcomes"]), f(m["W"]),
                                   f(summary["measured"]["lp"]["W_ci95"]), f(p.get("W")),
                                   f(m["wait"]), f(p.get("wait")),
                                   f(m["slowdown"]), f(p.get("slowdown")), kind]))
            print(lines[-1], flush=True)
    if ns.out is not None:
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / "seed002b_live.csv").write_text("\n".join(lines) + "\n")
        plot_live(ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
