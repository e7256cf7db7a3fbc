"""Controller crash drill, measured (needs root): the controller SIGKILLed mid-run and
restarted, under a proactive and a per-request policy (docs/reliability.md).

    sudo python scripts/bench_reliability.py [--scenario scenarios/default.yaml]
                                             [--seconds 24] [--kills 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tools.bench.common import ROOT, fail

POLICIES = {"prioritized": [], "threshold": ["--policy", "threshold"]}


def drill(scenario: str, extra: list[str], seconds: float, kills: int, out: Path
          ) -> dict[str, Any]:
    from fogsdn.core.scenario import load_scenario
    from fogsdn.core.trace import read_trace
    from fogsdn.live.cleanup import RunRecord, record_of_runner

    root = ROOT
    p = subprocess.Popen([sys.executable, str(root / "scripts" / "run_testbed.py"),
                          "--scenario", scenario, "--duration", str(seconds), "--out",
                          str(out), "--quiet", *extra], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    rec = record_of_runner(p.pid)
    if rec is None:
        raise SystemExit("bench_reliability: the run did not start")
    t0 = time.monotonic()
    for k in range(kills):
        time.sleep(max(0.0, t0 + (k + 1) * seconds / (kills + 1) - time.monotonic()))
        rec = RunRecord.load(rec.file)
        pid, _ = rec.pids["controller"]
        os.kill(pid, signal.SIGKILL)
    text, _ = p.communicate(timeout=seconds + 120)
    summary = json.loads((out / "summary.json").read_text())
    rows = read_trace(out / "trace.csv")
    scale = load_scenario(out / "scenario.yaml").time_scale
    kills_out = []
    for inc in summary["incidents"]:
        if inc["process"] != "controller" or "outage_ms" not in inc:
            continue
        t_a = inc["t_model_ms"]
        t_b = t_a + inc["outage_ms"] / scale
        during = Counter(str(r.outcome) for r in rows if t_a < r.t_send < t_b)
        kills_out.append({"outage_ms": inc["outage_ms"], "sent_during": sum(during.values()),
                          "outcomes_during": dict(during)})
    return {"exit": p.returncode, "requests": len(rows),
            "outcomes": dict(Counter(str(r.outcome) for r in rows)), "kills": kills_out,
            # a per-request policy: served by its routes while the controller was away
            "fallback_decided": (summary.get("decisions") or {}).get("fallback_decided"),
            "tail": text.decode(errors="replace")[-400:] if p.returncode != 3 else ""}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="scenarios/default.yaml")
    ap.add_argument("--seconds", type=float, default=24.0, help="seconds of live load")
    ap.add_argument("--kills", type=int, default=3, help="controller kills per run (<= 3)")
    ap.add_argument("--json", help="also write the figures here")
    return ap.parse_args(argv)


def run(a: argparse.Namespace) -> int:
    """The drill, once scripts/bench_reliability.py has set up (the network stack too)."""
    if os.geteuid() != 0:
        return fail("error: needs root (a live run)")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in POLICIES.items():
            res = drill(a.scenario, extra, a.seconds, min(a.kills, 3), Path(tmp) / name)
            results[name] = res
            fb = ("" if res["fallback_decided"] is None
                  else f", {res['fallback_decided']} decided by the fallback")
            print(f"{name}: exit {res['exit']}, {res['requests']} requests {res['outcomes']}{fb}")
            for k, kill in enumerate(res["kills"], 1):
                print(f"  kill {k}: outage {kill['outage_ms']:.0f} ms; "
                      f"{kill['sent_during']} sent during it: {kill['outcomes_during']}")
            if res["tail"]:
                print(res["tail"])
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Arguments, then the benchmark; the entry point sets up between the two."""
    return run(parse_args(argv))
