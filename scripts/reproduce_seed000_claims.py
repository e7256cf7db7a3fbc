"""Seed 000's claims for Figs. 4-6 as one table: the paper, its chain as printed, our exact
chain at fixed and drawn capacities, and the simulator, each with the proposed scheme's
FN on FIFO and on round robin (whether that changes the verdict); then Fig. 4b's
NoDiff - proposed HP gap across the sweep, behind its "does not increase" row
(docs/reproduction.md).

    python scripts/reproduce_seed000_claims.py [--replications 5] [--requests 150000] \
        [--json docs/figures/seed000-claims.json] [--markdown docs/figures/seed000-claims.md] \
        [--doc docs/reproduction.md] [--from-json docs/figures/seed000-claims.json]

--doc replaces the table between the markers `<!-- seed000-claims:begin -->` and
`<!-- seed000-claims:end -->`. Runs in this process, one replication at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bootstrap

bootstrap.bootstrap(needs_network_stack=False, extras="")
ROOT = bootstrap.ROOT

from fogsdn.core.scenario import Scenario, load_scenario  # noqa: E402
from fogsdn.core.summary import json_safe  # noqa: E402
from fogsdn.exact.model_params import capacity_mean_prediction, exact_prediction  # noqa: E402
from fogsdn.exact.printed_chain import LABEL, SHOWN, all_readings, printed_figures  # noqa: E402
from fogsdn.measure.claim_stats import interval  # noqa: E402
from fogsdn.measure.seed000_claims import (  # noqa: E402
    CLAIMS,
    GAP_RISE_TOLERANCE_PCT,
    LP_SWEEP,
    POINTS,
    discipline_decides,
    evaluate,
    gap_series,
    lookup,
    needed,
    reads_prioritized,
    verdict,
)
from fogsdn.sim.runner import run_simulation  # noqa: E402

BEGIN, END = "<!-- seed000-claims:begin -->", "<!-- seed000-claims:end -->"
DRAWN = {"nodes.fn.capacity": {"uniform": [17, 23]}, "nodes.ofn1.capacity": {"uniform": [7, 13]}}
Figures = dict[str, float]


RR = {"nodes.fn.discipline": "round_robin"}  # the seed's status-U service at the FN


def scenario(point: str, scheme: str, fn_round_robin: bool = False) -> Scenario:
    """A claim's point; `fn_round_robin`: the FN serves HP and LP in turn (the seed's
    "round-robin fashion" in status U; only the proposed scheme's FN holds both classes
    apart, so only its scenarios take it)."""
    name, overrides = POINTS[point]
    base = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    rr = RR if fn_round_robin and scheme == "prioritized" else {}
    return base.with_overrides({**overrides, **rr, "policy.name": scheme})


def _exact(d: dict[str, Any]) -> Figures:
    """The claims' figures of a prediction, or of a simulation's measured block."""
    return {"W_hp": float(d["hp"]["W"]), "W_lp": float(d["lp"]["W"]),
            "outage_hp": float(d["hp"]["outage"])}


def _fmt(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):  # NaN, or None as the JSON writes it
        return "n/a"
    if unit == "":
        return f"{x:.2g}"
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def run(replications: int, requests: int) -> dict[str, Any]:
    keys = needed()
    printed: dict[str, dict[tuple[str, str], Figures]] = {r.label(): {} for r in all_readings()}
    exact: dict[tuple[str, str], Figures] = {}
    drawn: dict[tuple[str, str], Figures] = {}
    sims: list[dict[tuple[str, str], Figures]] = [{} for _ in range(replications)]
    # the proposed scheme with the FN on round robin (others as above)
    exact_rr: dict[tuple[str, str], Figures] = {}
    sims_rr: list[dict[tuple[str, str], Figures]] = [{} for _ in range(replications)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for point, scheme in keys:
            sc = scenario(point, scheme)
            for reading in all_readings():
                f = printed_figures(sc, reading)
                printed[reading.label()][(point, scheme)] = (
                    {"W_hp": f.W_hp, "W_lp": f.W_lp} if f.is_distribution else {})
            exact[(point, scheme)] = _exact(exact_prediction(sc).to_dict())
            mean = capacity_mean_prediction(sc.with_overrides(DRAWN))
            assert not isinstance(mean, str), mean
            drawn[(point, scheme)] = _exact(mean)
            for r in range(replications):
                s = run_simulation(sc, Path(tmp) / f"{point}-{scheme}-{r}", requests=requests,
                                   replication=r, trace=False, compare=False)
                sims[r][(point, scheme)] = _exact(s["measured"])
            if scheme == "prioritized":
                sc_rr = scenario(point, scheme, fn_round_robin=True)
                exact_rr[(point, scheme)] = _exact(exact_prediction(sc_rr).to_dict())
                for r in range(replications):
                    s = run_simulation(sc_rr, Path(tmp) / f"{point}-rr-{r}", requests=requests,
                                       replication=r, trace=False, compare=False)
                    sims_rr[r][(point, scheme)] = _exact(s["measured"])
            print(f"{point} {scheme}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    rows = []
    for c in CLAIMS:
        per_reading = {label: evaluate(c, lookup(t)) for label, t in printed.items()}
        shown = per_reading[SHOWN.label()]
        ours = evaluate(c, lookup(exact))
        sim = interval([evaluate(c, lookup(t)) for t in sims])
        applies = reads_prioritized(c)
        rr = evaluate(c, lookup({**exact, **exact_rr})) if applies else None
        sim_rr = (asdict(interval([evaluate(c, lookup({**t, **t_rr}))
                                   for t, t_rr in zip(sims, sims_rr, strict=True)]))
                  if applies else None)
        rows.append({
            "figure": c.figure, "claim": c.text, "paper": c.paper, "paper_text": c.paper_text(),
            "unit": c.unit.strip(), "printed": shown, "printed_readings": per_reading,
            "exact": ours, "exact_drawn_capacities": evaluate(c, lookup(drawn)),
            "simulated": asdict(sim), "verdict_exact": verdict(c, ours),
            "exact_round_robin": rr, "simulated_round_robin": sim_rr,
            "verdict_round_robin": verdict(c, rr) if rr is not None else "n/a",
            "discipline_decides": discipline_decides(c, ours, rr),
            "verdict_printed": verdict(c, shown)})
    both = [{**t, **t_rr} for t, t_rr in zip(sims, sims_rr, strict=True)]
    gap_4b = {  # Fig. 4b's NoDiff - proposed HP gap across the sweep (ms)
        "lambda_lp": list(LP_SWEEP), "rise_tolerance_pct": GAP_RISE_TOLERANCE_PCT,
        "printed": gap_series(lookup(printed[SHOWN.label()]), "4b"),
        "exact": gap_series(lookup(exact), "4b"),
        "simulated": [asdict(interval(list(v))) for v in
                      zip(*(gap_series(lookup(t), "4b") for t in sims), strict=True)],
        "exact_round_robin": gap_series(lookup({**exact, **exact_rr}), "4b"),
        "simulated_round_robin": [asdict(interval(list(v))) for v in
                                  zip(*(gap_series(lookup(t), "4b") for t in both),
                                      strict=True)]}
    return {"label_printed": LABEL, "reading_shown": SHOWN.label(),
            "mu_OF": scenario("4a@0.5", "prioritized").node("ofn1").mu,
            "capacities": {"fixed": [20, 10], "drawn": [[17, 23], [7, 13]]},
            "leave": "drain", "simulated": {"replications": replications,
                                            "requests_per_replication": requests,
                                            "capacities": "fixed 20/10"},
            "points": {k: {"scenario": v[0], "overrides": v[1]} for k, v in POINTS.items()},
            "rows": rows, "gap_4b": gap_4b, "wall_s": time.perf_counter() - t0}


def _interval(s: dict[str, Any] | None, unit: str) -> str:
    """mean ± 95 % half-width of a simulated interval, or n/a."""
    if s is None or not all(isinstance(s[k], (int, float)) and math.isfinite(s[k])
                            for k in ("mean", "lo", "hi")):
        return "n/a"
    return f"{_fmt(s['mean'], unit)} ± {_fmt((s['hi'] - s['lo']) / 2, unit)}"


_DECIDES = {True: "**yes**", False: "no", None: "n/a"}


def markdown(result: dict[str, Any]) -> str:
    sim = result["simulated"]
    lines = [
        "| Fig. | claim | paper | printed chain | ours (exact) | ours, drawn capacities "
        f"| simulated ({sim['replications']} x {sim['requests_per_replication']:,}) "
        "| verdict (ours) | verdict (printed) | ours, FN round robin (exact) "
        "| FN round robin, simulated | verdict (round robin) | FN discipline decides |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        u = r["unit"]
        rr = r.get("exact_round_robin")
        rr_txt = "n/a (no proposed scheme)" if rr is None else _fmt(rr, u)
        lines.append(
            f"| {r['figure']} | {r['claim']} | {r['paper_text']} | {_fmt(r['printed'], u)} "
            f"| {_fmt(r['exact'], u)} | {_fmt(r['exact_drawn_capacities'], u)} "
            f"| {_interval(r['simulated'], u)} | {r['verdict_exact']} | {r['verdict_printed']} "
            f"| {rr_txt} | {_interval(r.get('simulated_round_robin'), u)} "
            f"| {r.get('verdict_round_robin', 'n/a')} "
            f"| {_DECIDES[r.get('discipline_decides')]} |")
    gap = result.get("gap_4b")
    if gap is not None:  # the series behind the "does not increase" row
        lines += ["", "Fig. 4b's NoDiff - proposed HP gap (ms) across the sweep:", "",
                  "| lambda_LP | printed chain | ours (exact) | simulated "
                  "| ours, FN round robin (exact) | FN round robin, simulated |",
                  "|---|---|---|---|---|---|"]
        for i, x in enumerate(gap["lambda_lp"]):
            lines.append(
                f"| {x:g} | {_fmt(gap['printed'][i], 'ms')} | {_fmt(gap['exact'][i], 'ms')} "
                f"| {_interval(gap['simulated'][i], 'ms')} "
                f"| {_fmt(gap['exact_round_robin'][i], 'ms')} "
                f"| {_interval(gap['simulated_round_robin'][i], 'ms')} |")
    return "\n".join(lines) + "\n"


def update_doc(doc: Path, table: str, begin: str = BEGIN, end: str = END) -> None:
    text = doc.read_text()
    head, sep1, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not (sep1 and sep2):
        raise SystemExit(f"{doc}: no {begin} ... {end} markers")
    doc.write_text(f"{head}{begin}\n{table}{end}{tail}")


def table_args(ap: argparse.ArgumentParser, stem: str, work: str) -> None:
    """--json, --markdown (docs/figures/<stem>.json, .md), --doc and --from-json."""
    ap.add_argument("--json", type=Path, default=ROOT / f"docs/figures/{stem}.json")
    ap.add_argument("--markdown", type=Path, default=ROOT / f"docs/figures/{stem}.md")
    ap.add_argument("--doc", type=Path, default=None)
    ap.add_argument("--from-json", type=Path, default=None,
                    help=f"render the table of an earlier run's JSON (no {work})")


def publish(a: argparse.Namespace, result: dict[str, Any], table: str,
            markers: tuple[str, str] = (BEGIN, END)) -> None:
    """The result to --json, its table to --markdown, to --doc between `markers`, and out."""
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(json_safe(result), indent=1) + "\n")
    a.markdown.write_text(table)
    if a.doc is not None:
        update_doc(a.doc, table, *markers)
    print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="seed 000's claims table (Figs. 4-6)")
    ap.add_argument("--replications", type=int, default=5)
    ap.add_argument("--requests", type=int, default=150_000)
    table_args(ap, "seed000-claims", "simulation")
    a = ap.parse_args(argv)
    result = (json.loads(a.from_json.read_text()) if a.from_json is not None
              else run(a.replications, a.requests))
    publish(a, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
