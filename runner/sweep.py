"""Sweeps: every (sweep value x policy x replication) point of a scenario, then a figure.

Points are independent runs, so they fan out: a local process pool by default, or
Ray tasks (a private local Ray, or an existing cluster given its address). Each
finished point is appended to sweep.csv at once, so a failed or interrupted sweep
keeps what it finished; a failed point is reported with its parameters and the
others go on. The figure puts mean W (with 95 % intervals) per policy and class
against the swept value, beside the exact curves where the analytic model applies.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analysis.metrics import replications_ci
from fogsdn.cli_args import add_span_arguments, span_ms
from fogsdn.scenario import Scenario, ScenarioError

Engine = Literal["simulate", "emulate"]
Executor = Literal["process", "ray", "serial"]
CLASSES = ("hp", "lp")
CSV_COLUMNS: tuple[str, ...] = (
    "index", "policy", "parameter", "value", "replication", "cls", "count", "ok",
    "W", "W_ci95", "blocking", "lost_prob", "timeout_prob", "outage", "requests",
    "wall_s", "run_dir",
)
FAIL_COLUMNS: tuple[str, ...] = ("index", "policy", "parameter", "value", "replication", "error")


class SweepError(RuntimeError):
    """A sweep that cannot run at all (as opposed to one failed point)."""


@dataclass(frozen=True)
class Point:
    index: int
    policy: str
    parameter: str
    value: float
    replication: int
    scenario: Scenario
    run_dir: Path

    def label(self) -> str:
        return f"{self.policy} {self.parameter}={self.value:g} rep {self.replication}"


@dataclass
class SweepResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    figure: Path | None = None
    csv: Path | None = None


def plan(scenario: Scenario, out_dir: Path, engine: Engine = "simulate") -> list[Point]:
    """Every point: sweep values (emulate_values for emulate, when given) x policies
    (the scenario's own when the sweep names none) x replications."""
    sw = scenario.sweep
    if sw is None:
        raise SweepError(f"scenario {scenario.name} has no sweep block")
    values = sw.emulate_values if (engine == "emulate" and sw.emulate_values) else sw.values
    policies = sw.policies or (scenario.policy.name,)
    points: list[Point] = []
    for value in values:
        for policy in policies:
            over: dict[str, Any] = {sw.parameter: value}
            if policy != scenario.policy.name:
                over["policy.name"] = policy
            sc = scenario.with_overrides(over)
            for r in range(sw.replications):
                run_dir = out_dir / "points" / policy / f"{sw.parameter}={value:g}" / f"rep{r:03d}"
                points.append(
                    Point(len(points), policy, sw.parameter, float(value), r, sc, run_dir)
                )
    return points


def _rows(point: Point, summary: dict[str, Any]) -> list[dict[str, Any]]:
    m = summary["measured"]
    return [
        {
            "index": point.index, "policy": point.policy, "parameter": point.parameter,
            "value": point.value, "replication": point.replication, "cls": cls,
            "count": m[cls]["count"], "ok": m[cls]["ok"], "W": m[cls]["W"],
            "W_ci95": m[cls]["W_ci95"], "blocking": m[cls]["blocking"],
            "lost_prob": m[cls]["lost_prob"], "timeout_prob": m[cls]["timeout_prob"],
            "outage": m[cls]["outage"], "requests": summary.get("requests", ""),
            "wall_s": summary.get("wall_s", ""), "run_dir": str(point.run_dir),
        }
        for cls in CLASSES
    ]


def run_point(
    point: Point, requests: int | None = None, duration_ms: float | None = None,
    trace: bool = True,
) -> list[dict[str, Any]]:
    """Simulate one point (in whatever process or Ray worker runs it): sweep.csv rows."""
    from sim.runner import run_simulation

    summary = run_simulation(point.scenario, point.run_dir, requests=requests,
                             duration_ms=duration_ms, replication=point.replication,
                             trace=trace, compare=False)
    return _rows(point, summary)


def emulate_point(point: Point, duration_ms: float | None = None,
                  time_scale: float | None = None) -> list[dict[str, Any]]:
    """Run one point live (root, Open vSwitch; one network at a time per host), here or
    in a Ray worker on the node that took the emulation resource."""
    from runner.queueing_run import run_emulation

    sc = point.scenario
    over: dict[str, Any] = {}
    if point.replication:
        over["seed"] = sc.seed + point.replication
    if duration_ms is not None:
        over["duration_ms"] = duration_ms
        if sc.warmup_ms >= duration_ms:
            over["warmup_ms"] = 0.0
    if time_scale is not None:
        over["time_scale"] = time_scale
    if over:
        sc = sc.with_overrides(over)
    summary = run_emulation(sc, point.run_dir, show_progress=False)
    if summary.get("interrupted"):
        # the live run caught Ctrl-C to tear down cleanly; stop the sweep, keep the rest
        raise KeyboardInterrupt
    return _rows(point, summary)


# -- executors -------------------------------------------------------------------------

Outcome = tuple[Point, list[dict[str, Any]] | None, str | None]


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".replace("\n", " ")[:500]


def _serial(points: Sequence[Point], job: Callable[[Point], list[dict[str, Any]]]
            ) -> Iterator[Outcome]:
    for p in points:
        try:
            yield p, job(p), None
        except Exception as err:  # noqa: BLE001 - report the point, keep the others
            yield p, None, _error(err)


def _process(points: Sequence[Point], workers: int, requests: int | None,
             duration_ms: float | None, trace: bool) -> Iterator[Outcome]:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[list[dict[str, Any]]], Point] = {
            pool.submit(run_point, p, requests, duration_ms, trace): p for p in points
        }
        for fut in as_completed(futures):
            p = futures[fut]
            try:
                yield p, fut.result(), None
            except Exception as err:  # noqa: BLE001
                yield p, None, _error(err)


RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# A Ray node that can emulate offers one unit of this resource (`ray start --resources
# '{"fogsdn_emulation": 1}'`, as root, with Open vSwitch); a live point takes the unit,
# so each node runs one emulation at a time while the nodes run theirs in parallel.
EMULATION_RESOURCE = "fogsdn_emulation"


def _ray(points: Sequence[Point], workers: int, address: str | None,
         job: Callable[..., list[dict[str, Any]]], args: tuple[Any, ...],
         options: dict[str, Any], local_resources: dict[str, float] | None = None,
         need: str | None = None) -> Iterator[Outcome]:
    """Ray tasks `job(point, *args)`: on a private local Ray (started and shut down here)
    or, with an address, on an existing cluster. Never `ray stop`: it kills by name
    machine-wide. `need`: a custom resource some node must offer, or a one-line error."""
    try:
        import ray
    except ImportError:
        raise SweepError(
            "--executor ray needs Ray: .venv/bin/pip install 'fogsdn[sweep]'"
        ) from None
    started = not ray.is_initialized()
    saved_env: dict[str, str | None] = {}
    tmp: str | None = None
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # a bare ray.init() would silently join any running cluster: always say 'local'
            tmp = tempfile.mkdtemp(prefix="fogsdn-ray-")
            env = RAY_ENV | {"RAY_TMPDIR": tmp}
            saved_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            ray.init(address="local", num_cpus=workers, include_dashboard=False,
                     log_to_driver=False, resources=local_resources or None)
    try:
        if need is not None and ray.cluster_resources().get(need, 0) < 1:
            raise SweepError(
                f"no Ray node offers the {need!r} resource: start each host that can "
                f"emulate with `ray start --resources='{{\"{need}\": 1}}'` (as root)")
        task = ray.remote(max_retries=0, **options)(job)
        pending = {task.remote(p, *args): p for p in points}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                p = pending.pop(ref)
                try:
                    yield p, ray.get(ref), None
                except Exception as err:  # noqa: BLE001 - RayTaskError wraps the cause
                    cause = getattr(err, "cause", None) or err
                    yield p, None, _error(cause)
    finally:
        if started:
            ray.shutdown()
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


# -- the sweep --------------------------------------------------------------------------


def run_sweep(
    scenario: Scenario,
    out_dir: Path,
    *,
    engine: Engine = "simulate",
    executor: Executor = "process",
    workers: int | None = None,
    ray_address: str | None = None,
    requests: int | None = None,
    duration_ms: float | None = None,
    trace: bool = True,
    figure: bool = True,
    log: Callable[[str], None] | None = None,
    time_scale: float | None = None,
) -> SweepResult:
    """Run every point, writing sweep.csv as they finish, then the figure (sweep.png)."""
    say = log or (lambda s: print(s, file=sys.stderr, flush=True))
    out_dir = Path(out_dir)
    points = plan(scenario, out_dir, engine)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.yaml").write_text(scenario.to_yaml())
    workers = workers or min(len(points), os.cpu_count() or 1)
    if engine == "emulate" and executor == "ray":
        outcomes: Iterator[Outcome] = _ray(
            points, workers, ray_address, emulate_point, (duration_ms, time_scale),
            {"num_cpus": 1, "resources": {EMULATION_RESOURCE: 1}},
            local_resources={EMULATION_RESOURCE: 1}, need=EMULATION_RESOURCE)
        how = (f"live on Ray ({ray_address or 'local'}), one emulation per node at a time")
    elif engine == "emulate":
        outcomes = _serial(points, lambda p: emulate_point(p, duration_ms, time_scale))
        how = "live, one point at a time"
    elif executor == "ray":
        outcomes = _ray(points, workers, ray_address, run_point, (requests, duration_ms, trace),
                        {"num_cpus": 1})
        how = f"Ray ({ray_address or f'local, {workers} CPUs'})"
    elif executor == "serial" or workers == 1:
        outcomes = _serial(points, lambda p: run_point(p, requests, duration_ms, trace))
        how = "in this process"
    else:
        outcomes = _process(points, workers, requests, duration_ms, trace)
        how = f"process pool of {workers}"
    say(f"[sweep] {scenario.name}: {len(points)} points ({engine}, {how}) -> {out_dir}")
    result = SweepResult(csv=out_dir / "sweep.csv")
    t0 = time.perf_counter()
    with open(out_dir / "sweep.csv", "w", newline="") as fh, \
            open(out_dir / "sweep_failures.csv", "w", newline="") as fail_fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        fw = csv.DictWriter(fail_fh, fieldnames=FAIL_COLUMNS)
        w.writeheader()
        fw.writeheader()
        try:
            for k, (p, rows, err) in enumerate(outcomes, 1):
                head = f"[sweep {k}/{len(points)} {time.perf_counter() - t0:6.1f}s] {p.label()}"
                if rows is None:
                    fail = {"index": p.index, "policy": p.policy, "parameter": p.parameter,
                            "value": p.value, "replication": p.replication, "error": err}
                    result.failures.append(fail)
                    fw.writerow(fail)
                    fail_fh.flush()
                    say(f"{head}: FAILED: {err}")
                    continue
                result.rows.extend(rows)
                w.writerows(rows)
                fh.flush()
                ws = ", ".join(f"W {r['cls']} {float(r['W']):.3f}" for r in rows)
                say(f"{head}: {ws}")
        except KeyboardInterrupt:
            say("[sweep] interrupted: keeping the finished points")
    if not result.failures:
        (out_dir / "sweep_failures.csv").unlink()
    if figure and result.rows:
        try:
            result.figure = draw(scenario, aggregate(result.rows), out_dir / "sweep.png",
                                 exact_curves(scenario, points),
                                 "live" if engine == "emulate" else "sim")
            say(f"[sweep] figure: {result.figure}")
        except Exception as err:  # noqa: BLE001 - the numbers are kept even if plotting fails
            say(f"[sweep] could not draw the figure: {_error(err)}")
            traceback.print_exc()
    say(f"[sweep] {len(result.rows) // len(CLASSES)} of {len(points)} points done, "
        f"{len(result.failures)} failed, {time.perf_counter() - t0:.1f} s; {result.csv}")
    return result


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, value, class): mean W with a 95 % interval across replications (the
    batch-means interval of the single run when there is one), blocking and outage."""
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["policy"], float(r["value"]), r["cls"]), []).append(r)
    out = []
    for (policy, value, cls), rs in sorted(groups.items()):
        ws = [float(r["W"]) for r in rs]
        if len(rs) > 1:
            ci = replications_ci(ws)
            w, half = ci.mean, ci.half_width
        else:
            w, half = ws[0], float(rs[0]["W_ci95"])
        out.append({
            "policy": policy, "value": value, "cls": cls, "n": len(rs), "W": w, "W_ci95": half,
            "blocking": sum(float(r["blocking"]) for r in rs) / len(rs),
            "outage": sum(float(r["outage"]) for r in rs) / len(rs),
            "lost_prob": sum(float(r["lost_prob"]) for r in rs) / len(rs),
        })
    return out


Curves = dict[tuple[str, str], list[tuple[float, float, float]]]


def exact_curves(scenario: Scenario, points: Sequence[Point]) -> Curves:
    """(policy, class) -> [(value, exact W, exact outage)] at the swept values, for every
    policy the exact chain can take (the built-in schemes, and any state-based policy
    through the chain built from the policy object); nothing for points outside it."""
    from analysis.model_params import OutsideModel, exact_prediction

    out: Curves = {}
    seen: set[tuple[str, float]] = set()
    for p in points:
        if (p.policy, p.value) in seen:
            continue
        seen.add((p.policy, p.value))
        try:
            pred = exact_prediction(p.scenario)
            exact = {cls: (float(pred.cls(cls).W), float(pred.cls(cls).outage))
                     for cls in CLASSES}
        except OutsideModel:
            continue
        for cls, (w, outage) in exact.items():
            if math.isfinite(w):
                out.setdefault((p.policy, cls), []).append((p.value, w, outage))
    return {k: sorted(v) for k, v in out.items()}


def draw(scenario: Scenario, agg: Sequence[dict[str, Any]], path: Path,
         exact: Curves | None = None, measured_label: str = "sim") -> Path:
    """Mean W (95 % interval) per policy and class vs the swept value, and the outage
    probability beside it; exact curves (dashed HP, dotted LP) where the model applies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert scenario.sweep is not None
    fig, (ax_w, ax_o) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    policies = sorted({a["policy"] for a in agg})
    style = {"hp": ("o", "--"), "lp": ("s", ":")}  # marker (simulated), line (exact)
    for i, policy in enumerate(policies):
        col = colors[i % len(colors)]
        for cls in CLASSES:
            pts = [a for a in agg if a["policy"] == policy and a["cls"] == cls]
            if not pts:
                continue
            x = [a["value"] for a in pts]
            marker, line = style[cls]
            yerr = [a["W_ci95"] if math.isfinite(a["W_ci95"]) else 0.0 for a in pts]
            ax_w.errorbar(x, [a["W"] for a in pts], yerr=yerr, fmt=marker + "-", color=col,
                          capsize=3, lw=0.8, label=f"{policy} {cls.upper()} ({measured_label})")
            ax_o.plot(x, [a["outage"] for a in pts], marker + "-", color=col, lw=0.8,
                      label=f"{policy} {cls.upper()} ({measured_label})")
            if exact and (policy, cls) in exact:
                ex = exact[(policy, cls)]
                ax_w.plot([e[0] for e in ex], [e[1] for e in ex], line, color=col, lw=1.5,
                          label=f"{policy} {cls.upper()} (exact)")
                ax_o.plot([e[0] for e in ex], [e[2] for e in ex], line, color=col, lw=1.5,
                          label=f"{policy} {cls.upper()} (exact)")
    ax_w.set_xlabel(scenario.sweep.parameter)
    ax_w.set_ylabel("mean response W (model ms)")
    ax_w.set_title(f"{scenario.name}: W with 95 % CI")
    ax_w.legend(fontsize=7)
    ax_o.set_xlabel(scenario.sweep.parameter)
    ax_o.set_ylabel(f"outage P(not answered within {scenario.deadline_ms:g} ms)")
    ax_o.set_title("outage")
    ax_o.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a scenario's sweep and draw its figure.")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--engine", choices=["simulate", "emulate"], default="simulate")
    ap.add_argument("--executor", choices=["process", "ray", "serial"], default="process")
    ap.add_argument("--ray-address", help="join this Ray cluster instead of a local one")
    ap.add_argument("--workers", type=int, help="parallel points (default: CPUs)")
    ap.add_argument("--requests", type=int, help="simulate: requests per point")
    add_span_arguments(ap, per=" per point")
    ap.add_argument("--time-scale", type=float,
                    help="emulate: real ms per model ms for every point (default: the "
                         "scenario's)")
    ap.add_argument("--no-trace", action="store_true", help="keep summaries, not traces")
    ap.add_argument("--out", help="results directory (default results/<time>-<scenario>-sweep)")
    ap.add_argument("--policy-module", metavar="FILE_OR_MODULE",
                    help="your policy: a .py file or an importable module (every worker, "
                         "Ray ones included, loads it)")
    a = ap.parse_args(argv)
    from topologies.city_net import is_city_study

    if is_city_study(a.scenario):  # seed 003's study: its sweep is its ratios x selectors
        from runner.city_cli import run_city_study

        return run_city_study(argparse.Namespace(scenario=a.scenario, engine=a.engine,
                                                 duration=a.duration, out=a.out, quiet=False),
                              Path(__file__).resolve().parent.parent)
    from controller.policies import PolicyError
    from controller.policies.resolve import resolve_scenario

    try:
        sc = resolve_scenario(a.scenario, policy_module=a.policy_module)
    except (ScenarioError, PolicyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.engine == "emulate":
        if os.geteuid() != 0:
            print("error: --engine emulate needs root (Mininet, Open vSwitch): use sudo",
                  file=sys.stderr)
            return 2
        def _term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt  # the live run tears down; the sweep keeps its points

        signal.signal(signal.SIGTERM, _term)
    try:
        duration_ms = span_ms(a, a.time_scale or sc.time_scale)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else Path("results") / f"{stamp}-{sc.name}-sweep"
    try:
        res = run_sweep(sc, out, engine=a.engine, executor=a.executor, workers=a.workers,
                        ray_address=a.ray_address, requests=a.requests, duration_ms=duration_ms,
                        trace=not a.no_trace, time_scale=a.time_scale)
    except (SweepError, ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 1 if res.failures else 0


__all__ = ["Point", "SweepError", "SweepResult", "aggregate", "draw", "exact_curves",
           "main", "plan", "run_point", "run_sweep"]
