"""The main command (`fogsdn-run` when installed): run one scenario live (emulate) or
simulated, or clean up.

Module-level imports are the standard library only, so that `scripts/run_testbed.py`
can parse the arguments before it has set up the environment.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fogsdn.core.scenario import Scenario

DECIDE_TIMING_LIMIT_S = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from fogsdn.controller.rt_measure import RT_SAMPLE_DEFAULT
    from fogsdn.core.cli_args import add_view_arguments

    ap = argparse.ArgumentParser(description="Run a fogsdn scenario.")
    root = Path(__file__).resolve().parents[2]  # a checkout; installed: pass --scenario
    ap.add_argument("--scenario", default=str(root / "scenarios" / "default.yaml"))
    ap.add_argument("--engine", choices=["emulate", "simulate"], default="emulate")
    ap.add_argument("--policy", help="override policy.name (prioritized, nodiff, basic, ...)")
    ap.add_argument("--policy-module", metavar="FILE_OR_MODULE",
                    help="your policy: a .py file or an importable module (overrides "
                         "policy.module); its one policy runs unless --policy names one")
    ap.add_argument("--duration", type=float, metavar="SECONDS",
                    help="seconds of live load; the scenario time it spans (SECONDS * 1000 / "
                         "time_scale model ms) is the same in every engine")
    ap.add_argument("--requests", type=int, help="simulate: stop after N requests in total")
    ap.add_argument("--out", help="results directory (default results/<time>-<scenario>)")
    ap.add_argument("--clean", action="store_true",
                    help="remove what crashed runs left behind, then exit")
    ap.add_argument("--stop-ovs", action="store_true",
                    help="with --clean: also stop the Open vSwitch daemons fogsdn started "
                         "(never ones it found running)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--no-measure-rt", action="store_true",
                    help="emulate: the controller does not time connections (no SYN/FIN "
                         "copies to it, no rt_measurement_error; docs/learning.md)")
    ap.add_argument("--rt-sample", type=int, default=RT_SAMPLE_DEFAULT, metavar="N",
                    help="emulate: the controller times one connection in N (a power of "
                         f"two, by client port; default {RT_SAMPLE_DEFAULT}: timing every "
                         "one costs the FN a few %% of its service rate; a policy that "
                         "learns from the measurement, path_rnn, gets every one)")
    ap.add_argument("--cluster", metavar="SERVERS_YAML",
                    help="emulate: run the network on these servers over ssh, the runner and "
                         "controller here (docs/scale-out.md)")
    add_view_arguments(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None,
         stop_ovs: Callable[[], object] | None = None) -> int:
    """Run one scenario; `stop_ovs` stops the Open vSwitch daemons fogsdn started (the
    set-up that started them provides it: scripts/run_testbed.py)."""
    args = parse_args(argv)
    import os
    import time

    from fogsdn.core.cli_args import ArgumentError, duration_span_ms, require_count
    from fogsdn.core.processes import STOP_REQUESTED, stop_signals_as_exceptions
    from fogsdn.core.scenario import ScenarioError, load_scenario
    from fogsdn.policies import PolicyError
    from fogsdn.policies.resolve import resolve_scenario

    checkout = Path(__file__).resolve().parents[2]
    root = checkout if (checkout / "scenarios").is_dir() else Path.cwd()
    if STOP_REQUESTED.is_set():  # a signal during the imports or the set-up
        return _interrupted_before_start()
    if args.clean:
        from fogsdn.live.cleanup import clean_all

        removed = clean_all()
        print("removed: " + (", ".join(removed) if removed else "nothing (no leftovers)"))
        if args.stop_ovs:
            if stop_ovs is None:
                print("error: --stop-ovs: run scripts/run_testbed.py, whose set-up started "
                      "them", file=sys.stderr)
                return 2
            stop_ovs()
        return 0
    from fogsdn.cli.study_command import declared_study

    if args.cluster is not None and args.engine != "emulate":
        print("error: --cluster: a live run only (--engine emulate)", file=sys.stderr)
        return 2
    if declared_study(args.scenario) == "city":  # a study of many runs: the study driver's
        from fogsdn.cli.study_command import main as run_study_file

        if args.engine == "simulate":
            stop_signals_as_exceptions()  # its points stop by KeyboardInterrupt (entry's net)
        out = args.out or str(root / "results" / time.strftime("%Y%m%d-%H%M%S-city"))
        view = [] if args.view is None else ["--view", str(args.view), "--view-host",
                                             args.view_host]
        return run_study_file(["--scenario", args.scenario, "--engine", args.engine, "--out",
                               out, *(["--duration", str(args.duration)] if args.duration else []),
                               *view, *(["--cluster", args.cluster] if args.cluster else [])])
    try:
        overrides: dict[str, object] = {}
        if args.duration is not None:
            base = load_scenario(args.scenario)
            span_ms = duration_span_ms(args.duration, base.time_scale)
            overrides["duration_ms"] = span_ms
            if base.warmup_ms >= span_ms:  # a short run keeps everything it measures
                overrides["warmup_ms"] = 0.0
        sc = resolve_scenario(args.scenario, args.policy, overrides, args.policy_module)
        require_count("--requests", args.requests)
    except (ScenarioError, PolicyError, ArgumentError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cluster = None
    if args.cluster is not None:
        from fogsdn.netem.cluster_plan import ClusterError, load_cluster

        try:
            cluster = load_cluster(args.cluster)
        except ClusterError as err:
            print(f"error: --cluster: {err}", file=sys.stderr)
            return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else root / "results" / f"{stamp}-{sc.name}"

    if args.engine == "simulate":
        from fogsdn.core.summary import json_object
        from fogsdn.sim.runner import run_simulation

        rate = sc.workload.lambda_hp + sc.workload.lambda_lp
        if args.requests is not None and rate > 0 and args.requests / rate <= sc.warmup_ms:
            print(f"error: --requests {args.requests}: they are all sent within about "
                  f"{args.requests / rate:.3g} model ms, inside warmup_ms ({sc.warmup_ms:g}), "
                  "which is not measured; ask for more requests or a smaller warmup_ms",
                  file=sys.stderr)
            return 2
        try:
            stop_signals_as_exceptions()
            done = run_simulation(sc, out, requests=args.requests, verbose=True)
        except KeyboardInterrupt:
            print("\n[run] interrupted: the simulation stopped", file=sys.stderr)
            return 130
        except ScenarioError as err:
            print(f"error: {args.scenario}: {err}", file=sys.stderr)
            return 2
        print(f"results: {out}")
        measured = json_object(done.get("measured") or {}, "measured")
        if not any(json_object(measured.get(c) or {}, f"measured.{c}").get("count")
                   for c in ("hp", "lp")):
            print(f"error: no request was measured (all inside warmup_ms = {sc.warmup_ms:g} "
                  "model ms): the table above has no figures", file=sys.stderr)
            return 2
        return 0

    if args.rt_sample < 1 or args.rt_sample & (args.rt_sample - 1):
        print(f"error: --rt-sample: a power of two >= 1, got {args.rt_sample}", file=sys.stderr)
        return 2
    if args.view is not None and not 0 <= args.view < 65536:
        print(f"error: --view: a port 0-65535, got {args.view}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: the emulate engine needs root (Mininet, Open vSwitch): use sudo",
              file=sys.stderr)
        return 2
    from fogsdn.live.live_network import EmulationError
    from fogsdn.live.live_view import view_config
    from fogsdn.live.queueing_run import LiveOptions, run_emulation
    from fogsdn.live.supervisor import exit_code, stop_on_signals

    stop = STOP_REQUESTED  # set already if a signal came during the imports above
    stop_on_signals(stop)
    if stop.is_set():
        return _interrupted_before_start()
    slow = slow_decision_note(sc)
    if slow is not None:
        print(f"[run] note: {slow}", flush=True)
    try:
        options = LiveOptions(measure_rt=0 if args.no_measure_rt else args.rt_sample)
        summary = run_emulation(sc, out, stop, show_progress=not args.quiet, options=options,
                                view=view_config(args), cluster=cluster)
    except ScenarioError as err:  # live limits, checked before anything starts
        print(f"error: {args.scenario}: {err}", file=sys.stderr)
        return 2
    except EmulationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return exit_code(summary)


def slow_decision_note(sc: Scenario) -> str | None:
    """For a per-request policy, whether its `decide` alone is over the decision budget
    at the run's time scale (timed on generated views, as the policy checker does); a
    policy that fails here is left to the run, which reports its failures."""
    import random
    import signal

    from fogsdn.policies import is_per_request, make_policy
    from fogsdn.policies.check import decide_over_budget, time_decide

    class TimingOver(BaseException):
        """Not an Exception: the timing loop skips user errors on generated views, and a
        TimeoutError there would be skipped too, leaving a looping decide to loop."""

    def too_long(signum: int, frame: object) -> None:
        raise TimingOver

    was = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, DECIDE_TIMING_LIMIT_S)
    try:
        policy = make_policy(sc.policy, sc.workload)
        if not is_per_request(policy):
            return None
        return decide_over_budget(sc, time_decide(policy, sc, 300, random.Random(sc.seed))[1])
    except TimingOver:
        return (f"the policy's decide did not finish 300 calls on generated views within "
                f"{DECIDE_TIMING_LIMIT_S:g} s: the live controller holds each new connection "
                "for it")
    except (Exception, SystemExit):  # noqa: BLE001 (user code: the run says how it fails)
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, was)


def _interrupted_before_start() -> int:
    print("\n[run] interrupted during start-up; nothing was running", file=sys.stderr)
    return 130


def entry() -> None:
    """`fogsdn-run`."""
    from fogsdn.core.processes import catch_stop_signals

    catch_stop_signals()  # first, as in scripts/run_testbed.py
    sys.exit(run_caught(main))


def run_caught(command: Callable[[], int]) -> int:
    """`command()`, with the one KeyboardInterrupt that can still escape (a simulation's,
    once Python's own handling is back) as exit 130 and one line, not a traceback."""
    try:
        return command()
    except KeyboardInterrupt:
        print("\n[run] interrupted", file=sys.stderr)
        return 130
