#!/usr/bin/env python3
"""The simulator's spread at a city study's comparison scale, to read one live run by.

    python scripts/city_spread.py --scenario scenarios/city_live_max.yaml [--draws 24]
        [--selectors optimal,random,vivaldi,meridian,load_aware] [--json FILE]
        [--live RUN_DIR]

Per selector, mean ± sd over draws of the run's own random choices (docs/reproduction.md;
docs/coordinates.md, "Live against simulated"). With --live, a live run's folder of the
same study: each selector's mean latency and optimal-selection rate against the
simulated mean ± the wider of 10 % and two standard deviations; exit 1 where one misses.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.city.event_model import (  # noqa: E402
    SPREAD_DRAWS,
    SPREAD_METRICS,
    draw_spread,
    judge_live,
)
from fogsdn.city.sim_output import read_live_points  # noqa: E402
from fogsdn.city.study_spec import CityStudyError, load_city_study  # noqa: E402
from fogsdn.core.summary import json_safe  # noqa: E402
from fogsdn.nodes.ncs.selection import SelectionError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, required=True)
    ap.add_argument("--draws", type=int, default=SPREAD_DRAWS)
    ap.add_argument("--selectors", default=None, help="comma-separated (default: the study's)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--live", type=Path, default=None,
                    help="a live run's folder of this study, to judge against the spread")
    a = ap.parse_args(argv)
    try:
        study = load_city_study(a.scenario).at_full_scale()
        selectors = a.selectors.split(",") if a.selectors else list(study.selectors)
        ratio = study.ratios[0]
        live = None if a.live is None else read_live_points(
            a.live, ratio, study.clients_at(ratio), study.fog_nodes, study.total_slots)
        if live is not None and (absent := [s for s in selectors if s not in live]):
            raise ValueError(f"{a.live}: no live row of {', '.join(absent)}")
        out = {sel: draw_spread(study, sel, ratio, a.draws) for sel in selectors}
    except (CityStudyError, SelectionError, ValueError, OSError) as e:
        return bootstrap.fail(f"city_spread: {e}")
    print(f"{study.name}: {study.fog_nodes} fog nodes, {study.total_slots} slots, ratio "
          f"{ratio:g}, {study.simulated_span_model_s:g} model s, {a.draws} draws (mean ± sd)")
    for sel, m in out.items():
        print(f"  {sel:>10}: " + ", ".join(f"{k} {mu:.3g} ± {sd:.2g}" for k, (mu, sd) in m.items()))
    verdicts = [] if live is None else judge_live(live, out)
    if verdicts:
        print(f"live {a.live}: within 10 % of the simulated mean or two sd, whichever wider")
        for v in verdicts:
            print(f"  {v.line()}")
    if a.json is not None:
        a.json.write_text(json.dumps(json_safe({"ratio": ratio, "draws": a.draws,
                                      "metrics": list(SPREAD_METRICS),
                                      "selectors": {s: {k: {"mean": mu, "sd": sd}
                                                        for k, (mu, sd) in m.items()}
                                                    for s, m in out.items()},
                                      "live": None if live is None else {
                                          "run": str(a.live),
                                          "verdicts": [asdict(v) | {"holds": v.holds}
                                                       for v in verdicts]}}), indent=1))
    return 0 if all(v.holds for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
