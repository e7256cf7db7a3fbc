"""A public mobility trace to the city study's position trace (`t_s,client,x_m,y_m`).

    python scripts/convert_trace.py --format sumo-fcd|bonnmotion|one IN[.gz] OUT.csv [...]

Formats, options and examples: docs/coordinates.md (Mobility from traces). A bad input or
option is one line naming the place, exit 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.city.mobility_traces import (  # noqa: E402
    FCD_KINDS,
    FORMATS,
    ConvertOptions,
    Placement,
    TraceError,
    convert_file,
)

PROG = "convert_trace.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bootstrap.OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("input", type=Path, help="the trace (.gz is read compressed)")
    p.add_argument("output", type=Path, help="the CSV to write")
    p.add_argument("--area-m", type=float, default=1500.0,
                   help="side of the study's square in metres (1500: the seed's 2.25 km²)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--origin", type=float, nargs=2, metavar=("X", "Y"),
                       help="source point placed at the square's lower-left corner")
    where.add_argument("--center", type=float, nargs=2, metavar=("X", "Y"),
                       help="source point placed at the square's centre")
    where.add_argument("--fit", action="store_true",
                       help="scale the whole trace uniformly into the square")
    p.add_argument("--scale", type=float, default=1.0, help="metres per source unit")
    p.add_argument("--geo", action="store_true",
                   help="x, y are longitude, latitude (SUMO --fcd-output.geo)")
    p.add_argument("--begin-s", type=float, help="window start in source time (becomes t=0)")
    p.add_argument("--end-s", type=float, help="window end in source time")
    p.add_argument("--clients", type=int, help="keep N clients (default: all)")
    p.add_argument("--seed", type=int, help="draw the N clients at random with this seed "
                   "(default: the first N to appear)")
    p.add_argument("--min-span-s", type=float, default=0.0,
                   help="only clients present in the area at least this long")
    p.add_argument("--step-s", type=float, help="resample every client to this step")
    p.add_argument("--rename", metavar="PREFIX",
                   help="name clients PREFIX0, PREFIX1, ... in the chosen order")
    p.add_argument("--kinds", default="vehicle,person",
                   help=f"sumo-fcd: which of {','.join(FCD_KINDS)} become clients")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        anchor = a.center or a.origin
        placement = Placement(a.area_m, tuple(anchor) if anchor else None,
                              a.center is not None, a.scale, a.fit, a.geo)
        opts = ConvertOptions(placement, a.begin_s, a.end_s, a.clients, a.seed,
                              a.min_span_s, a.step_s, a.rename)
        kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
        result, lines = convert_file(a.format, a.input, opts, kinds)
    except TraceError as err:
        return bootstrap.fail(f"{PROG}: {err}", 1)
    try:
        a.output.write_text("\n".join(lines) + "\n")
    except OSError as err:
        return bootstrap.fail(f"{PROG}: {a.output}: cannot write: {err}", 1)
    span = max(tr[-1][0] for tr in result.tracks.values())
    print(f"{PROG}: {a.output}: {len(result.tracks)} clients ({result.clients_in_area} of "
          f"{result.clients_read} in the area), {len(lines) - 1} fixes over {span:.1f} s "
          f"(source t={result.time_origin_s:g} s is t=0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
