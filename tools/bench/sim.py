#!/usr/bin/env python3
"""Simulator speed: requests per second of fogsdn.sim.engine beside the same model in SimPy.

In CPU seconds, best of R interleaved runs, for the default scenario and a large one;
then the peak memory of a run over 40 OFNs (docs/benchmarks.md; figures in
docs/simulator.md).

    python scripts/bench_sim.py [--requests N] [--repeat R] [--ofn-requests N] [--big]
                                [--big-requests N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fogsdn.core.scenario import Scenario, load_scenario
from fogsdn.measure.metrics import MeasuredAccumulator
from fogsdn.sim.engine import simulate
from fogsdn.sim.output import TraceCsvSink
from fogsdn.sim.rows import Row
from fogsdn.sim.runner import run_simulation
from tools.bench.common import ROOT, script


def _drop(rows: list[Row]) -> None:
    """A sink that keeps nothing: times the engine alone."""


def large_scenario(base: Scenario) -> Scenario:
    return base.with_overrides({"name": "large", "workload.lambda_hp": 0.45,
                                "workload.lambda_lp": 0.5, "nodes.fn.capacity": 1000,
                                "nodes.ofn1.capacity": 100})


def rate(requests: int, seconds: float) -> str:
    return f"{requests / seconds:>12,.0f} req/s ({seconds:6.2f} s)"


def _timed(run: Callable[..., Any], sc: Scenario, n: int, tmp: Path | None,
           name: str) -> float:
    """CPU seconds for `run` over n requests: rows dropped, or through the trace sink."""
    t0 = time.process_time()
    if tmp is None:
        run(sc, _drop, requests=n)
    else:
        with TraceCsvSink(tmp / f"{name}.csv", sc,
                          MeasuredAccumulator(sc.warmup_ms, sc.deadline_ms)) as sink:
            run(sc, sink, requests=n)
    return time.process_time() - t0


def best_of(repeat: int, *runs: Callable[[], float]) -> list[float]:
    """The least time of each run over `repeat` rounds, the runs interleaved in each
    round so that a burst of load elsewhere hits all of them alike."""
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, run in enumerate(runs):
            best[i] = min(best[i], run())
    return best


def time_engine(sc: Scenario, n: int, tmp: Path | None) -> float:
    return _timed(simulate, sc, n, tmp, "engine")


def time_simpy(sc: Scenario, n: int, tmp: Path | None) -> float:
    from tools.rigs.simpy_ref import simulate_simpy

    return _timed(simulate_simpy, sc, n, tmp, "simpy")


def child(scenario: str, n: int, out: str) -> None:
    """--_child: one run_simulation, then its figures as JSON on stdout."""
    sc = load_scenario(scenario)
    t0, c0 = time.perf_counter(), time.process_time()
    s = run_simulation(sc, Path(out), requests=n, compare=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    # VmHWM: ru_maxrss would keep the forking parent's peak across exec
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    trace_mb = (Path(out) / "trace.csv").stat().st_size / 1e6
    print(json.dumps({"requests": s["requests"], "rows": s["rows"], "wall_s": wall,
                      "cpu_s": cpu, "engine_wall_s": s["wall_s"],
                      "maxrss_mb": int(hwm.split()[1]) / 1024, "trace_mb": trace_mb}))


def run_child(scenario: str, n: int, out: Path) -> dict[str, Any]:
    """`child` in a fresh interpreter: its own peak memory."""
    done = subprocess.run([sys.executable, str(script("bench_sim.py")), "--_child",
                           scenario, str(n), str(out)],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios/default.yaml"))
    ap.add_argument("--requests", type=int, default=500_000)
    ap.add_argument("--simpy-requests", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    ap.add_argument("--ofn-requests", type=int, default=100_000,
                    help="requests of the 40-OFN run (scenarios/many_ofns.yaml); 0: none")
    ap.add_argument("--big", action="store_true", help="also a 10M-request run: peak memory")
    ap.add_argument("--big-requests", type=int, default=10_000_000)
    ap.add_argument("--_child", nargs=3, metavar=("SCENARIO", "N", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._child:
        child(a._child[0], int(a._child[1]), a._child[2])
        return 0
    sc = load_scenario(a.scenario)
    n, ns = a.requests, a.simpy_requests
    tmp = Path(tempfile.mkdtemp(prefix="bench-sim-"))
    try:
        print(f"scenario {sc.name} ({sc.policy.name}, churn {sc.churn.leave}); "
              f"engine {n:,} requests, SimPy {ns:,}; best of {a.repeat}, CPU seconds")

        def run_sim() -> float:
            t0 = time.process_time()
            run_simulation(sc, tmp / "run", requests=n, compare=False)
            return time.process_time() - t0

        try:
            import simpy  # noqa: F401
        except ImportError:
            core, full, run = best_of(a.repeat, lambda: time_engine(sc, n, None),
                                      lambda: time_engine(sc, n, tmp), run_sim)
            s_core = s_full = None
        else:
            core, s_core, full, s_full, run = best_of(
                a.repeat, lambda: time_engine(sc, n, None), lambda: time_simpy(sc, ns, None),
                lambda: time_engine(sc, n, tmp), lambda: time_simpy(sc, ns, tmp), run_sim)
        print(f"  engine core         {rate(n, core)}")
        print(f"  engine + trace      {rate(n, full)}")
        print(f"  run_simulation      {rate(n, run)}")
        if s_core is None or s_full is None:
            print("  SimPy: not installed (pip install 'fogsdn[bench]')")
        else:
            print(f"  SimPy core          {rate(ns, s_core)}")
            print(f"  SimPy + trace       {rate(ns, s_full)}")
            r_core = (n / core) / (ns / s_core)
            r_full = (n / full) / (ns / s_full)
            print(f"  ratio core {r_core:.1f}x, with trace {r_full:.1f}x (target >= 5x)")
        big = large_scenario(sc)
        lc, lf = best_of(a.repeat, lambda: time_engine(big, n, None),
                         lambda: time_engine(big, n, tmp))
        print("large scenario (C_F=1000, C_O=100, lambda_hp=0.45, lambda_lp=0.5)")
        print(f"  engine core         {rate(n, lc)}")
        print(f"  engine + trace      {rate(n, lf)}")
        if a.ofn_requests:
            many = str(ROOT / "scenarios/many_ofns.yaml")
            print(f"40 OFNs (many_ofns): {a.ofn_requests:,} requests through run_simulation "
                  "(child process)")
            b = run_child(many, a.ofn_requests, tmp / "many")
            print(f"  {rate(b['requests'], b['cpu_s'])}, trace {b['trace_mb']:,.0f} MB, "
                  f"peak RSS {b['maxrss_mb']:.0f} MB (target < 500 MB)")
        if a.big:
            print(f"big run: {a.big_requests:,} requests through run_simulation (child process)")
            b = run_child(a.scenario, a.big_requests, tmp / "big")
            print(f"  {rate(b['requests'], b['wall_s'])}, {b['rows']:,} rows, "
                  f"trace {b['trace_mb']:,.0f} MB, peak RSS {b['maxrss_mb']:.0f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0

