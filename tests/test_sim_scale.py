"""The simulator at scale: a run over many OFNs, which meets a new availability state at
almost every churn event, keeps its memory flat, and bounding the policy tables changes
no row (they are only a cache)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fogsdn.core.scenario import Role, load_scenario
from fogsdn.sim import policy_tables
from fogsdn.sim.engine import simulate
from fogsdn.sim.policy_tables import StateCache

ROOT = Path(__file__).resolve().parent.parent
MANY_OFNS = ROOT / "scenarios" / "many_ofns.yaml"

# one simulate() in a fresh interpreter, rows dropped; its peak resident memory (VmHWM:
# ru_maxrss would keep the forking pytest's own peak across exec)
_PEAK_RSS_CHILD = """
import json, sys
from pathlib import Path
from fogsdn.core.scenario import load_scenario
from fogsdn.sim.engine import simulate
res = simulate(load_scenario(sys.argv[1]), lambda rows: None, requests=int(sys.argv[2]))
hwm = next(line for line in Path("/proc/self/status").read_text().splitlines()
           if line.startswith("VmHWM:"))
print(json.dumps({"requests": res.requests, "transitions": res.transitions,
                  "maxrss_mb": int(hwm.split()[1]) / 1024}))
"""


def test_the_many_ofns_scenario_has_40_ofns() -> None:
    sc = load_scenario(MANY_OFNS)
    assert sum(n.role is Role.OFN for n in sc.nodes) == 40


def test_100k_requests_over_40_ofns_stay_well_under_500_mb() -> None:
    # before the bound: one table per state met, about 33 MB per 1,000 requests here
    # (3.3 GB at 100,000); the interpreter and its libraries alone take about 120 MB
    out = subprocess.run([sys.executable, "-c", _PEAK_RSS_CHILD, str(MANY_OFNS), "100000"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["requests"] == 100_000
    assert got["transitions"] > 100_000  # a new state at almost every one of them
    assert got["maxrss_mb"] < 400


def test_a_tiny_cache_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = load_scenario(MANY_OFNS)
    whole: list[tuple[Any, ...]] = []
    simulate(sc, whole.extend, requests=5_000)
    monkeypatch.setattr(policy_tables, "STATES_CACHED", 2)
    tiny: list[tuple[Any, ...]] = []
    simulate(sc, tiny.extend, requests=5_000)
    assert tiny == whole


def test_the_state_cache_forgets_the_least_recently_asked() -> None:
    cache: StateCache[str] = StateCache(2)
    a, b, c = (True, False), (False, True), (True, True)
    cache.keep(a, "a")
    cache.keep(b, "b")
    assert cache.find(a) == "a"  # now b is the least recent
    cache.keep(c, "c")
    assert cache.find(b) is None
    assert (cache.find(a), cache.find(c)) == ("a", "c")
    assert len(cache) == 2
