#!/usr/bin/env python3
"""The simulator's spread at a city study's comparison scale, to read one live run by.

    python scripts/city_spread.py --scenario scenarios/city_live_max.yaml [--draws 8]
        [--selectors optimal,random,vivaldi,meridian,load_aware] [--json FILE]

Per selector, mean ± sd over draws of the run's own random choices (docs/reproduction.md;
docs/coordinates.md, "Live against simulated").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.city.event_model import SPREAD_METRICS, draw_spread  # noqa: E402
from fogsdn.city.study_spec import CityStudyError, load_city_study  # noqa: E402
from fogsdn.nodes.ncs.selection import SelectionError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, required=True)
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--selectors", default=None, help="comma-separated (default: the study's)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    try:
        study = load_city_study(a.scenario).at_full_scale()
        selectors = a.selectors.split(",") if a.selectors else list(study.selectors)
        ratio = study.ratios[0]
        out = {sel: draw_spread(study, sel, ratio, a.draws) for sel in selectors}
    except (CityStudyError, SelectionError, ValueError, OSError) as e:
        return bootstrap.fail(f"city_spread: {e}")
    print(f"{study.name}: {study.fog_nodes} fog nodes, {study.total_slots} slots, ratio "
          f"{ratio:g}, {study.simulated_span_model_s:g} model s, {a.draws} draws (mean ± sd)")
    for sel, m in out.items():
        print(f"  {sel:>10}: " + ", ".join(f"{k} {mu:.3g} ± {sd:.2g}" for k, (mu, sd) in m.items()))
    if a.json is not None:
        a.json.write_text(json.dumps({"ratio": ratio, "draws": a.draws,
                                      "metrics": list(SPREAD_METRICS),
                                      "selectors": {s: {k: {"mean": mu, "sd": sd}
                                                        for k, (mu, sd) in m.items()}
                                                    for s, m in out.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
