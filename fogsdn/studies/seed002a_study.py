"""Seed 002a's claims study, run (no I/O): both presets and the one-switch ablation
simulated, each run reduced to the figures the claims read, and the traffic scan under
the paper's switch model (`fogsdn.measure.seed002a_claims` holds the presets, claims and
table; docs/seed002a-claims.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fogsdn.controller.path_choice import PathRouter
from fogsdn.core.scenario import PolicySpec, Scenario, scenario_graph
from fogsdn.measure.claim_stats import interval
from fogsdn.measure.seed002a_claims import (
    PRESETS,
    RANKS,
    Choices,
    ConfigResult,
    RunFigures,
    change,
    configurations,
    goal_of,
    learner_spec,
    static_spec,
    switch_spec,
)
from fogsdn.models.network_power import PathOption
from fogsdn.models.power_model import BYTES_PER_REQUEST, PowerSample
from fogsdn.models.request_goal import RequestGoal
from fogsdn.policies import make_policy
from fogsdn.sim.engine import simulate
from fogsdn.sim.power import PowerAccount, tee
from fogsdn.sim.rows import OK, Row


@dataclass(frozen=True)
class Run:
    """One simulation to do: a scenario (its switch power set), a policy, a replication,
    and the bytes per request each power account charges."""

    scenario: Scenario
    policy: PolicySpec
    replication: int
    requests: int
    goal: RequestGoal
    bytes_levels: tuple[float, ...] = (BYTES_PER_REQUEST,)

def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan

def network_figures(samples: Sequence[PowerSample], scenario: Scenario
                    ) -> tuple[float, tuple[float, ...], dict[str, float], float, float]:
    """Mean network W, per profile phase, per switch; the busiest switch's mean load and
    its power's slope against load (least squares, W per full load)."""
    sw = [s for s in samples if s.kind == "switch"]
    by: dict[str, list[PowerSample]] = {}
    for s in sw:
        by.setdefault(s.element, []).append(s)
    span = max((math.fsum(x.dt_s for x in v) for v in by.values()), default=0.0)
    per = {e: math.fsum(x.power_w * x.dt_s for x in v) / span for e, v in by.items()} \
        if span > 0 else {}
    total = math.fsum(per.values())
    profile = scenario.workload.rate_profile()
    phases: tuple[float, ...] = ()
    if profile is not None and sw:
        n = len(profile.factors)
        mids = np.asarray([(s.t_s + s.dt_s / 2) * 1000.0 / scenario.time_scale for s in sw])
        where = profile.phases_at(mids)
        w = [[0.0, 0.0] for _ in range(n)]  # energy, seconds of the first switch
        first = sw[0].element
        for s, i in zip(sw, where.tolist(), strict=True):
            w[int(i)][0] += s.power_w * s.dt_s
            if s.element == first:
                w[int(i)][1] += s.dt_s
        phases = tuple(e / t if t > 0 else math.nan for e, t in w)
    cap = scenario.switch_power.capacity_mbps * 1e6 / 8.0
    busiest = max(by, key=lambda e: math.fsum(x.bytes_per_s for x in by[e]), default=None)
    share_, slope = math.nan, math.nan
    if busiest is not None:
        loads = np.asarray([x.bytes_per_s / cap for x in by[busiest]])
        watts = np.asarray([x.power_w for x in by[busiest]])
        share_ = float(loads.mean())
        var = float(loads.var())
        slope = float(((loads - loads.mean()) * (watts - watts.mean())).mean() / var) \
            if var > 0 else math.nan
    return total, phases, per, share_, slope


def run_figures(run: Run, rows: Sequence[Row], chosen: Mapping[tuple[int, int], PathOption],
                samples: Sequence[PowerSample], curve: Sequence[Any],
                ranks_of: Mapping[tuple[int, int], Sequence[tuple[str, ...]]]) -> RunFigures:
    """The figures of one run from its rows, chosen paths, power samples and curve."""
    sc = run.scenario
    ok = sorted((r for r in rows if r[1] == OK and r[6] >= sc.warmup_ms), key=lambda r: r[6])
    rts, energies, ranks, pairs = [], [], [], []
    for r in ok:
        opt = chosen.get((r[3], r[2]))
        rts.append(r[0] - r[6] + (opt.delay_ms if opt is not None else 0.0))
        if opt is not None:
            energies.append(run.goal.energy_mj(opt))
            ranks.append(list(ranks_of[(r[3], r[7])]).index(opt.switches))
            pairs.append((r[3], r[7]))
    profile = sc.workload.rate_profile()
    phase_rt: tuple[float, ...] = ()
    if profile is not None and ok:
        where = profile.phases_at(np.asarray([r[6] for r in ok])).tolist()
        phase_rt = tuple(_mean([rt for rt, i in zip(rts, where, strict=True) if i == k])
                         for k in range(len(profile.factors)))
    net, phase_w, per, load, slope = network_figures(samples, sc)
    half = len(ranks) // 2
    late: dict[tuple[int, int], list[int]] = {}
    for p, k in zip(pairs[half:], ranks[half:], strict=True):
        late.setdefault(p, []).append(k)
    settled = (sum(max(v.count(k) for k in set(v)) for v in late.values())
               / max(1, len(ranks) - half)) if late else math.nan
    return RunFigures(
        response_ms=_mean(rts), phase_response_ms=phase_rt, network_w=net,
        phase_network_w=phase_w, switch_w=per, traffic_share=load, slope_w=slope,
        energy_mj=_mean(energies),
        estimate_w=_mean([e.network_w for e in curve]) if curve else math.nan,
        learner_rt_ms=_mean([e.response_ms for e in curve if math.isfinite(e.response_ms)])
        if curve else math.nan,
        chosen_share=len(energies) / len(ok) if ok else math.nan,
        settled_share=settled, ranks_used=len(set(ranks)),
        rank_share=tuple(ranks.count(k) / len(ranks) if ranks else math.nan for k in RANKS))


def simulate_run(run: Run) -> list[RunFigures]:
    """Simulate one run; its figures under each of `run.bytes_levels` (the choices do not
    depend on the accounts' bytes, only on the policy's goal)."""
    sc = run.scenario
    g = scenario_graph(sc)
    policy = make_policy(run.policy, sc.workload)
    chosen: dict[tuple[int, int], PathOption] = {}
    accounts = [PowerAccount(sc, g, chosen, b) for b in run.bytes_levels]
    rows: list[Row] = []
    simulate(sc, tee(rows.extend, *accounts), requests=run.requests,
             replication=run.replication, policy=policy, paths=chosen)
    router = PathRouter.of(sc)
    ranks_of = {(c, k): [o.switches for o in router.options[(cn, n.name)]]
                for c, cn in enumerate(f"c{i + 1}" for i in range(sc.workload.clients))
                for k, n in enumerate(sc.nodes)}
    curve = policy.learning_curve()
    return [run_figures(run, rows, chosen, a.samples(), curve, ranks_of) for a in accounts]

# -- a configuration's runs ------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    requests: int = 5000
    seeds: int = 5

def config_runs(base: Scenario, choices: Choices, plan: Plan, nbytes: float = BYTES_PER_REQUEST
                ) -> tuple[Scenario, RequestGoal, list[Run], dict[int, list[Run]]]:
    """The scenario, goal and runs of one configuration (learner; static plans by rank)."""
    spec = switch_spec(choices, base.switch_power)
    sc = base.model_copy(update={"switch_power": spec})
    goal = goal_of(sc, spec, nbytes)
    learn = [Run(sc, learner_spec(choices, goal), rep, plan.requests, goal, (nbytes,))
             for rep in range(plan.seeds)]
    static = {r: [Run(sc, static_spec(r), rep, plan.requests, goal, (nbytes,))
                  for rep in range(plan.seeds)] for r in RANKS}
    return sc, goal, learn, static


StaticCache = dict[tuple[str, int, int, int], RunFigures]


def run_config(base: Scenario, choices: Choices, plan: Plan,
               progress: Callable[[str], None] | None = None,
               cache: StaticCache | None = None) -> ConfigResult:
    """Every run of one configuration; a static plan's runs are shared through `cache`
    by configurations with the same switch power (their goal is then the same too)."""
    sc, goal, learn, static = config_runs(base, choices, plan)
    cache = {} if cache is None else cache
    out = ConfigResult(choices, goal)
    for run in learn:
        out.learner.append(simulate_run(run)[0])
        if progress:
            progress(f"{run.policy.name} ({choices.goal}) replication {run.replication}")
    spec = sc.switch_power.model_dump_json()
    for r, runs in static.items():
        for run in runs:
            key = (spec, r, run.replication, run.requests)
            if key not in cache:
                cache[key] = simulate_run(run)[0]
        out.static[r] = [cache[(spec, r, run.replication, run.requests)] for run in runs]
        if progress:
            progress(f"path_rank {r}")
    return out


def run_all(base: Scenario, plan: Plan, progress: Callable[[str], None] | None = None
            ) -> dict[str, ConfigResult]:
    """Both presets and every one-switch ablation between them."""
    cache: StaticCache = {}
    out = {}
    for name, choices in configurations().items():
        out[name] = run_config(base, choices, plan, _tagged(progress, name), cache)
    return out


def _tagged(progress: Callable[[str], None] | None, tag: str) -> Callable[[str], None] | None:
    if progress is None:
        return None
    say = progress
    return lambda msg: say(f"{tag}: {msg}")

# -- the traffic scan ---------------------------------------------------------------------


def traffic_scan(base: Scenario, levels: Sequence[float], plan: Plan,
                 progress: Callable[[str], None] | None = None) -> list[dict[str, float]]:
    """Under the seed preset, per traffic level (the busiest switch's mean load as a share
    of capacity, reached by larger requests at the same rate): the best possible saving
    (every connection on its fewest-switch path, rank 2, against shortest, rank 0) and the
    seed learner's saving and response-time change (its goal priced at those bytes). The
    first row is the scenario's own traffic (`BYTES_PER_REQUEST`)."""
    choices = PRESETS["seed"]
    sc, goal, _learn, static = config_runs(base, choices, Plan(plan.requests, plan.seeds))
    probe = simulate_run(static[0][0])[0]
    per_byte = probe.traffic_share / BYTES_PER_REQUEST
    levels = (probe.traffic_share, *levels)  # the first row: our own traffic
    sizes = tuple(lv / per_byte for lv in levels)
    st = {r: [simulate_run(Run(run.scenario, run.policy, run.replication, run.requests,
                               run.goal, sizes)) for run in static[r]] for r in (0, 2)}
    if progress:
        progress("traffic scan: static plans")
    rows = []
    for i, (lv, nb) in enumerate(zip(levels, sizes, strict=True)):
        _s, g, learn, _st = config_runs(base, choices, plan, nb)
        lr = [simulate_run(Run(run.scenario, run.policy, run.replication, run.requests, g,
                               (nb,)))[0] for run in learn]
        r0 = [x[i] for x in st[0]]
        r2 = [x[i] for x in st[2]]
        best = change(r2, r0, lambda f: f.network_w)
        rows.append({"traffic_share": lv, "bytes_per_request": nb,
                     "measured_share": interval([f.traffic_share for f in r0]).mean,
                     "network_W_shortest": interval([f.network_w for f in r0]).mean,
                     "best_saving": -best.mean,
                     "learner_saving": -change(lr, r0, lambda f: f.network_w).mean,
                     "learner_rt_change": change(lr, r0, lambda f: f.response_ms).mean,
                     "learner_on_fewest_switches": interval(
                         [f.rank_share[-1] for f in lr]).mean})
        if progress:
            progress(f"traffic scan {lv:g}")
    return rows


__all__ = ["Plan", "Run", "config_runs", "network_figures", "run_all", "run_config",
           "run_figures", "simulate_run", "traffic_scan"]
