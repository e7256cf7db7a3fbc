"""Seed 003's claims table: both presets and the one-switch ablation in both directions
(each preset with one switch set as in the other), simulated, each point's mean and 95 %
interval, the claims evaluated on each configuration (docs/coordinates.md).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from fogsdn.city.claims import (
    CLAIMS,
    VERDICT,
    Outcome,
    Results,
    Verdict,
    decided_by,
    deciding_choice,
    deciding_switches,
    evaluate,
    fmt,
    values,
)
from fogsdn.city.event_model import run_study
from fogsdn.city.presets import (
    PRESETS,
    SEED_SELECTORS,
    StudyChoices,
    ablation,
    apply_choices,
    row_key,
)
from fogsdn.city.sim_output import write_csv
from fogsdn.city.study_spec import CityStudy
from fogsdn.measure.figures import draw_city
from fogsdn.nodes.ncs.discovery import METRIC_COLUMNS
from fogsdn.studies.study import Row, execute


@dataclass(frozen=True)
class ClaimsRun:
    """What to run: the ratios, the replications, and a cap on the simulated seconds per
    point (None: each preset's own, 600 s for the seed's)."""

    ratios: tuple[float, ...] = (0.1, 0.5, 1.0)
    replications: int = 3
    duration_cap_s: float | None = 30.0
    selectors: tuple[str, ...] = SEED_SELECTORS


@dataclass(frozen=True)
class ClaimsPoint:
    study: CityStudy  # full scale, the configuration's choices and this replication's seed
    selector: str
    ratio: float
    key: tuple[Any, ...] = ()  # what makes its rows distinct (`plan`)

    def label(self) -> str:
        return (f"{self.selector} ratio {self.ratio:g} seed {self.study.seed} "
                f"{self.study.simulated_span_model_s:g} s")


def run_claims_point(point: ClaimsPoint) -> list[Row]:
    return [run_study(point.study, point.selector, point.ratio)]


NOT_RUN = "not run"


def other_preset(name: str) -> str:
    """The preset a flip from `name` takes its switch's value from (there are two)."""
    return next(p for p in PRESETS if p != name)


def flipped_name(base: str, switch: str) -> str:
    """The configuration `base` with `switch` set as in the other preset."""
    return f"{base}+{switch}"


def configurations() -> dict[str, StudyChoices]:
    """The presets, then ours with one switch set as in the seed preset, then the seed
    preset with one switch set as in ours."""
    out = dict(PRESETS)
    for base in ("ours", "seed"):
        out |= {flipped_name(base, s): c
                for s, c in ablation(PRESETS[base], PRESETS[other_preset(base)]).items()}
    return out


def capped(choices: StudyChoices, run: ClaimsRun) -> StudyChoices:
    if run.duration_cap_s is None:
        return choices
    return replace(choices, duration_s=min(choices.duration_s, run.duration_cap_s))


def plan(study: CityStudy, run: ClaimsRun
         ) -> tuple[list[ClaimsPoint], dict[str, list[tuple[Any, ...]]]]:
    """The distinct points to run, and per configuration the keys of its rows."""
    points: dict[tuple[Any, ...], ClaimsPoint] = {}
    wanted: dict[str, list[tuple[Any, ...]]] = {}
    for name, choices in configurations().items():
        eff = capped(choices, run)
        for rep in range(run.replications):
            seed = study.seed + rep
            st = apply_choices(study, eff, seed=seed)
            for sel in run.selectors:
                for ratio in run.ratios:
                    key = (row_key(eff, sel), sel, ratio, seed)
                    wanted.setdefault(name, []).append(key)
                    if key not in points:
                        points[key] = ClaimsPoint(st, sel, ratio, key)
    return list(points.values()), wanted


def run_claims(study: CityStudy, run: ClaimsRun, *, workers: int = 1) -> dict[str, list[Row]]:
    """Every configuration's rows (one per selector, ratio and replication)."""
    say = partial(print, file=sys.stderr, flush=True)
    todo, wanted = plan(study, run)
    outcomes, how = execute(todo, run_claims_point, (), workers=workers)
    say(f"[seed003 claims] {len(todo)} points ({how})")
    done: dict[tuple[Any, ...], Row] = {}
    t0 = time.perf_counter()
    for k, (p, rows, err) in enumerate(outcomes, 1):
        if rows is None:
            raise RuntimeError(f"{p.label()}: {err}")
        done[p.key] = rows[0]
        say(f"[seed003 claims {k}/{len(todo)} {time.perf_counter() - t0:6.1f}s] {p.label()}")
    return {name: [done[key] for key in keys] for name, keys in wanted.items()}


def inert_switches(run: ClaimsRun) -> dict[str, set[str]]:
    """Per preset, the switches whose flip from it this run cannot show: under its caps
    the flipped configuration is the preset itself (the duration, when both presets are
    capped alike)."""
    out = {}
    for base, choices in PRESETS.items():
        own = capped(choices, run)
        out[base] = {s for s, c in ablation(choices, PRESETS[other_preset(base)]).items()
                     if capped(c, run) == own}
    return out


class PresetClaim(TypedDict):
    """One claim under one preset (`claims_table`): its verdict and values, each switch's
    flip, and what decides it where it is not reproduced."""

    verdict: Verdict
    outcome: Outcome
    values: dict[str, dict[str, dict[str, float | int]]]  # `fogsdn.city.claims.values`
    flips: dict[str, str]  # switch -> the verdict with it flipped, or "not run"
    deciding: list[str]
    decided_by: str | None


def claims_table(rows: dict[str, list[Row]], chosen: str,
                 inert: Mapping[str, Collection[str]] | None = None) -> list[dict[str, Any]]:
    """One entry per claim: its verdict under `chosen`; per preset its values and outcome,
    its flips (the verdict with each switch set as in the other preset, "not run" for an
    `inert` switch or one without rows) and what decides a claim it does not reproduce
    (`decided_by`); ours' flips again as `ablation`, and the switch that moves ours to the
    seed preset's outcome (`deciding_choice`, never an inert one)."""
    res = {name: Results.from_rows(rs, METRIC_COLUMNS) for name, rs in rows.items()}
    table = []
    for c in CLAIMS:
        out = {name: evaluate(c, r) for name, r in res.items()}
        per: dict[str, PresetClaim] = {}
        for p in PRESETS:
            skip = set((inert or {}).get(p, ()))
            switches = list(ablation(PRESETS[p], PRESETS[other_preset(p)]))
            ran = {s: VERDICT[out[flipped_name(p, s)]] for s in switches
                   if s not in skip and flipped_name(p, s) in out}
            verdict = VERDICT[out[p]]
            per[p] = {"verdict": verdict, "outcome": out[p], "values": values(c, res[p]),
                      "flips": {s: ran.get(s, NOT_RUN) for s in switches},
                      "deciding": [] if verdict == "reproduced"
                      else deciding_switches(verdict, ran),
                      "decided_by": decided_by(verdict, ran,
                                               [s for s in switches if s not in ran])}
        ours_flips = {s: out[flipped_name("ours", s)] for s, v in per["ours"]["flips"].items()
                      if v != NOT_RUN}
        table.append({
            "id": c.id, "figure": c.figure, "claim": c.claim, "paper": c.paper_value,
            "verdict": VERDICT[out[chosen]],
            "deciding_choice": deciding_choice(out["seed"], out["ours"], ours_flips),
            "decided_by": per[chosen]["decided_by"],
            **per,
            "ablation": per["ours"]["flips"],
        })
    return table


def decided_counts(table: list[dict[str, Any]], preset: str) -> dict[str, int]:
    """For `preset`: claims reproduced, not fully reproduced, and of those the ones a
    single switch decides and the ones none does."""
    missed = [e[preset] for e in table if e[preset]["verdict"] != "reproduced"]
    named = [m for m in missed if m["deciding"]]
    return {"claims": len(table), "reproduced": len(table) - len(missed),
            "not_fully_reproduced": len(missed), "decided": len(named),
            "undecided": len(missed) - len(named)}


def markdown(table: list[dict[str, Any]]) -> str:
    """The table for docs/coordinates.md: one row per claim, then per preset what decides
    the claims it does not reproduce, then both ablations."""
    head = ("| fig | claim | paper | ratios | seed preset | ours | verdict (seed / ours) | "
            "deciding choice (ours → seed) |\n|---|---|---|---|---|---|---|---|\n")
    lines = []
    for e in table:
        ratios = " → ".join(next(iter(e["seed"]["values"].values())))
        lines.append(f"| {e['figure']} | {e['claim']} | {e['paper'] or '-'} | {ratios} | "
                     f"{_brief(e['seed']['values'])} | {_brief(e['ours']['values'])} | "
                     f"{e['seed']['verdict']} / {e['ours']['verdict']} | "
                     f"{e['deciding_choice'] or '-'} |")
    names = {"seed": "seed preset", "ours": "ours"}
    dec = ["", "What decides a claim a preset does not reproduce: the switches whose single "
           "flip (to the other preset's value) changes that preset's verdict, with the "
           "verdict it gives.", "",
           "| fig | claim | " + " | ".join(f"{names.get(p, p)}: verdict | decided by"
                                          for p in PRESETS) + " |",
           "|---|---|" + "---|---|" * len(PRESETS)]
    for e in table:
        dec.append(f"| {e['figure']} | {e['claim']} | "
                   + " | ".join(f"{e[p]['verdict']} | {e[p]['decided_by'] or '-'}"
                                for p in PRESETS) + " |")
    abl: list[str] = []
    for base in ("ours", "seed"):
        other = other_preset(base)
        switches = list(table[0][base]["flips"]) if table else []
        abl += ["", f"Ablation: {names.get(base, base)} with one switch set as in "
                f"{names.get(other, other)} (verdicts).", "",
                f"| claim | {base} | " + " | ".join(f"`{s}`" for s in switches)
                + f" | {other} |", "|---|---|" + "---|" * len(switches) + "---|"]
        for e in table:
            abl.append(f"| {e['figure']} {e['id'].split('-', 1)[1]} | {e[base]['verdict']} | "
                       + " | ".join(e[base]["flips"][s] for s in switches)
                       + f" | {e[other]['verdict']} |")
    return head + "\n".join(lines) + "\n" + "\n".join(dec + abl) + "\n"


_SHORT = {"optimal": "opt", "random": "rnd", "vivaldi": "viv", "meridian": "mer"}


def _brief(vals: dict[str, dict[str, dict[str, float | int]]]) -> str:
    """'opt 88 [76, 100] → 96 [94, 98]': per selector, low ratio → high ratio."""
    return "; ".join(f"{_SHORT.get(sel, sel)} " + " → ".join(fmt(st) for st in by.values())
                     for sel, by in vals.items())


def mean_rows(rows: list[Row]) -> list[Row]:
    """Per selector and ratio: each metric's mean, with its interval as `<metric>_lo/_hi`
    (what `draw_city` draws as error bars)."""
    res = Results.from_rows(rows, METRIC_COLUMNS)
    out = []
    for sel in dict.fromkeys(r["selector"] for r in rows):
        for ratio in res.ratios:
            row: Row = {"selector": sel, "ratio": ratio}
            for m in METRIC_COLUMNS:
                st = res.get(sel, ratio, m)
                row |= {m: st.mean, f"{m}_lo": st.lo, f"{m}_hi": st.hi}
            out.append(row)
    return out


def write_outputs(rows: dict[str, list[Row]], table: list[dict[str, Any]], chosen: str,
                  run: ClaimsRun, json_path: Path | None, fig_dir: Path | None,
                  seconds: float) -> list[Path]:
    written: list[Path] = []
    doc = {"claims": table, "preset": chosen, "presets": {p: vars(c) for p, c in PRESETS.items()},
           "counts": {p: decided_counts(table, p) for p in PRESETS},
           "run": {**asdict(run), "seconds": round(seconds, 1)}}
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
        written.append(json_path)
    if fig_dir is not None:
        fig_dir.mkdir(parents=True, exist_ok=True)
        md = fig_dir / "seed003-claims.md"
        md.write_text(markdown(table))
        written.append(md)
        every = fig_dir / "seed003-claims-rows.csv"  # every configuration's rows
        write_csv([r | {"selector": f"{name}/{r['selector']}"} for name, rs in rows.items()
                   for r in rs], every)
        written.append(every)
        for p in PRESETS:
            tag = f"simulate-{p}"
            csv_path = fig_dir / f"seed003-{tag}.csv"
            write_csv(rows[p], csv_path)
            written += [csv_path, *draw_city(mean_rows(rows[p]), fig_dir, tag)]
    return written
