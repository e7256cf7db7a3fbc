"""A finished (or interrupted) live run's results directory: trace, availability,
summary; `fogsdn.measure.compare` adds the exact prediction where the scenario is in a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fogsdn.controller.load_ledger import LOAD_FILE
from fogsdn.core.csv_rows import read_csv_rows, write_csv_rows
from fogsdn.core.faults import SIMULATED_KINDS, FaultRecord
from fogsdn.core.latency import decision_budget_real_ms
from fogsdn.core.scenario import LeaveMode, Scenario
from fogsdn.core.summary import (
    PolicyReport,
    RoutingBlock,
    RunOutcome,
    RunSummary,
    json_float,
    json_object,
    policy_report,
    write_summary,
)
from fogsdn.core.trace import Outcome, TraceRow, read_trace, write_trace
from fogsdn.core.workload import drawn_instants
from fogsdn.measure.compare import attach_prediction
from fogsdn.measure.decisions import decision_block, decision_lines
from fogsdn.measure.fidelity import (
    emulation_bias,
    gap_split,
    gap_split_line,
    timing_line,
    timing_summary,
)
from fogsdn.measure.metrics import measured_summary, p50_p99, summary_table
from fogsdn.measure.rt_measurement import ControllerRt, compare_rt, rt_report_line
from fogsdn.measure.send_timing import (
    engine_block,
    late_reason,
    late_threshold_ms,
    send_lateness,
    send_line,
)
from fogsdn.models.power_model import power_block, power_csv_text
from fogsdn.view.state import event_lines

if TYPE_CHECKING:
    from fogsdn.live.live_network import LinksReport, LiveNetwork


def _events(path: Path, kind: str) -> list[dict[str, object]]:
    """An event log's events of one kind (none where there is no log; a torn line skipped)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [ev for ev in event_lines(lines) if ev.get("event") == kind]


def merge_traces(out: Path, clients: list[str]) -> list[TraceRow]:
    """Client traces into one, timeouts of requests a worker dropped reclassified `lost`."""
    dropped = {str(ev["id"]): f.stem.removeprefix("worker-")
               for f in out.glob("worker-*.jsonl") for ev in _events(f, "dropped")}
    rows: list[TraceRow] = []
    for name in clients:
        f = out / f"trace-{name}.csv"
        if f.exists():
            rows += read_trace(f)
    for r in rows:
        if r.outcome is Outcome.TIMEOUT and r.request_id in dropped:
            r.outcome = Outcome.LOST
            r.node = dropped[r.request_id]
            r.error = "dropped when the OFN left"
    rows.sort(key=lambda r: r.t_send)
    write_trace(out / "trace.csv", rows)
    return rows


def read_controller_rt(path: Path, epoch: float, ms_real: float) -> list[ControllerRt]:
    """controller-rt.csv (fogsdn.controller.app: client, client_port, node, t_syn, t_fin, rt_ms;
    times on the controller's monotonic clock), SYN stamps made model ms from `epoch`;
    a torn last line is skipped."""
    out: list[ControllerRt] = []
    if not path.exists():
        return out
    for rec in read_csv_rows(path):
        try:
            out.append(ControllerRt(rec["client"], int(rec["client_port"]), rec["node"],
                                    (float(rec["t_syn"]) - epoch) / ms_real,
                                    float(rec["rt_ms"])))
        except (TypeError, ValueError):
            continue
    return out


def write_availability(out: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """availability.csv: the run's OFN changes (`QueueingRun.availability`), in time order."""
    cols = ["t", "node", "state", "t_applied", "t_installed", "dropped", "handed_off", "lead",
            "error"]
    write_csv_rows(out / "availability.csv", cols,
                   sorted(rows, key=lambda r: (json_float(r["t"]), str(r["node"]))), restval="")


def _routing(sc: Scenario, rows: list[TraceRow], avail: Sequence[Mapping[str, object]]
             ) -> RoutingBlock | None:
    """Requests the data plane routed against the drawn availability (proactive policies)."""
    from fogsdn.measure.fidelity import routing_against_schedule
    from fogsdn.policies import initial_view, is_per_request, make_policy

    policy = make_policy(sc.policy)
    if is_per_request(policy) or not avail:
        return None
    changes = [(json_float(a["t"]), str(a["node"]), a["state"] == "available",
                json_float(a["t_installed"]) if a.get("t_installed") not in (None, "")
                else math.inf)
               for a in avail]
    try:
        rc = routing_against_schedule(rows, changes, policy, initial_view(sc))
    except Exception:  # the policy failed here too; summary["policy"] reports it
        return None
    return {"checked": rc.checked, "against": rc.against, "share": rc.share,
            "late_p50_ms": rc.late_ms[0], "late_p99_ms": rc.late_ms[1],
            "early": rc.early, "early_p50_ms": rc.early_ms[0], "early_p99_ms": rc.early_ms[1]}


def _first_policy_rows(rows: list[TraceRow], epochs: Sequence[Mapping[str, object]]
                       ) -> list[TraceRow]:
    """The requests the scenario's own policy dispatched: all of them, or those sent
    before the first policy swap (a swapped-in policy routes by its own table)."""
    if len(epochs) < 2:
        return rows
    end = json_float(epochs[0]["to_ms"])
    return [r for r in rows if r.t_send < end]


def live_policy_report(out: Path, sc: Scenario) -> PolicyReport:
    """The policy that ran, and whether it failed (the controller then used the FNs)."""
    errors = [str(ev.get("error", ""))
              for ev in _events(out / "controller-events.jsonl", "policy_error")]
    return policy_report(sc.policy, errors)


def _links(live: LiveNetwork) -> LinksReport:
    """summary.json's `links`; the load is over, so the cost-per-hop probe stops here."""
    live.hop_floor.close()
    links = live.links.copy()
    if live.hop_floor.report:
        links["hop_cost"] = dict(live.hop_floor.report)
    return links


def _lag_stats(avail: Sequence[Mapping[str, object]]) -> dict[str, float]:
    lag = [json_float(a["t_applied"]) - json_float(a["t"]) for a in avail
           if json_float(a["t"]) > 0]
    return {"count": len(lag), **p50_p99(lag)}


def _bias(summary: RunSummary) -> Mapping[str, object]:
    nodes = json_object(summary["measured"].get("nodes") or {}, "measured.nodes")
    ratios = {n: json_float(r) for n, v in nodes.items()
              if (r := json_object(v, f"measured.nodes.{n}").get("ratio")) is not None}
    routing = summary.get("routing")
    late = late_reason(summary["send_lateness"]) if "send_lateness" in summary else None
    return emulation_bias(ratios, routing["share"] if routing else None,
                          steal_share=summary.get("cpu_steal_share"),
                          timing=summary.get("arrival_timing"),
                          extra=[late] if late else [])


def _load_figures(out: Path, sc: Scenario, rows: list[TraceRow], drawn: Mapping[str, float]
                  ) -> tuple[dict[str, float], Mapping[str, object] | None]:
    """The sends' lateness against the drawn instants, and the traffic engines' own CPU
    (their load-*.json; None where none was written: an engine killed before its end)."""
    fastest = sc.workload.size.mean / max(n.mu for n in sc.nodes)
    lateness = send_lateness(rows, drawn, late_threshold_ms(fastest))
    stats = []
    for f in sorted(out.glob("load-*.json")):
        try:
            stats.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return lateness, (engine_block(stats) if stats else None)


def _arrival_timing(sc: Scenario, rows: list[TraceRow], drawn: Mapping[str, float]
                    ) -> dict[str, dict[str, float]] | None:
    """What the clients' and the switch's timing did to each node's queue
    (`fogsdn.measure.fidelity.arrival_timing`); None where a request's arrival at its node is
    not in the trace (handed off, or restarted at size-based stages)."""
    if sc.churn.leave is LeaveMode.HANDOFF or any(r.hosts for r in rows):
        return None
    return timing_summary(sc.nodes, rows, drawn, sc.warmup_ms)


def _decisions(out: Path, sc: Scenario, rows: list[TraceRow]) -> Mapping[str, object] | None:
    """The per-request decisions' path and staleness (fogsdn.measure.decisions), and the
    requests served with no decision (by the policy's routes while the controller was
    away); None where the controller decided no connection (a proactive policy)."""
    events = [ev for ev in _events(out / "controller-events.jsonl", "decision")
              if "path_ms" in ev]
    if not events:
        return None
    path_ms = [json_float(ev["path_ms"]) for ev in events]
    decided = {(str(ev.get("client")), str(ev.get("port"))) for ev in events}
    fallback = sum(1 for r in rows if r.node and r.ports
                   and (r.client, r.ports.split(">")[0]) not in decided)
    staleness = None
    try:
        staleness = json.loads((out / LOAD_FILE).read_text())
        staleness.pop("staleness", None)  # the histogram stays in its file
    except (OSError, ValueError, AttributeError):
        pass
    return decision_block(path_ms, sc.time_scale, decision_budget_real_ms(sc), staleness,
                          fallback)


def _split_gap(out: Path, sc: Scenario, summary: RunSummary,
               compared: Mapping[str, object] | None) -> None:
    """Put the simulator on the very draws this run's clients sent (same scenario file,
    same seed: a fraction of a second) and split the W gap to exact into the sample's
    part and the emulation's (`gap_split` in summary.json, one printout line). Not for a
    crashed or interrupted run, whose numbers are not a measurement."""
    if (summary.get("crashed") or summary.get("interrupted") or sc.workload.profile is not None
            or any(f.kind not in SIMULATED_KINDS for f in sc.faults)):
        return  # (the simulator has no live-only fault: the same draws would differ)
    from fogsdn.sim.runner import run_simulation

    try:
        sim = run_simulation(sc, out / "same_draws", trace=False, compare=False)
    except Exception as err:  # noqa: BLE001 (the live results stand without it)
        print(f"[run] no split of the gap: the simulator on these draws failed: "
              f"{str(err).splitlines()[0] if str(err) else repr(err)}")
        return
    predicted = (compared or {}).get("predicted")
    split = gap_split(summary["measured"], json_object(sim["measured"], "measured"),
                      None if predicted is None else json_object(predicted, "predicted"))
    if not split:
        return
    path = out / "summary.json"
    whole = json.loads(path.read_text())
    whole["gap_split"] = split
    write_summary(path, whole)
    print(gap_split_line(split))


def fault_lines(faults: Sequence[FaultRecord]) -> list[str]:
    """The scheduled faults and what each cost, one line each."""
    lines = [f"scheduled faults ({len(faults)}; not crashes):"]
    for f in faults:
        if "cost" not in f:
            continue
        c = f["cost"]
        rec = "not recovered" if c["recovery_ms"] is None else f"served again after " \
            f"{c['recovery_ms']:.1f} model ms"
        where = f" {f['node']}" if f.get("node") else ""
        err = f"  ERROR {f['error']}" if f.get("error") else ""
        lines.append(f"  {f['kind']}{where} at {f['t_ms']:g} ms: lost {c['lost']}, timed out "
                     f"{c['timed_out']}, blocked {c['blocked']}, re-routed {c['rerouted']}; "
                     f"{rec}{err}")
    return lines


def crash_report(summary: Mapping[str, Any]) -> str:
    """What went wrong, one line each; says that the numbers are not compared."""
    lines = ["[run] CRASHED RUN: these numbers are not a measurement of the scenario"]
    for i in summary.get("incidents", []):
        extra = f", back after {i['outage_ms']} ms" if "outage_ms" in i else ""
        cause = f" ({i['cause']})" if i.get("cause") else ""
        lines.append(f"  {i['process']} (pid {i['pid']}) {i['exit']}{cause} at model t="
                     f"{i['t_model_ms']} ms: {i['action']}{extra}")
    if summary.get("failure"):
        lines.append(f"  run failed: {summary['failure']}")
    return "\n".join(lines)


def finish_results(out: Path, sc: Scenario, run: Any, worker_stats: Mapping[str, object]
                   ) -> dict[str, object]:
    """summary.json of a `fogsdn.live.queueing_run.QueueingRun` (`run`), written, and
    returned as the file holds it (with the prediction `attach_prediction` added)."""
    rows = merge_traces(out, list(run.clients))
    write_availability(out, run.availability)
    lat = run.update_latency_ms
    live = run.live
    outcome: RunOutcome = run.supervisor.summary_fields()
    summary: RunSummary = {
        "engine": "emulate",
        "scenario": sc.name,
        # crashed: a process died or the run failed; its numbers are not a measurement
        **outcome,
        "requests": len(rows),
        "measured": measured_summary(rows, sc.warmup_ms, sc.deadline_ms),
        "startup_s": live.timings,
        "rule_update_ms": {"count": len(lat), **p50_p99(lat),
                           "max": max(lat) if lat else math.nan},
        # how late the live network followed the drawn churn schedule (model ms)
        "churn_lag_ms": _lag_stats(run.availability),
        "routing": _routing(sc, _first_policy_rows(rows, run.policy_epochs), run.availability),
        "policy": live_policy_report(out, sc),
        # the link element chosen for this run ("none" when no link is shaped), and the
        # emulator's cost per hop (fogsdn.live.hop_floor), measured until now
        "links": _links(live),
        "workers": worker_stats,
        "containers": {
            "enabled": bool(sc.containers),
            "limits": {n.name: {"cpu": n.cpu, "memory_mb": n.memory_mb} for n in sc.nodes},
            "accounting": live.container_stats,
        },
    }
    measured_rt = read_controller_rt(out / "controller-rt.csv", run.epoch,
                                     sc.timebase.real_s_per_model_ms)
    rt_report = compare_rt(measured_rt, rows, sc.warmup_ms) if measured_rt else None
    if rt_report is not None:
        summary["rt_measurement"] = rt_report
        summary["rt_measurement_error"] = rt_report["rt_measurement_error"]
    if sc.workload.work == "cpu":
        summary["cpu_work"] = {"bytes_per_cpu_ms": run.bytes_per_ms,
                               "kernel": "sha256 (fogsdn/nodes/cpu_work.py)"}
    # whether each worker's completion thread got SCHED_FIFO (fogsdn/nodes/worker.py --realtime)
    realtime = {f.stem.removeprefix("worker-"): bool(ev.get("granted"))
                for f in sorted(out.glob("worker-*.jsonl")) for ev in _events(f, "realtime")}
    # whether ovs-vswitchd's threads ran SCHED_FIFO for the run (fogsdn.live.live_network)
    summary["realtime_switch"] = live.switch.realtime
    if realtime:
        summary["realtime_workers"] = realtime
        refused = sorted(n for n, ok in realtime.items() if not ok)
        if refused:
            live.notes.append(f"real-time scheduling refused for {', '.join(refused)}: "
                              "their replies may leave late on a busy machine")
    if run.policy_epochs:  # the policies a view's swaps ran, per span (measure.policy_epochs)
        summary["policy_epochs"] = run.policy_epochs
    if live.cluster is not None:
        summary["cluster"] = live.cluster.report()
    if live.notes or live.hop_floor.notes:
        summary["notes"] = [*live.notes, *live.hop_floor.notes]
    meter = run.power
    if meter is not None and meter.samples:
        (out / "power.csv").write_text(power_csv_text(meter.samples))
        answered = sum(1 for r in rows if r.outcome is Outcome.OK)
        summary["power"] = power_block(meter.samples, answered)
        if meter.errors:
            summary["power"]["errors"] = meter.errors
    if run.cpu_steal is not None:
        summary["cpu_steal_share"] = run.cpu_steal
    if run.cpu_idle is not None:
        summary["cpu_idle_share"] = run.cpu_idle
    drawn = drawn_instants(sc, sc.seed)
    summary["send_lateness"], engine = _load_figures(out, sc, rows, drawn)
    if engine is not None:
        summary["load_engine"] = engine
    timing = _arrival_timing(sc, rows, drawn)
    if timing is not None:
        summary["arrival_timing"] = timing
    decisions = _decisions(out, sc, rows)
    if decisions is not None:
        summary["decisions"] = decisions
    bias = summary["emulation_bias"] = _bias(summary)
    faults = getattr(run, "faults", None)
    if faults is not None and faults.faults:  # the schedule's faults, each with its cost
        summary["faults"] = faults.report(rows, sc.duration_ms)
    write_summary(out / "summary.json", summary)
    print(("\n[run] INTERRUPTED: partial results\n" if summary["interrupted"] else "\n")
          + summary_table(summary), flush=True)
    if summary["crashed"]:
        print(crash_report(summary), flush=True)
    if "faults" in summary:
        print("\n".join(fault_lines(summary["faults"])), flush=True)
    if lat:
        print(f"rule update after an OFN event: p50 {summary['rule_update_ms']['p50']:.2f} ms, "
              f"p99 {summary['rule_update_ms']['p99']:.2f} ms over {len(lat)} events")
    if "power" in summary:
        pw = summary["power"]
        print(f"estimated power: {pw['total_W']:.1f} W in total ({pw['servers_W']:.1f} W "
              f"servers), {pw['energy_J']:.0f} J, {pw['energy_per_request_J']:.3f} J per "
              "answered request")
    if rt_report is not None:
        print(rt_report_line(rt_report))
    pol = summary["policy"]
    if pol["errors"]:
        print(f"[run] POLICY FAILED {pol['errors']} times; the controller sent those "
              f"decisions to the FNs. First: {pol['first_error']}")
    rt = summary["routing"]
    if rt and rt["against"]:
        late = rt["against"] - rt.get("early", 0)
        print(f"routed against the drawn OFN availability: {rt['against']} of {rt['checked']} "
              f"({100 * rt['share']:.1f} %): {late} late, sent p50 {rt['late_p50_ms']:.3f} / "
              f"p99 {rt['late_p99_ms']:.3f} model ms after a change (the network's reaction "
              f"time); {rt.get('early', 0)} early, sent p50 {rt.get('early_p50_ms', math.nan):.3f}"
              " model ms before a change they followed (installed ahead by the lead, or "
              "reached by their SYN after its install)")
    if summary["send_lateness"]["count"]:
        print(send_line(summary["send_lateness"], summary.get("load_engine")))
    if "arrival_timing" in summary:
        print(timing_line(summary["arrival_timing"]))
    if "decisions" in summary:
        print("\n".join(decision_lines(summary["decisions"])))
    reasons = bias.get("reasons")
    if bias["large"] and isinstance(reasons, list):
        print("[run] EMULATION BIAS: this run's own artefacts are large; do not read them as "
              "a policy effect in the comparison below:\n  " +
              "\n  ".join(map(str, reasons)), flush=True)
    compared = attach_prediction(out)
    _split_gap(out, sc, summary, compared)
    print(f"results: {out}")
    return json_object(json.loads((out / "summary.json").read_text()), "summary.json")
