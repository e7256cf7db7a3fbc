"""TAGS and SITA through real worker processes on loopback (no root): the client picks a
stage's port, a worker kills at its cutoff, the client restarts the same id at the next."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, free_ports, wait_for_worker

from fogsdn.core.stages import StagePlan, stage_port
from fogsdn.core.trace import Outcome, TraceWriter, read_trace
from fogsdn.measure.size_compare import bounded_pareto, size_scenario
from fogsdn.nodes.client import Client
from fogsdn.nodes.traffic_engine import TrafficEngine

SIZES = bounded_pareto(1.5, 1.0, 20.0)
SCALE = 2.0  # real ms per model ms


@pytest.fixture
def two_stages(tmp_path: Path) -> Iterator[int]:
    """Workers h1 (kills above size 3) and h2 at stage ports 1 and 2 of a base port."""
    base = free_ports(3)  # the service port and one per stage after it
    procs = []
    for i, (name, kill) in enumerate((("h1", ["--kill-after", "3"]), ("h2", []))):
        ctl = tmp_path / f"{name}.sock"
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "fogsdn.nodes.worker", "--name", name, "--host", "127.0.0.1",
             "--port", str(stage_port(base, i)), "--mu", "1", "--capacity", "1000",
             "--time-scale", str(SCALE), "--control", str(ctl), *kill], cwd=ROOT), ctl))
    try:
        for p, ctl in procs:
            wait_for_worker(p, ctl)
        yield base
    finally:
        for p, _ in procs:
            p.terminate()
            p.wait(5)


def _run(tmp_path: Path, base: int, plan: StagePlan, policy: str) -> list:
    sc = size_scenario(policy, 2, 0.3, SIZES, duration_ms=300.0)
    sc = sc.with_overrides({"time_scale": SCALE, "timeout_ms": 2000.0})
    with TraceWriter(tmp_path / "trace.csv") as w:
        client = Client("c1", sc, ("127.0.0.1", base), time.monotonic() + 0.05, w,
                        stages=plan)
        asyncio.run(TrafficEngine([client]).run())
    rows = read_trace(tmp_path / "trace.csv")
    assert len(rows) == client.sent > 20
    assert len({r.request_id for r in rows}) == len(rows)
    assert all(r.outcome is Outcome.OK for r in rows)
    return rows


def test_tags_client_restarts_killed_tasks_at_the_next_stage(tmp_path: Path,
                                                              two_stages: int) -> None:
    rows = _run(tmp_path, two_stages, StagePlan("tags", ("h1", "h2"), (3.0,)), "tags")
    assert any(r.size > 3 for r in rows)
    for r in rows:
        assert r.hosts == ("h1>h2" if r.size > 3 else "h1") and r.node == r.hosts[-2:]
        # killed work is the achieved service up to the cutoff: timers wake late, never early
        assert (r.wasted_ms == 0.0) if r.size <= 3 else (r.wasted_ms >= 3.0 - 1e-3)
        assert r.node_ms >= r.size + r.wasted_ms - 1e-3
        assert r.response_ms >= r.node_ms


def test_sita_client_sends_each_size_to_its_interval(tmp_path: Path, two_stages: int) -> None:
    # the same workers: h1 kills above 3, but SITA never sends it anything above 3
    rows = _run(tmp_path, two_stages, StagePlan("sita", ("h1", "h2"), (3.0,)), "sita_e")
    for r in rows:
        assert r.node == r.hosts == ("h1" if r.size <= 3 else "h2")
        assert r.wasted_ms == 0.0
