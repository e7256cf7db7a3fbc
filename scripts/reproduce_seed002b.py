#!/usr/bin/env python3
"""Seed 002b's figures: SITA-E, TAGS, Random and Least-Work-Left, model curves with
simulated points (95 % intervals across replications), and the TAGS / SITA-E ratio.

    python scripts/reproduce_seed002b.py [--requests N] [--replications R] [--workers W]
                                         [--only load|alpha|ratio] [--out docs/figures]

Writes <out>/seed002b_{load,alpha,ratio}.{png,csv}.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.scenario import load_scenario  # noqa: E402
from runner.size_figures import (  # noqa: E402
    curves,
    plot,
    ratio_plot,
    read_csv,
    simulate_points,
    write_csv,
)

FIGURES = {
    "load": ("seed002b_load.yaml", ["wait", "slowdown"], "load (rho)", False),
    "alpha": ("seed002b_alpha.yaml", ["wait", "slowdown"], "Pareto shape alpha", False),
    "ratio": ("seed002b_ratio.yaml", ["wait"], "H / L (largest / smallest size)", True),
}

RATIO_LOADS = (0.1, 0.01, 0.001)  # model curves of the ratio figure


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="per replication")
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=sorted(FIGURES))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    ap.add_argument("--plot-only", action="store_true",
                    help="redraw from the .csv files in --out, simulating nothing")
    ns = ap.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)
    for key, (fname, metrics, xlabel, logx) in FIGURES.items():
        if ns.only and key != ns.only:
            continue
        t0 = time.perf_counter()
        base = load_scenario(ROOT / "scenarios" / fname)
        assert base.sweep is not None
        pols = list(base.sweep.policies)
        if ns.plot_only:
            pts = read_csv(ns.out / f"seed002b_{key}.csv")
        else:
            pts = simulate_points(base, pols, ns.requests, ns.replications, ns.workers)
        if key == "ratio":
            for x, r, hw in ratio_plot(ns.out / "seed002b_ratio.png", base, pts, RATIO_LOADS):
                print(f"  H/L {x:<8.3g} TAGS/SITA-E wait, simulated: {r:.3f} ± {hw:.3f}")
        else:
            model = curves(base, [p for p in pols if p != "least_work_left"])
            plot(ns.out / f"seed002b_{key}.png", base, pts, model, metrics, xlabel, logx)
        if not ns.plot_only:
            write_csv(ns.out / f"seed002b_{key}.csv", pts)
        print(f"{key}: {len(pts)} points in {time.perf_counter() - t0:.0f} s -> "
              f"{ns.out / f'seed002b_{key}.png'}")
        for p in pts:
            print(f"  {p.policy:16} x={p.x:<10.4g} wait sim {p.sim['wait']['mean']:10.4g} "
                  f"± {p.sim['wait']['ci95']:<9.3g} model {p.pred['wait']:<10.4g} slowdown sim "
                  f"{p.sim['slowdown']['mean']:9.4g} model {p.pred['slowdown']:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
