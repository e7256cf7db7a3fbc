"""Containers and real work, measured live (needs root, Open vSwitch, the emulation lock).

The scenario as model work in containers, as plain processes and as real CPU work, over
the same span and seed (docs/benchmarks.md; figures in docs/containers.md).

    flock /tmp/fogsdn-emulation.lock .venv/bin/python scripts/bench_containers.py \
        [--scenario scenarios/default.yaml] [--duration 25] [--runs model,plain,cpu]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.bench.common import ROOT

VARIANTS: dict[str, dict[str, Any]] = {
    "model": {"containers": True},
    "plain": {"containers": False},
    "cpu": {"containers": True, "workload.work": "cpu"},
}


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _service_stats(out: Path, warmup_ms: float) -> dict[str, dict[str, float]]:
    import numpy as np

    from fogsdn.core.trace import Outcome, read_trace

    by: dict[str, list[tuple[float, float]]] = {}
    for r in read_trace(out / "trace.csv"):
        if r.outcome is Outcome.OK and r.t_send >= warmup_ms and r.nominal_ms > 0:
            by.setdefault(r.node, []).append((r.service_ms, r.nominal_ms))
    stats = {}
    for node, v in sorted(by.items()):
        s = np.array([a for a, _ in v])
        ratio = np.array([a / b for a, b in v])
        stats[node] = {"n": len(v), "service_mean": float(s.mean()),
                       "nominal_mean": float(np.mean([b for _, b in v])),
                       "ratio_mean": float(s.mean() / np.mean([b for _, b in v])),
                       "ratio_p50": float(np.percentile(ratio, 50)),
                       "ratio_p95": float(np.percentile(ratio, 95)),
                       "service_cv": float(s.std() / s.mean())}
    return stats


def run_variant(name: str, scenario: Path, duration: float, out_root: Path) -> dict[str, Any]:
    from fogsdn.core.scenario import load_scenario

    sc = load_scenario(scenario).with_overrides(VARIANTS[name])
    f = out_root / f"{name}.yaml"
    f.write_text(sc.to_yaml())
    out = out_root / name
    before = _children_cpu_s()
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"),
                        "--scenario", str(f), "--duration", str(duration), "--out", str(out),
                        "--quiet"], cwd=ROOT, capture_output=True, text=True)
    cpu = _children_cpu_s() - before
    if not (out / "summary.json").exists():
        raise SystemExit(f"{name}: no summary ({p.returncode}): {p.stdout[-800:]}{p.stderr[-800:]}")
    s = json.loads((out / "summary.json").read_text())
    pw, pred = s.get("power", {}), (s.get("predicted") or {})
    return {
        "run_cpu_s": cpu, "exit": p.returncode,
        "worker_cpu_s": {k: v.get("cpu_s") for k, v in
                         s.get("containers", {}).get("accounting", {}).items()},
        "W": {c: {"measured": s["measured"][c]["W"], "ci95": s["measured"][c]["W_ci95"],
                  "exact": pred.get(c, {}).get("W")} for c in ("hp", "lp")},
        "servers_W": {"measured": pw.get("servers_W"),
                      "exact": (pred.get("power") or {}).get("servers_W")},
        "utilization": {"measured": pw.get("utilization"),
                        "exact": (pred.get("power") or {}).get("utilization")},
        "service": _service_stats(out, sc.warmup_ms),
        "startup_s": s.get("startup_s"),
        "cpu_work": s.get("cpu_work"),
        "out": str(out),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "default.yaml"))
    ap.add_argument("--duration", type=float, default=25.0, help="seconds of live load per run")
    ap.add_argument("--runs", default="model,plain,cpu")
    ap.add_argument("--out", help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--json", help="write the figures as JSON here")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_containers: needs root (Mininet, cgroups)", file=sys.stderr)
        return 2
    out_root = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="containers-"))
    out_root.mkdir(parents=True, exist_ok=True)
    print(f"$ {' '.join(sys.argv)}", flush=True)
    rows: dict[str, Any] = {}
    for name in a.runs.split(","):
        rows[name] = r = run_variant(name, Path(a.scenario), a.duration, out_root)
        w = r["W"]
        print(f"{name:6s} run CPU {r['run_cpu_s']:6.1f} s  workers "
              + " ".join(f"{k} {v:.2f} s" for k, v in r["worker_cpu_s"].items() if v)
              + f"  | W_HP {w['hp']['measured']:.3f}±{w['hp']['ci95']:.3f} (exact "
              f"{w['hp']['exact']:.3f})  W_LP {w['lp']['measured']:.3f}±{w['lp']['ci95']:.3f}"
              f" (exact {w['lp']['exact']:.3f})  | servers {r['servers_W']['measured']:.1f} W "
              f"(exact {r['servers_W']['exact']:.1f})", flush=True)
        for node, st in r["service"].items():
            print(f"         {node}: service/nominal mean x{st['ratio_mean']:.3f}, p50 "
                  f"x{st['ratio_p50']:.3f}, p95 x{st['ratio_p95']:.3f}, service CV "
                  f"{st['service_cv']:.2f} (exponential: 1), n={st['n']}", flush=True)
    if "model" in rows and "plain" in rows:
        m, pl = rows["model"]["run_cpu_s"], rows["plain"]["run_cpu_s"]
        print(f"containers add {m - pl:+.2f} CPU s to the run ({(m - pl) / pl:+.1%})")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print(f"runs kept in {out_root}")
    return 0

