"""The live load's own cost: one process per client against one traffic engine (root).

Per number of clients, the same scenario live three times, side by side in one run: the
clients as one process each (the old design, LiveOptions.client_processes), and as
logical clients of one traffic engine, ordinary and SCHED_FIFO (the default). Per run:
processes, the clients' CPU-s in all (per 1,000 requests and per client), their peak
memory, how late the requests left against their drawn instants, and the W gap to
exact (docs/benchmarks.md). More clients
than one switch has ports: a tree (a root and four switches below it).

    sudo python scripts/bench_load.py [--scenario scenarios/default.yaml]
        [--clients 2 50 200] [--seconds 20] [--time-scale S] [--modes ...] [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# one process per client (ordinary scheduling, as before the engine); one engine, as
# an ordinary process; one engine at SCHED_FIFO (the default run's)
MODES = ("processes", "engine-ordinary", "engine")


def _gap(summary: dict[str, Any], cls: str) -> float:
    comp = (summary.get("comparison") or {}).get(cls) or {}
    w = comp.get("W") or {}
    m, e = w.get("measured"), w.get("predicted")
    return m / e - 1 if m is not None and e else math.nan


def _row(n: int, mode: str, s: dict[str, Any]) -> dict[str, Any]:
    eng = s.get("load_engine") or {}
    late = s.get("send_lateness") or {}
    sent = eng.get("sent") or 0
    return {"clients": n, "mode": mode, "processes": eng.get("processes"),
            "requests": s.get("requests"), "cpu_s": eng.get("cpu_s"),
            "cpu_share": eng.get("cpu_share"),
            "cpu_s_per_1000": 1000 * eng["cpu_s"] / sent if sent else math.nan,
            "cpu_s_per_client": eng["cpu_s"] / n if eng else math.nan,
            # each process's own peak: their sum bounds the clients' memory at once
            "rss_mb": sum(eng.get("rss_kb_each", [])) / 1024 if eng else math.nan,
            "late_p50_ms": late.get("p50_ms"), "late_p99_ms": late.get("p99_ms"),
            "late_max_ms": late.get("max_ms"), "late_share": late.get("late_share"),
            "W_hp_gap": _gap(s, "hp"), "W_lp_gap": _gap(s, "lp"),
            "emulation_bias": (s.get("emulation_bias") or {}).get("large"),
            "crashed": s.get("crashed"), "cpu_idle_share": s.get("cpu_idle_share")}


def _fmt(x: Any, spec: str) -> str:
    return format(x, spec) if isinstance(x, int | float) and math.isfinite(x) else "-"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="scenarios/default.yaml")
    ap.add_argument("--clients", type=int, nargs="+", default=[2, 50, 200])
    ap.add_argument("--seconds", type=float, default=20.0, help="real seconds of load per run")
    ap.add_argument("--time-scale", type=float, help="default: the scenario's")
    ap.add_argument("--out", help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--json", help="write the table as JSON here")
    return ap.parse_args(argv)


def run(a: argparse.Namespace) -> int:
    """The benchmark, once scripts/bench_load.py has set up (the network stack too)."""
    from fogsdn.core.scenario import load_scenario
    from fogsdn.core.topology import MAX_PORTS
    from fogsdn.live.live_network import EmulationError
    from fogsdn.live.queueing_run import LiveOptions, run_emulation
    from fogsdn.live.supervisor import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    base = load_scenario(a.scenario)
    scale = a.time_scale or base.time_scale
    out_root = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="bench-load-"))
    print(f"$ {' '.join(sys.argv)}\nscenario {base.name}, time scale {scale:g}, "
          f"{a.seconds:g} s of load per run, runs in {out_root}", flush=True)
    rows: list[dict[str, Any]] = []
    for n in a.clients:
        for mode in a.modes:
            if stop.is_set():
                break
            over: dict[str, Any] = {"time_scale": scale, "workload.clients": n,
                                    "duration_ms": 1000 * a.seconds / scale}
            if n + len(base.nodes) > MAX_PORTS - 1:  # one switch's ports: a tree of five
                over |= {"topology.kind": "tree", "topology.depth": 1, "topology.fanout": 4}
            sc = base.with_overrides(over)
            opts = LiveOptions(client_processes=mode == "processes",
                               engine_realtime=mode == "engine")
            try:
                s = run_emulation(sc, out_root / f"{n}-{mode}", stop, show_progress=False,
                                  options=opts)
            except EmulationError as err:
                rows.append({"clients": n, "mode": mode, "failed": str(err)})
                print(f"{n} clients, {mode}: FAILED: {err}", flush=True)
                continue
            if s.get("interrupted"):
                break
            rows.append(_row(n, mode, s))
            print(json.dumps(rows[-1]), flush=True)
    print("\nclients  mode             procs  CPU-s  per 1k req  per client  RSS MB   late p50 / "
          "p99 / max (model ms)  late share  W_HP gap  W_LP gap  bias")
    for r in rows:
        if "failed" in r:
            print(f"{r['clients']:7d}  {r['mode']:15s}  FAILED: {r['failed']}")
            continue
        print(f"{r['clients']:7d}  {r['mode']:15s}  {_fmt(r['processes'], '5d')}  "
              f"{_fmt(r['cpu_s'], '5.1f')}  {_fmt(r['cpu_s_per_1000'], '10.3f')}  "
              f"{_fmt(r['cpu_s_per_client'], '10.3f')}  {_fmt(r['rss_mb'], '6.0f')}   "
              f"{_fmt(r['late_p50_ms'], '.4f')} / {_fmt(r['late_p99_ms'], '.4f')} / "
              f"{_fmt(r['late_max_ms'], '.3f')}        {_fmt(r['late_share'], '8.4f')}  "
              f"{_fmt(100 * r['W_hp_gap'], '+7.2f')}%  {_fmt(100 * r['W_lp_gap'], '+7.2f')}%  "
              f"{'YES' if r['emulation_bias'] else 'no'}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Arguments, then the benchmark; the entry point sets up between the two."""
    return run(parse_args(argv))
