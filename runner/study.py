"""One driver for every study: a study is a plug-in (its points, one point run in an
engine giving rows, what it keeps as points finish, its tables and figures), and this
module runs any of them on one executor with one progress line per point.

Points are independent runs, so they fan out: a local process pool by default, or Ray
tasks (a private local Ray, or an existing cluster given its address). A failed point
is reported with its label and the others go on; Ctrl-C keeps the finished points.
Live points run one at a time here, or on Ray one per emulation node at a time.

The studies: a scenario's sweep (`runner.sweep`, seed 000's figures), seed 002b's
size-based figures (`runner.size_study`, a sweep with `study: size_based`) and seed
003's city (`runner.city_study`, a file with `study: city`). `declared_study` reads a file
once and picks the study it declares.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

Engine = Literal["simulate", "emulate"]
Executor = Literal["process", "ray", "serial"]
Row = dict[str, Any]


class StudyError(RuntimeError):
    """A study that cannot run at all (as opposed to one failed point)."""


class Study(Protocol):
    """A study: `plan` gives its points (each with a `label()`); `job(point, *job_args)`,
    a module-level function (sent to worker processes and Ray tasks), runs one in
    `engine` and gives its rows; `record` keeps a finished point's rows and says what it
    found; `finish` writes the tables and figures from the rows and the failed points'
    errors."""

    name: str
    engine: Engine
    job: Callable[..., list[Row]]
    job_args: tuple[Any, ...]
    # a study run live as one supervised run (the city) writes its summary.json here;
    # its verdict (3 crashed, 130 interrupted) is the command's exit status
    live_summary: Path | None

    def plan(self) -> Sequence[Any]: ...

    def record(self, point: Any, rows: list[Row]) -> str: ...

    def finish(self, rows: list[Row], failures: list[tuple[Any, str]]) -> list[Path]: ...


@dataclass
class StudyResult:
    rows: list[Row] = field(default_factory=list)
    failures: list[tuple[Any, str]] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)


# -- executors -------------------------------------------------------------------------

Outcome = tuple[Any, list[Row] | None, str | None]


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".replace("\n", " ")[:500]


def _serial(points: Sequence[Any], job: Callable[..., list[Row]], args: tuple[Any, ...]
            ) -> Iterator[Outcome]:
    for p in points:
        try:
            yield p, job(p, *args), None
        except Exception as err:  # noqa: BLE001 - report the point, keep the others
            yield p, None, error_text(err)


def _process(points: Sequence[Any], workers: int, job: Callable[..., list[Row]],
             args: tuple[Any, ...]) -> Iterator[Outcome]:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[list[Row]], Any] = {pool.submit(job, p, *args): p for p in points}
        for fut in as_completed(futures):
            p = futures[fut]
            try:
                yield p, fut.result(), None
            except Exception as err:  # noqa: BLE001
                yield p, None, error_text(err)


RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# A Ray node that can emulate offers one unit of this resource (`ray start --resources
# '{"fogsdn_emulation": 1}'`, as root, with Open vSwitch); a live point takes the unit,
# so each node runs one emulation at a time while the nodes run theirs in parallel.
EMULATION_RESOURCE = "fogsdn_emulation"


def _ray(points: Sequence[Any], workers: int, address: str | None,
         job: Callable[..., list[Row]], args: tuple[Any, ...],
         options: dict[str, Any], local_resources: dict[str, float] | None = None,
         need: str | None = None) -> Iterator[Outcome]:
    """Ray tasks `job(point, *args)`: on a private local Ray (started and shut down here)
    or, with an address, on an existing cluster. Never `ray stop`: it kills by name
    machine-wide. `need`: a custom resource some node must offer, or a one-line error."""
    try:
        import ray
    except ImportError:
        raise StudyError(
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
            raise StudyError(
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
                    yield p, None, error_text(cause)
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


def execute(points: Sequence[Any], job: Callable[..., list[Row]], args: tuple[Any, ...], *,
            live: bool = False, executor: Executor = "process", workers: int | None = None,
            ray_address: str | None = None) -> tuple[Iterator[Outcome], str]:
    """The outcomes of `job(point, *args)` for every point as they finish, and how they
    run (for the progress line)."""
    workers = workers or min(len(points), os.cpu_count() or 1) or 1
    if live and executor == "ray":
        return (_ray(points, workers, ray_address, job, args,
                     {"num_cpus": 1, "resources": {EMULATION_RESOURCE: 1}},
                     local_resources={EMULATION_RESOURCE: 1}, need=EMULATION_RESOURCE),
                f"live on Ray ({ray_address or 'local'}), one emulation per node at a time")
    if live:
        return _serial(points, job, args), "live, one point at a time"
    if executor == "ray":
        return (_ray(points, workers, ray_address, job, args, {"num_cpus": 1}),
                f"Ray ({ray_address or f'local, {workers} CPUs'})")
    if executor == "serial" or workers == 1:
        return _serial(points, job, args), "in this process"
    return _process(points, workers, job, args), f"process pool of {workers}"


# -- the driver -------------------------------------------------------------------------


def run_study(study: Study, out_dir: Path, *, executor: Executor = "process",
              workers: int | None = None, ray_address: str | None = None,
              log: Callable[[str], None] | None = None) -> StudyResult:
    """Run every point of `study` (`out_dir` is where it said it writes), then its
    tables and figures."""
    say = log or (lambda s: print(s, file=sys.stderr, flush=True))
    points = study.plan()
    outcomes, how = execute(points, study.job, study.job_args, live=study.engine == "emulate",
                            executor=executor, workers=workers, ray_address=ray_address)
    say(f"[{study.name}] {len(points)} points ({study.engine}, {how}) -> {out_dir}")
    result = StudyResult()
    t0 = time.perf_counter()
    done = 0
    try:
        for k, (p, rows, err) in enumerate(outcomes, 1):
            head = f"[{study.name} {k}/{len(points)} {time.perf_counter() - t0:6.1f}s] {p.label()}"
            if rows is None:
                assert err is not None
                result.failures.append((p, err))
                say(f"{head}: FAILED: {err}")
                continue
            result.rows.extend(rows)
            done += 1
            say(f"{head}: {study.record(p, rows)}")
    except KeyboardInterrupt:
        say(f"[{study.name}] interrupted: keeping the finished points")
    try:
        result.outputs = study.finish(result.rows, result.failures)
    except Exception as err:  # noqa: BLE001 - the numbers are kept even if plotting fails
        say(f"[{study.name}] could not draw the figures: {error_text(err)}")
        traceback.print_exc()
    for path in result.outputs:
        say(f"[{study.name}] wrote {path}")
    say(f"[{study.name}] {done} of {len(points)} points done, {len(result.failures)} "
        f"failed, {time.perf_counter() - t0:.1f} s")
    return result


# -- the files and the command ------------------------------------------------------------


def declared_study(path: str | Path) -> str | None:
    """The study a file declares: `city` (`study: city` at its top), `size_based` or
    `sweep` (a scenario's sweep, by its `study:`); None for anything else (a scenario
    without a sweep, or a file the scenario loader will report)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None
    sweep = data.get("sweep") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("study") is not None:
        return str(data["study"])
    return str(sweep.get("study", "sweep")) if isinstance(sweep, dict) else None


def _key_value(pair: str) -> tuple[str, Any]:
    import yaml

    key, eq, value = pair.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {pair!r}")
    return key, yaml.safe_load(value)


def _city_study(a: argparse.Namespace, over: dict[str, Any], out: Path) -> Study:
    """Seed 003's city study file in either engine; Ctrl-C or SIGTERM ends a live one
    after the point it is in (`runner.city_live` keeps what it measured)."""
    import threading

    from runner.city_study import CityStudyRun
    from topologies.city_net import load_city_study

    if a.duration is not None:
        full = a.engine == "simulate" and not a.live_scale
        over["full_scale.duration_s" if full else "duration_s"] = a.duration
    stop = threading.Event()
    if a.engine == "emulate":
        from runner.supervisor import stop_on_signals

        stop_on_signals(stop)
    return CityStudyRun(load_city_study(a.scenario, over), out, a.engine, a.live_scale, stop)


def main(argv: list[str] | None = None) -> int:
    """`scripts/sweep.py`: run the study a file declares and draw its figures."""
    import signal

    from controller.policies import PolicyError
    from controller.policies.resolve import resolve_scenario
    from fogsdn.cli_args import ArgumentError, add_span_arguments, span_ms
    from fogsdn.scenario import ScenarioError
    from topologies.city_layout import LayoutError
    from topologies.city_net import CityStudyError

    ap = argparse.ArgumentParser(description="Run a study (a scenario's sweep, seed002b_*.yaml, "
                                 "city.yaml) and draw its figures.")
    ap.add_argument("--scenario", required=True, help="a scenario with a sweep, or a study file")
    ap.add_argument("--engine", choices=["simulate", "emulate"], default="simulate")
    ap.add_argument("--executor", choices=["process", "ray", "serial"], default="process")
    ap.add_argument("--ray-address", help="join this Ray cluster instead of a local one")
    ap.add_argument("--workers", type=int, help="parallel points (default: CPUs)")
    ap.add_argument("--requests", type=int, help="simulate: requests per point or replication")
    ap.add_argument("--replications", type=int, help="size_based: per point (default: sweep's)")
    add_span_arguments(ap, per=" per point")
    ap.add_argument("--time-scale", type=float, help="emulate: real ms per model ms")
    ap.add_argument("--no-trace", action="store_true", help="keep summaries, not traces")
    ap.add_argument("--out", help="results directory (default results/<time>-<file>-<study>)")
    ap.add_argument("--policy-module", metavar="FILE_OR_MODULE",
                    help="your policy, a .py file or a module (every worker loads it)")
    ap.add_argument("--set", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                    help="override a field (dotted path, YAML value): full_scale.ratios=[0.5]")
    ap.add_argument("--live-scale", action="store_true", help="city, simulate: its live scale")
    ap.add_argument("--plot-only", action="store_true", help="size_based: redraw from --out")
    a = ap.parse_args(argv)
    if a.engine == "emulate" and os.geteuid() != 0:
        print("error: --engine emulate needs root (Mininet, Open vSwitch): use sudo",
              file=sys.stderr)
        return 2
    kind = declared_study(a.scenario)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else Path("results") / f"{stamp}-{Path(a.scenario).stem}-{kind}"
    study: Study
    try:
        if kind == "city":
            study = _city_study(a, dict(a.set), out)
        else:
            sc = resolve_scenario(a.scenario, policy_module=a.policy_module)
            sc = sc.with_overrides(dict(a.set)) if a.set else sc
            duration_ms = span_ms(a, a.time_scale or sc.time_scale)
            if kind == "size_based":
                from runner.size_study import SizeStudy

                study = SizeStudy(sc, out, a.requests or 100_000, a.replications,
                                  a.plot_only, a.engine, duration_ms, a.time_scale)
            else:
                from runner.sweep import SweepStudy

                study = SweepStudy(sc, out, a.engine, a.requests, duration_ms, not a.no_trace,
                                   time_scale=a.time_scale)
            if a.engine == "emulate":
                def _term(signum: int, frame: object) -> None:
                    raise KeyboardInterrupt  # the live run tears down; the points are kept

                signal.signal(signal.SIGTERM, _term)
        res = run_study(study, out, executor=a.executor, workers=a.workers,
                        ray_address=a.ray_address)
    except (StudyError, ScenarioError, PolicyError, ArgumentError, CityStudyError,
            LayoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if study.live_summary is not None and study.live_summary.exists():
        from runner.supervisor import exit_code

        code = exit_code(json.loads(study.live_summary.read_text()))
        if code:
            return code
    return 1 if res.failures else 0
