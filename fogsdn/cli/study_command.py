"""The study command (`scripts/sweep.py`): builds the plug-in a file's `study:` names and
runs it with `fogsdn.studies.study`; kept apart from the framework, which imports no plug-in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from fogsdn.studies.study import Row, RowT, Study, StudyError, run_study

# -- the files and the command ------------------------------------------------------------


def declared_study(path: str | Path) -> str | None:
    """The study a file declares: `city` (`study: city` at its top), `size_based` or
    `sweep` (a scenario's sweep, by its `study:`); None for anything else (a scenario
    without a sweep, or a file the scenario loader will report)."""
    from fogsdn.core.scenario_yaml import YamlFileError, read_yaml_file

    try:
        data = read_yaml_file(path)
    except YamlFileError:  # the scenario loader says what is wrong with it
        return None
    sweep = data.get("sweep") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("study") is not None:
        return str(data["study"])
    return str(sweep.get("study", "sweep")) if isinstance(sweep, dict) else None


def _key_value(pair: str) -> tuple[str, object]:
    import yaml

    key, eq, value = pair.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {pair!r}")
    return key, yaml.safe_load(value)


def _city_study(a: argparse.Namespace, over: dict[str, object], out: Path) -> Study[Row]:
    """Seed 003's city study file in either engine; Ctrl-C or SIGTERM ends a live one
    after the point it is in (`fogsdn.city.live_run` keeps what it measured)."""
    import threading

    from fogsdn.city.study_run import CityStudyRun
    from fogsdn.city.study_spec import load_city_study

    if a.duration is not None:  # live seconds: duration / time_scale model s everywhere
        over["duration_live_s"] = a.duration
        if a.engine == "simulate" and not a.live_scale:
            over["full_scale.duration_model_s"] = \
                a.duration / load_city_study(a.scenario, over).time_scale
    from fogsdn.core.processes import STOP_REQUESTED

    # the process's flag: set already if scripts/run_testbed.py noted a signal earlier
    stop = STOP_REQUESTED if a.engine == "emulate" else threading.Event()
    if a.engine == "emulate":
        from fogsdn.live.supervisor import stop_on_signals

        stop_on_signals(stop)
    from fogsdn.live.live_view import view_config

    study = load_city_study(a.scenario, over)
    if a.engine == "emulate":
        study.check_live_span()
        study.check_live_choices()
    cluster = None
    if a.cluster is not None:
        from fogsdn.netem.cluster_plan import load_cluster

        if a.engine != "emulate":
            raise StudyError("--cluster: the live study only (--engine emulate)")
        cluster = load_cluster(a.cluster)
    return CityStudyRun(study, out, a.engine, a.live_scale, stop,
                        view_config(a) if a.engine == "emulate" else None, cluster)


def _run(study: Study[RowT], out: Path, a: argparse.Namespace) -> tuple[bool, Path | None]:
    """Run `study` on the executor asked for: whether a point failed, and the summary.json
    of a study run live as one supervised run (None: each point has its own)."""
    res = run_study(study, out, executor=a.executor, workers=a.workers,
                    ray_address=a.ray_address)
    return bool(res.failures), study.live_summary


def main(argv: list[str] | None = None) -> int:
    """`scripts/sweep.py`: run the study a file declares and draw its figures."""

    from fogsdn.city.layout import LayoutError
    from fogsdn.city.study_spec import CityStudyError
    from fogsdn.core.cli_args import ArgumentError, add_span_arguments, add_view_arguments, span_ms
    from fogsdn.core.scenario import ScenarioError
    from fogsdn.netem.cluster_plan import ClusterError
    from fogsdn.policies import PolicyError
    from fogsdn.policies.resolve import resolve_scenario

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
    ap.add_argument("--optimum", action="store_true",
                    help="sweep: add the optimal curve (min all.W, hp.W <= the proposed "
                         "scheme's; docs/reproduction.md)")
    ap.add_argument("--cluster", metavar="SERVERS_YAML",
                    help="city, emulate: the network over these servers (docs/scale-out.md)")
    add_view_arguments(ap)  # city, emulate: the live map (docs/view.md)
    a = ap.parse_args(argv)
    if a.engine == "emulate" and os.geteuid() != 0:
        print("error: --engine emulate needs root (Mininet, Open vSwitch): use sudo",
              file=sys.stderr)
        return 2
    kind = declared_study(a.scenario)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else Path("results") / f"{stamp}-{Path(a.scenario).stem}-{kind}"
    if a.cluster is not None and kind != "city":
        print("error: --cluster: one run (scripts/run_testbed.py) or the city study; a "
              "sweep's live points each run on one machine (--executor ray spreads them)",
              file=sys.stderr)
        return 2
    try:
        if kind == "city":
            failed, live_summary = _run(_city_study(a, dict(a.set), out), out, a)
        else:
            sc = resolve_scenario(a.scenario, policy_module=a.policy_module)
            sc = sc.with_overrides(dict(a.set)) if a.set else sc
            duration_ms = span_ms(a, a.time_scale or sc.time_scale)
            if kind == "size_based":
                from fogsdn.studies.size_study import SizeStudy

                failed, live_summary = _run(
                    SizeStudy(sc, out, a.requests or 100_000, a.replications, a.plot_only,
                              a.engine, duration_ms, a.time_scale), out, a)
            else:
                from fogsdn.studies.sweep import SweepStudy

                failed, live_summary = _run(
                    SweepStudy(sc, out, a.engine, a.requests, duration_ms, not a.no_trace,
                               time_scale=a.time_scale, optimum=a.optimum), out, a)
    except (StudyError, ScenarioError, PolicyError, ArgumentError, CityStudyError,
            LayoutError, ClusterError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if live_summary is not None and live_summary.exists():
        from fogsdn.live.supervisor import exit_code

        code = exit_code(json.loads(live_summary.read_text()))
        if code:
            return code
    return 1 if failed else 0
