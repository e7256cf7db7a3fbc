"""Seed 002a's claims as one table, run as the paper measured it (`seed`) and as we run
it (`ours`), with the one-switch ablation between them (pure: the presets, the
claims and the table; `fogsdn.studies.seed002a_study` runs the simulations and
`scripts/reproduce_seed002a.py` writes).

Every modelling choice that separates the two presets is one switch of `Choices`:

- `switch_power`: the paper's measured switch (20 W idle, 30 W at the full load of a
  1 Gb/s port, linear in carried traffic; `fogsdn.models.request_goal.PAPER_SWITCH_POWER`)
  or ours (a 40 W chassis, 1 W per awake port, 0.1 W per port in low-power idle, 60 W
  peak: scenarios/seed002a.yaml);
- `sleep`: whether a switch with no awake port sleeps at 4 W (ours) or never (the paper);
- `goal`: ours (A RT / RT_ref + (1 - A) P / P_ref on means, A = 0.5) or the paper's
  (the request's response time in real ms plus that request's own network energy in mJ,
  `RequestGoal`);
- `learner`: ours (`path_rnn`: eight global rules, one held for 200 connections) or the
  paper's (`path_cpn`: one neuron per candidate path, choosing and learning per request).

The claims are the seed's (its abstract) and, where marked, the full paper's as the
issue reports them (Fröhlich/Gelenbe et al., as cited in the seed). docs/seed002a-claims.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from fogsdn.core.scenario import PolicySpec, Scenario, SwitchPower, scenario_graph
from fogsdn.measure.claim_stats import (
    VERDICT,
    Outcome,
    Stat,
    ablation,
    deciding_choice,
    interval,
    share,
)
from fogsdn.models.power_model import switch_ports
from fogsdn.models.request_goal import PAPER_SWITCH_POWER, RequestGoal, request_goal

RANKS = (0, 1, 2)  # the static plans: every connection on its r-th shortest path
RT_WEIGHT = 0.5  # ours: A
SEED_SAVING = 0.15  # "approximately 15 %"
SEED_RT_COST = 0.02  # "under 2 %"


@dataclass(frozen=True)
class Choices:
    """The switches; a preset is one value of it (both tabulated in docs/seed002a-claims.md)."""

    switch_power: Literal["ours", "paper"]
    sleep: Literal["ours", "none"]
    goal: Literal["weighted", "rt_plus_energy"]
    learner: Literal["rules_per_epoch", "neuron_per_path"]


PRESETS: dict[str, Choices] = {
    "seed": Choices("paper", "none", "rt_plus_energy", "neuron_per_path"),
    "ours": Choices("ours", "ours", "weighted", "rules_per_epoch"),
}


class PresetError(ValueError):
    """An unknown preset; the message names it."""


def preset(name: str) -> Choices:
    if name not in PRESETS:
        raise PresetError(f"--preset: unknown {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]


def configurations() -> dict[str, Choices]:
    """The presets, then ours with one switch set as in the seed preset."""
    seed, ours = PRESETS["seed"], PRESETS["ours"]
    return {"seed": seed, "ours": ours} | {f"ours+{s}": c for s, c in ablation(ours, seed).items()}


def switch_spec(choices: Choices, ours: SwitchPower) -> SwitchPower:
    """The switches' power model these choices run (`ours`: the scenario's own)."""
    base = ours if choices.switch_power == "ours" else PAPER_SWITCH_POWER
    sleep = ours.sleep_w if choices.sleep == "ours" else None
    return base.model_copy(update={"sleep_w": sleep, "port_hold_s": ours.port_hold_s})


def goal_of(scenario: Scenario, spec: SwitchPower, nbytes: float) -> RequestGoal:
    """The paper's per-request goal on this network, priced under `spec`."""
    return request_goal(spec, switch_ports(scenario_graph(scenario)), scenario.time_scale, nbytes)


def learner_spec(choices: Choices, goal: RequestGoal) -> PolicySpec:
    """The learning policy these choices run."""
    name = "path_rnn" if choices.learner == "rules_per_epoch" else "path_cpn"
    return PolicySpec(name=name, params={"goal": choices.goal, "rt_weight": RT_WEIGHT,
                                         **goal.to_params()})


def static_spec(rank: int) -> PolicySpec:
    return PolicySpec(name="path_rank", params={"rank": rank})

# -- what a run gives the claims ----------------------------------------------------------


@dataclass(frozen=True)
class RunFigures:
    """What one simulated run gives the claims (model ms, W, mJ)."""

    response_ms: float  # answered requests after warm-up, their path's network time included
    phase_response_ms: tuple[float, ...]
    network_w: float  # the switches' mean power over the run
    phase_network_w: tuple[float, ...]
    switch_w: dict[str, float]
    traffic_share: float  # the busiest switch's mean load, a share of capacity_mbps
    slope_w: float  # the busiest switch's power against its load: W at full load over idle
    energy_mj: float  # the mean request's own network energy under the run's goal
    estimate_w: float  # the learner's mean estimate of network power (NaN: none)
    learner_rt_ms: float  # the learner's mean measured response time (NaN: none)
    chosen_share: float  # answered requests whose path the policy chose
    settled_share: float  # second half: share on each pair's most used path rank
    ranks_used: int
    rank_share: tuple[float, ...]  # share of answered requests on each path rank

@dataclass
class ConfigResult:
    """Per seed: the learner's figures and every static plan's, under one configuration."""

    choices: Choices
    goal: RequestGoal
    learner: list[RunFigures] = field(default_factory=list)
    static: dict[int, list[RunFigures]] = field(default_factory=dict)

# -- the claims -------------------------------------------------------------------------------


def change(a: Sequence[RunFigures], b: Sequence[RunFigures], get: Callable[[RunFigures], float]
           ) -> Stat:
    """a against b, paired by seed, as a fraction: mean and 95 % interval."""
    return interval([get(x) / get(y) - 1.0 for x, y in zip(a, b, strict=True)])


def goal_values(res: ConfigResult, runs: Sequence[RunFigures]) -> list[float]:
    """The configuration's own goal per seed (lower is better): the paper's G on the mean
    request, or ours against the shortest path's run of the same seed."""
    base = res.static[0]
    if res.choices.goal == "rt_plus_energy":
        return [res.goal.value(f.response_ms, f.energy_mj) for f in runs]
    return [RT_WEIGHT * f.response_ms / b.response_ms
            + (1 - RT_WEIGHT) * f.network_w / b.network_w for f, b in zip(runs, base, strict=True)]


Values = dict[str, str | int]  # what a claim's verdict rests on, as the table shows it
Predicate = Callable[[ConfigResult], tuple[Outcome, Values]]


def _pct(s: Stat) -> str:
    return f"{100 * s.mean:+.2f} % [{100 * s.lo:+.2f}, {100 * s.hi:+.2f}]"


def _saving(res: ConfigResult) -> Stat:
    return change(res.learner, res.static[0], lambda f: f.network_w)


def _rt_cost(res: ConfigResult) -> Stat:
    return change(res.learner, res.static[0], lambda f: f.response_ms)


def power_outcome(saving: Stat) -> Outcome:
    """≈ 15 % less power: a saving within 10-20 % holds; a saving of 5 % or more
    elsewhere is partly (the direction, not the size); less fails."""
    cut = -saving.mean
    if 0.10 <= cut <= 0.20:
        return "holds"
    return "partly" if cut >= 0.05 else "fails"


def rt_outcome(cost: Stat) -> Outcome:
    """< 2 % more response time: the interval's top under 2 % holds; the mean only, partly."""
    if cost.hi < SEED_RT_COST:
        return "holds"
    return "partly" if cost.mean < SEED_RT_COST else "fails"


def c_paths(res: ConfigResult) -> tuple[Outcome, Values]:
    chosen = interval([f.chosen_share for f in res.learner])
    used = max(f.ranks_used for f in res.learner)
    ok = chosen.mean > 0.999 and used >= 2
    return ("holds" if ok else "partly" if chosen.mean > 0.999 else "fails",
            {"chosen_share": f"{chosen.mean:.3f}", "paths_used": used})


def c_measures(res: ConfigResult) -> tuple[Outcome, Values]:
    err = interval([abs(f.learner_rt_ms / f.response_ms - 1) for f in res.learner])
    o: Outcome = "holds" if err.mean <= 0.05 else "partly" if err.mean <= 0.15 else "fails"
    return o, {"learner_vs_clients": f"{100 * err.mean:.2f} %"}


def c_estimates(res: ConfigResult) -> tuple[Outcome, Values]:
    err = interval([abs(f.estimate_w / f.network_w - 1) for f in res.learner])
    o: Outcome = "holds" if err.mean <= 0.05 else "partly" if err.mean <= 0.15 else "fails"
    return o, {"estimate_vs_account": f"{100 * err.mean:.2f} %"}


def c_minimises(res: ConfigResult) -> tuple[Outcome, Values]:
    gl = interval(goal_values(res, res.learner)).mean
    gs = {r: interval(goal_values(res, v)).mean for r, v in res.static.items()}
    best = min(gs.values())
    o: Outcome = "holds" if gl <= best * 1.01 else "partly" if gl < gs[0] else "fails"
    return o, {"goal_learner": f"{gl:.4g}", **{f"goal_rank{r}": f"{g:.4g}" for r, g in gs.items()}}


def c_learns(res: ConfigResult) -> tuple[Outcome, Values]:
    s = interval([f.settled_share for f in res.learner])
    o: Outcome = "holds" if s.mean >= 0.8 else "partly" if s.mean >= 0.5 else "fails"
    return o, {"second_half_on_one_path": f"{s.mean:.3f}"}


def c_testbed(res: ConfigResult) -> tuple[Outcome, Values]:
    live = res.choices.learner == "rules_per_epoch"  # path_cpn has no live reward (yet)
    return ("holds" if live else "fails",
            {"learns_live": "yes (docs/learning.md)" if live
             else "no: the live controller reports no per-request completion"})


def c_phases(res: ConfigResult) -> tuple[Outcome, Values]:
    n = len(res.learner[0].phase_network_w)
    cuts = [change(res.learner, res.static[0], _phase_w(k)) for k in range(n)]
    return (share([-c.mean >= 0.10 for c in cuts]),
            {"saving_per_phase": " / ".join(f"{-100 * c.mean:.2f} %" for c in cuts)})


def _phase_w(k: int) -> Callable[[RunFigures], float]:
    return lambda f: f.phase_network_w[k]


def c_power(res: ConfigResult) -> tuple[Outcome, Values]:
    s = _saving(res)
    return power_outcome(s), {"network_power_change": _pct(s)}


def c_rt(res: ConfigResult) -> tuple[Outcome, Values]:
    c = _rt_cost(res)
    return rt_outcome(c), {"response_time_change": _pct(c)}


def c_trade(res: ConfigResult) -> tuple[Outcome, Values]:
    p, r = power_outcome(_saving(res)), rt_outcome(_rt_cost(res))
    o: Outcome = "holds" if p == r == "holds" else \
        "fails" if p == r == "fails" else "partly"
    return o, {"power": p, "response_time": r}


def c_switch_w(res: ConfigResult) -> tuple[Outcome, Values]:
    per: dict[str, float] = {}
    for f in res.static[0]:
        for s, w in f.switch_w.items():
            per[s] = per.get(s, 0.0) + w / len(res.static[0])
    return (share([19.5 <= w <= 30.5 for w in per.values()]),
            {"switch_W": ", ".join(f"{s} {w:.1f}" for s, w in sorted(per.items()))})


def c_rises(res: ConfigResult) -> tuple[Outcome, Values]:
    slope = interval([f.slope_w for f in res.static[0]])
    rise = interval([f.phase_network_w[-1] - f.phase_network_w[0] for f in res.static[0]])
    o: Outcome = "holds" if slope.mean >= 5.0 else "partly" if slope.mean > 0 else "fails"
    return o, {"busiest_switch_W_per_full_load": f"{slope.mean:.2f}",
               "network_W_heavy_minus_light_phase": f"{rise.mean:+.4f}"}


def c_goal_form(res: ConfigResult) -> tuple[Outcome, Values]:
    o: Outcome = "holds" if res.choices.goal == "rt_plus_energy" else "fails"
    return o, {"goal": res.choices.goal}


def c_neurons(res: ConfigResult) -> tuple[Outcome, Values]:
    o: Outcome = "holds" if res.choices.learner == "neuron_per_path" else "fails"
    return o, {"learner": res.choices.learner}


@dataclass(frozen=True)
class Claim:
    id: str
    source: Literal["abstract", "full paper"]
    claim: str
    paper: str | None
    predicate: Predicate
    measured: bool = True  # False: true or false by construction (a choice, not a figure)


CLAIMS: tuple[Claim, ...] = (
    Claim("sdn-paths", "abstract", "an SDN controller chooses each client-server "
          "connection's path", None, c_paths),
    Claim("measures-rt", "abstract", "it constantly measures ongoing client-server response "
          "times (the learner's figure against the clients')", None, c_measures),
    Claim("estimates-power", "abstract", "it estimates network power consumption (the "
          "learner's estimate against the power account)", None, c_estimates),
    Claim("minimises-goal", "abstract", "it selects paths that minimise a composite goal of "
          "QoS and power (the learner's goal within 1 % of the best static plan's)", None,
          c_minimises),
    Claim("rl-learns", "abstract", "reinforcement learning with neural networks settles on "
          "a choice (second half: ≥ 80 % of each pair's connections on one path)", None,
          c_learns),
    Claim("testbed", "abstract", "the approach runs (and learns) in a test-bed controller",
          None, c_testbed, measured=False),
    Claim("time-varying", "abstract", "it is effective under a time-varying workload (≥ 10 % "
          "less network power in every phase of the profile)", None, c_phases),
    Claim("power-15", "abstract", "power consumption falls by approximately 15 % (network "
          "power against shortest-path routing)", "≈ -15 %", c_power),
    Claim("rt-2", "abstract", "the average response time rises by under 2 %", "< +2 %", c_rt),
    Claim("trade", "abstract", "both at once: about 15 % less power for under 2 % more "
          "response time", "-15 % / < +2 %", c_trade),
    Claim("switch-20-30", "full paper", "each switch draws about 20 W idle to 30 W at peak "
          "(mean per switch under shortest-path routing)", "20-30 W", c_switch_w),
    Claim("power-rises-traffic", "full paper", "a switch's power rises with its traffic "
          "(≥ 5 W from idle to full load on the busiest switch)", "+10 W idle to peak",
          c_rises),
    Claim("goal-per-request", "full paper", "the goal adds the network energy of the "
          "request itself to its measured response time", None, c_goal_form, measured=False),
    Claim("neuron-per-path", "full paper", "the RNN has one neuron per candidate path and "
          "chooses per request (cognitive packet network)", None, c_neurons, measured=False),
)


def claims_table(results: Mapping[str, ConfigResult], chosen: str) -> list[dict[str, Any]]:
    """One entry per claim: its verdict under `chosen`, both presets' values and outcomes,
    the ablation's verdicts and the deciding choice (None where both presets agree)."""
    table = []
    seed, ours = PRESETS["seed"], PRESETS["ours"]
    switches = list(ablation(ours, seed))
    for c in CLAIMS:
        out = {name: c.predicate(r) for name, r in results.items()}
        flipped = {name.removeprefix("ours+"): o for name, (o, _v) in out.items()
                   if name.startswith("ours+")}
        table.append({
            "id": c.id, "source": c.source, "claim": c.claim, "paper": c.paper,
            "measured": c.measured, "verdict": VERDICT[out[chosen][0]],
            "deciding_choice": deciding_choice(out["seed"][0], out["ours"][0], flipped),
            **{p: {"verdict": VERDICT[out[p][0]], "outcome": out[p][0], "values": out[p][1]}
               for p in PRESETS},
            "ablation": {s: VERDICT[flipped[s]] if s in flipped else "not run" for s in switches},
        })
    return table


def counts(table: Sequence[Mapping[str, Any]], p: str) -> dict[str, int]:
    """How many rows a preset reproduces, partly and not."""
    return {v: sum(1 for e in table if e[p]["verdict"] == v)
            for v in ("reproduced", "partly", "not")}


def markdown(table: Sequence[Mapping[str, Any]]) -> str:
    """The claims table for docs/seed002a-claims.md: one row per claim, then the ablation."""
    head = ("| claim | source | paper | seed preset | ours | verdict (seed / ours) | "
            "deciding choice |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for e in table:
        star = "" if e["measured"] else " (by construction)"
        lines.append(f"| {e['claim']}{star} | {e['source']} | {e['paper'] or '-'} | "
                     f"{_brief(e['seed']['values'])} | {_brief(e['ours']['values'])} | "
                     f"{e['seed']['verdict']} / {e['ours']['verdict']} | "
                     f"{e['deciding_choice'] or '-'} |")
    switches = list(table[0]["ablation"]) if table else []
    abl = ["", "Ablation: ours with one switch set as in the seed preset (verdicts).", "",
           "| claim | ours | " + " | ".join(f"`{s}`" for s in switches) + " | seed |",
           "|---|---|" + "---|" * len(switches) + "---|"]
    for e in table:
        abl.append(f"| {e['id']} | {e['ours']['verdict']} | "
                   + " | ".join(e["ablation"][s] for s in switches)
                   + f" | {e['seed']['verdict']} |")
    return head + "\n".join(lines) + "\n" + "\n".join(abl) + "\n"


def _brief(vals: Mapping[str, Any]) -> str:
    return "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in vals.items())


def traffic_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The traffic scan as a table: saving against traffic as a share of capacity."""
    out = ["| traffic (busiest switch, share of 1 Gb/s) | bytes per request | network W, "
           "shortest path | best possible saving (fewest switches) | seed learner: saving | "
           "seed learner: response time | seed learner: on fewest switches |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {100 * r['measured_share']:.3g} % | {r['bytes_per_request']:.4g} | "
                   f"{r['network_W_shortest']:.2f} | {100 * r['best_saving']:.3g} % | "
                   f"{100 * r['learner_saving']:.3g} % | {100 * r['learner_rt_change']:+.2f} % | "
                   f"{100 * r['learner_on_fewest_switches']:.0f} % |")
    return "\n".join(out) + "\n"


# -- headline figures and the traffic scan ----------------------------------------------------

class Changes(TypedDict):
    """Runs against shortest path's (`headline`): the paired changes (a `Stat` each) and
    their own means."""

    network_power_change: dict[str, float]
    response_time_change: dict[str, float]
    network_W: float
    response_ms: float


def headline(res: ConfigResult) -> dict[str, Changes]:
    """The learner's and every static plan's change against shortest path, paired."""
    out = {"learner": _changes(res.learner, res.static[0])}
    for r, runs in res.static.items():
        out[f"rank{r}"] = _changes(runs, res.static[0])
    return out


def _changes(runs: Sequence[RunFigures], base: Sequence[RunFigures]) -> Changes:
    return {"network_power_change": asdict(change(runs, base, lambda f: f.network_w)),
            "response_time_change": asdict(change(runs, base, lambda f: f.response_ms)),
            "network_W": interval([f.network_w for f in runs]).mean,
            "response_ms": interval([f.response_ms for f in runs]).mean}


__all__ = ["CLAIMS", "PRESETS", "RANKS", "RT_WEIGHT", "Choices", "Claim", "ConfigResult",
           "PresetError", "RunFigures", "change", "claims_table", "configurations", "counts",
           "goal_of", "goal_values", "headline", "learner_spec", "markdown", "power_outcome",
           "preset", "rt_outcome", "static_spec", "switch_spec", "traffic_markdown"]
