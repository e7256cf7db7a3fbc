"""One simulated run (or several replications) into a results directory that looks like
an emulated one, so `analysis` treats both engines alike. The summary is accumulated
while the trace streams to disk: a 10-million-request run never holds its rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from fogsdn.controller.learner_reports import CURVE_FILE, curve_text
from fogsdn.core.latency import request_network
from fogsdn.core.scenario import Scenario, ScenarioError, scenario_graph
from fogsdn.core.streams import draw_capacities, replication_seed
from fogsdn.core.summary import (
    PolicyReport,
    RunSummary,
    class_figures,
    json_float,
    json_int,
    json_object,
    policy_report,
    write_summary,
)
from fogsdn.exact.model_params import capacity_mean_prediction
from fogsdn.measure.metrics import MeasuredAccumulator, replications_ci
from fogsdn.models.network_power import PathOption
from fogsdn.models.power_model import power_block, power_csv_text
from fogsdn.policies import Policy, make_policy
from fogsdn.policies.watchdog import watchdog
from fogsdn.sim.engine import simulate
from fogsdn.sim.fault_rows import FaultRows
from fogsdn.sim.output import AvailabilityCsv, TraceCsvSink
from fogsdn.sim.power import PowerAccount, tee

SEMANTICS_NOTE = (
    "simulated: no network, so response_ms = node_ms; a request timed out by the client "
    "is still served to the end (it does not free capacity early)"
)


class ReplicatedMean(TypedDict):
    """One figure across replications' means (`replications_ci`)."""

    mean: float
    ci95: float
    n: int


class ClassReplications(TypedDict):
    """One class's headline figures across replications' means, and its arrivals in all."""

    W: ReplicatedMean
    W_e2e: ReplicatedMean
    blocking: ReplicatedMean
    lost_prob: ReplicatedMean
    timeout_prob: ReplicatedMean
    outage: ReplicatedMean
    outage_e2e: ReplicatedMean
    count: int


class ReplicationsSummary(TypedDict):
    """summary.json of `replicate`: the runs, their intervals per class, and the exact
    figures beside them where the model applies."""

    engine: Literal["simulate"]
    scenario: str
    policy: PolicyReport
    seed: int
    replications: int
    runs: list[str]
    requests: int
    wall_s: float
    replications_ci: dict[str, ClassReplications]
    notes: list[str]
    outside_model: NotRequired[str]
    predicted: NotRequired[dict[str, object] | None]  # fogsdn.exact's figures per class
    comparison: NotRequired[dict[str, Mapping[str, object]]]  # per class


# fogsdn.measure.compare.compare_run loads the whole trace (for its CDF plot); above this
# many rows, or without a trace, the prediction is added from the streamed summary.
COMPARE_MAX_ROWS = 1_000_000
# a bigger run (over an hour at about 300k requests/s) is almost surely a typo in the rates
MAX_SIM_REQUESTS = 1e9


def _compare(out_dir: Path, rows: int, traced: bool, verbose: bool
             ) -> Mapping[str, object] | None:
    """The prediction beside the measurement (the plot only where the trace fits in memory)."""
    from fogsdn.measure.compare import attach_prediction

    plot = traced and rows <= COMPARE_MAX_ROWS
    why = "" if plot else (f"the trace ({rows} rows) is too large to load" if traced
                           else "no trace was written")
    return attach_prediction(out_dir, plot=plot, no_plot_why=why, verbose=verbose)


def run_simulation(
    scenario: Scenario,
    out_dir: Path,
    *,
    requests: int | None = None,
    duration_ms: float | None = None,
    replication: int = 0,
    trace: bool = True,
    compare: bool = True,
    verbose: bool = False,
    policy: Policy | None = None,
) -> Mapping[str, object]:
    """Simulate `scenario` into `out_dir`; returns summary.json's content. Stopping and
    seeds as docs/simulator.md says; `trace=False` skips trace.csv (sweeps), `policy`
    (the scenario's own when None) lets a learner train on through several runs."""
    if requests is None and scenario.expected_requests(duration_ms) > MAX_SIM_REQUESTS:
        raise ScenarioError(
            f"workload: (lambda_hp + lambda_lp) x duration expects "
            f"{scenario.expected_requests(duration_ms):.3g} requests; a simulated run takes "
            f"at most {MAX_SIM_REQUESTS:.0e} (give --requests to bound it)")
    # a drawn capacity is this replication's: the run (and its scenario.yaml, so its
    # comparison) holds the drawn value
    scenario = draw_capacities(scenario, replication)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.yaml").write_text(scenario.to_yaml())
    acc = MeasuredAccumulator(scenario.warmup_ms, scenario.deadline_ms)
    if policy is None:
        policy = make_policy(scenario.policy, scenario.workload)
    # a policy that chooses each request's path (seed 002a) says it here, by (client, seq)
    chosen: dict[tuple[int, int], PathOption] | None = {} if policy.chooses_paths else None
    power = PowerAccount(scenario, scenario_graph(scenario), chosen)
    network = request_network(scenario, policy.paths(scenario_graph(scenario)))
    fault_rows = FaultRows(scenario) if scenario.faults else None
    with (
        TraceCsvSink(out_dir / "trace.csv" if trace else None, scenario, acc, network,
                     replication_seed(scenario.seed, replication), chosen) as sink,
        AvailabilityCsv(out_dir / "availability.csv") as avail,
        watchdog(),  # a loop in the policy's code: one line, not a hang
    ):
        res = simulate(
            scenario, tee(sink, power, *([fault_rows] if fault_rows else [])),
            requests=requests, duration_ms=duration_ms,
            replication=replication, availability=avail, policy=policy, paths=chosen,
        )
    samples = power.samples()
    (out_dir / "power.csv").write_text(power_csv_text(samples))
    curve = policy.learning_curve()  # an online learner's epochs (seed 002a's path_rnn)
    if curve:  # the live controller's columns, one policy epoch (fogsdn.controller.learner_reports)
        (out_dir / CURVE_FILE).write_text(curve_text(policy.name, curve))
    summary: RunSummary = {
        "engine": "simulate",
        "scenario": scenario.name,
        "policy": policy_report(scenario.policy),
        "seed": scenario.seed,
        "replication": replication,
        "effective_seed": res.seed,
        "stop": {"requests": requests,
                 "duration_ms": duration_ms if duration_ms is not None
                 else (scenario.duration_ms if requests is None else None)},
        "requests": res.requests,
        "rows": sink.rows,
        "outcomes": sink.counts,
        "last_arrival_ms": res.last_arrival_ms,
        "end_ms": res.end_ms,
        "ofn_transitions": res.transitions,
        "per_request_policy": res.per_request,
        "wall_s": res.wall_s,
        "requests_per_s": res.requests / res.wall_s if res.wall_s > 0 else math.nan,
        "measured": acc.summary(),
        "power": power_block(samples, sink.counts["ok"]),
        # the network's share of a request, by (client, node) path (fogsdn.core.latency)
        "network": {"paths": {f"{c}-{n}": p.fixed_ms() for (c, n), p in network.paths.items()},
                    "random": network.random},
        "notes": [SEMANTICS_NOTE],
    }
    if fault_rows is not None:  # the schedule's faults, each with its cost (fogsdn.core.faults)
        summary["faults"] = fault_rows.report(res.end_ms)
    write_summary(out_dir / "summary.json", summary)
    if verbose:
        print(summary_text(summary))
    written: Mapping[str, object] = summary
    if compare:
        written = _compare(out_dir, sink.rows, trace, verbose) or written
    return written


def summary_text(summary: RunSummary) -> str:
    """The per-class table (the emulated runs' layout), with the simulation's speed."""
    from fogsdn.measure.metrics import summary_table

    head = (
        f"simulated {summary['requests']} requests of {summary['scenario']} "
        f"(policy {summary['policy']['name']}, seed {summary['effective_seed']}) in "
        f"{summary['wall_s']:.2f} s: {summary['requests_per_s']:,.0f} requests/s, "
        f"scenario time {summary['end_ms']:.1f} ms"
    )
    return head + "\n" + summary_table(summary)


_Job = tuple[Scenario, Path, int, int | None, float | None, bool]


def _replication(args: _Job) -> Mapping[str, object]:
    sc, out, r, requests, duration_ms, trace = args
    # the prediction is the same for every replication (ask the model once), unless
    # capacities are drawn per replication
    return run_simulation(sc, out, requests=requests, duration_ms=duration_ms,
                          replication=r, trace=trace, compare=r == 0 or sc.capacity_drawn)


def _across(figures: Sequence[Mapping[str, object]], metric: str) -> ReplicatedMean:
    ci = replications_ci([json_float(f[metric]) for f in figures])
    return {"mean": ci.mean, "ci95": ci.half_width, "n": ci.n}


def replications_summary(summaries: Sequence[Mapping[str, object]]
                         ) -> dict[str, ClassReplications]:
    """95 % intervals across replications for each class's headline numbers."""
    out: dict[str, ClassReplications] = {}
    for cls in ("hp", "lp"):
        figs = [class_figures(s, cls) for s in summaries]
        out[cls] = {"W": _across(figs, "W"), "W_e2e": _across(figs, "W_e2e"),
                    "blocking": _across(figs, "blocking"),
                    "lost_prob": _across(figs, "lost_prob"),
                    "timeout_prob": _across(figs, "timeout_prob"),
                    "outage": _across(figs, "outage"), "outage_e2e": _across(figs, "outage_e2e"),
                    "count": sum(json_int(f["count"]) for f in figs)}
    return out


def _replications_comparison(rc: dict[str, ClassReplications], predicted: Mapping[str, object]
                             ) -> dict[str, Mapping[str, object]]:
    """fogsdn.measure.comparison's per-class block, with the across-replications intervals."""
    from fogsdn.measure.comparison import comparison_block

    return {cls: comparison_block({k: v for m in ("W", "blocking", "outage")
                                   for k, v in ((m, rc[cls][m]["mean"]),
                                                (m + "_ci95", rc[cls][m]["ci95"]))},
                                  json_object(predicted[cls], f"predicted.{cls}"))
            for cls in ("hp", "lp")}


def replicate(
    scenario: Scenario,
    n: int,
    out_dir: Path,
    *,
    requests: int | None = None,
    duration_ms: float | None = None,
    processes: int = 1,
    trace: bool = True,
    verbose: bool = False,
) -> ReplicationsSummary:
    """`n` independent replications (seeds seed, seed+1, ...) into out_dir/repNNN, and
    out_dir/summary.json with `replications_ci` per class across their means."""
    if n < 1:
        raise ValueError("replications must be >= 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.yaml").write_text(scenario.to_yaml())
    jobs = [(scenario, out_dir / f"rep{r:03d}", r, requests, duration_ms, trace) for r in range(n)]
    wall0 = time.perf_counter()
    if processes > 1 and n > 1:
        with ProcessPoolExecutor(max_workers=min(processes, n)) as pool:
            runs = list(pool.map(_replication, jobs))
    else:
        runs = [_replication(j) for j in jobs]
    summary: ReplicationsSummary = {
        "engine": "simulate",
        "scenario": scenario.name,
        "policy": policy_report(scenario.policy),
        "seed": scenario.seed,
        "replications": n,
        "runs": [str(j[1]) for j in jobs],
        "requests": sum(json_int(s["requests"]) for s in runs),
        "wall_s": time.perf_counter() - wall0,
        "replications_ci": replications_summary(runs),
        "notes": [SEMANTICS_NOTE,
                  "replications_ci: mean and 95 % t-interval across replication means"],
    }
    if scenario.capacity_drawn:  # each run is compared at its draw; all of them at the mean
        mean = capacity_mean_prediction(scenario)
        if isinstance(mean, str):
            summary["outside_model"] = mean
        else:
            summary["predicted"] = mean
    else:  # the first run's (compared: runs[0] has its prediction)
        first = runs[0]
        if "predicted" in first:
            pred = first["predicted"]
            summary["predicted"] = None if pred is None else json_object(pred, "predicted")
        if "outside_model" in first:
            summary["outside_model"] = str(first["outside_model"])
    predicted = summary.get("predicted")
    if predicted:
        summary["comparison"] = _replications_comparison(summary["replications_ci"], predicted)
    write_summary(out_dir / "summary.json", summary)
    if verbose:
        print(replications_text(summary))
    return summary


def replications_text(summary: ReplicationsSummary) -> str:
    rc = summary["replications_ci"]
    pred = summary.get("predicted")
    lines = [
        f"{summary['replications']} replications of {summary['scenario']} "
        f"(policy {summary['policy']['name']}), {summary['requests']} requests, "
        f"{summary['wall_s']:.2f} s; mean ± 95 % half-width across replications"
        + ("; [exact]" if pred else ""),
        f"{'class':5} {'W ms':>28} {'blocking':>28} {'lost':>18} {'outage':>28}",
    ]
    for cls in ("hp", "lp"):
        c, p = rc[cls], json_object((pred or {}).get(cls, {}), f"predicted.{cls}")
        # mean ± half-width, and the exact figure where the model gives one
        cell = {m: f"{c[m]['mean']:.4f} ± {c[m]['ci95']:.4f}"
                + (f" [{p[m]:.4f}]" if m != "lost_prob" and p.get(m) is not None else "")
                for m in ("W", "blocking", "lost_prob", "outage")}
        lines.append(f"{cls:5} {cell['W']:>28} {cell['blocking']:>28} "
                     f"{cell['lost_prob']:>18} {cell['outage']:>28}")
    if "outside_model" in summary:
        lines.append(f"exact model: outside the model ({summary['outside_model']})")
    return "\n".join(lines)


__all__ = ["replicate", "replications_summary", "run_simulation", "summary_text"]
