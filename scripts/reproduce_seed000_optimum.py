#!/usr/bin/env python3
"""The optimum's gain over the best built-in policy at every seed 000 figure point, as one
table, and the seed 000 figures redrawn with the optimal curve (docs/reproduction.md).

    python scripts/reproduce_seed000_optimum.py [--doc docs/reproduction.md] [--redraw]
        [--json docs/figures/seed000-optimum.json] [--markdown docs/figures/seed000-optimum.md]

--doc replaces the table between `<!-- seed000-optimum:begin -->` and
`<!-- seed000-optimum:end -->`. One process, one core: about 2 s a point.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bootstrap

bootstrap.bootstrap(needs_network_stack=False, extras="")
ROOT = bootstrap.ROOT

from reproduce_seed000_claims import publish, table_args  # noqa: E402

from fogsdn.core.csv_rows import read_csv_rows  # noqa: E402
from fogsdn.core.scenario import load_scenario  # noqa: E402
from fogsdn.exact.seed000_optimum import OBJECTIVE, point_optimum  # noqa: E402
from fogsdn.measure.figures import draw_sweep  # noqa: E402
from fogsdn.studies.sweep import aggregate, exact_curves, plan  # noqa: E402

FIGURES = ("4a", "4b", "5a", "5b")  # 6a, 6b: the points of 4a, 4b
MARKERS = ("<!-- seed000-optimum:begin -->", "<!-- seed000-optimum:end -->")


def run() -> dict[str, Any]:
    out: dict[str, Any] = {"objective": f"minimise {OBJECTIVE} subject to hp.W <= "
                                        "hp.W of prioritized at the same point",
                           "figures": {}}
    for fig in FIGURES:
        sc = load_scenario(ROOT / "scenarios" / f"seed000_fig{fig}.yaml")
        assert sc.sweep is not None
        rows = []
        for x in sc.sweep.values:
            t0 = time.perf_counter()
            o = point_optimum(sc.with_overrides({sc.sweep.parameter: x}))
            rows.append({"x": x, **o.to_dict(), "seconds": time.perf_counter() - t0})
            print(f"fig {fig} {sc.sweep.parameter}={x:g}: gain {100 * o.gain:.1f} % over "
                  f"{o.best.label if o.best else '-'} ({o.n_states} states, LP {o.seconds:.2f} "
                  f"s, point {rows[-1]['seconds']:.1f} s)", file=sys.stderr)
        out["figures"][fig] = {"parameter": sc.sweep.parameter, "points": rows}
    return out


def markdown(result: dict[str, Any]) -> str:
    """One row per figure point: the bound, the best built-in and the optimum."""
    lines = ["| fig | x | hp.W bound (proposed) | best built-in meeting it | its all.W "
             "| optimal all.W (lp.W) | gain | HP outage: proposed, optimal |",
             "|---|---|---|---|---|---|---|---|"]
    states, lp_s, point_s = set(), [], []
    for fig, block in result["figures"].items():
        name = {"workload.lambda_lp": "λ_LP", "workload.lambda_hp": "λ_HP"}[block["parameter"]]
        for r in block["points"]:
            best = r["best_builtin"]
            lines.append(f"| {fig}{' / 6' + fig[1] if fig[0] == '4' else ''} | {name} "
                         f"{r['x']:g} | {r['bound_hp_W']:.3f} | {best['label']} | "
                         f"{best['value']:.3f} | {r['value']:.3f} ({r['optimal']['lp.W']:.3f})"
                         f" | {100 * r['gain']:.1f} % | {r['proposed']['hp.outage']:.1e}, "
                         f"{r['optimal']['hp.outage']:.1e} |")
            states.add(r["states"])
            lp_s.append(r["lp_seconds"])
            point_s.append(r["seconds"])
    lines.append("")
    lines.append(f"{result['objective']}; exact figures, model ms. "
                 f"{', '.join(f'{s:,}' for s in sorted(states))} states per point; the LP "
                 f"{min(lp_s):.2f}-{max(lp_s):.2f} s, a point with its 35 built-in chains "
                 f"{min(point_s):.1f}-{max(point_s):.1f} s "
                 "(`python scripts/reproduce_seed000_optimum.py`).")
    return "\n".join(lines) + "\n"


def redraw() -> list[Path]:
    """docs/figures/seed000_fig<X>-<engine>.png from their csv, with the optimal curve."""
    drawn = []
    for fig in ("4a", "4b", "5a", "5b", "6a", "6b"):
        sc = load_scenario(ROOT / "scenarios" / f"seed000_fig{fig}.yaml")
        for engine in ("simulate", "emulate"):
            table = ROOT / "docs" / "figures" / f"seed000_fig{fig}-{engine}.csv"
            if not table.exists():
                continue
            rows = read_csv_rows(table)
            with tempfile.TemporaryDirectory() as tmp:
                points = plan(sc, Path(tmp), engine)  # type: ignore[arg-type]
            curves = exact_curves(sc, points, optimum=True)
            drawn.append(draw_sweep(sc, aggregate(rows), table.with_suffix(".png"), curves,
                                    "live" if engine == "emulate" else "sim"))
    return drawn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="seed 000: the optimum's gain at every point")
    table_args(ap, "seed000-optimum", "solving")
    ap.add_argument("--redraw", action="store_true",
                    help="also redraw the seed 000 figures with the optimal curve")
    a = ap.parse_args(argv)
    result = json.loads(a.from_json.read_text()) if a.from_json is not None else run()
    publish(a, result, markdown(result), MARKERS)
    if a.redraw:
        for p in redraw():
            print(f"drew {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
