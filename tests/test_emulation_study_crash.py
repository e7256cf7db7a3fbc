"""The study framework owns the live point's verdict: a point whose run crashed (a worker
SIGKILLed mid-run) is a failed point, never a row beside the others, and the command
exits non-zero; the points after it still run. One drill per study kind that runs live
points: the sweep (through `fogsdn-sweep`'s main), the size-based study and the agents'
evaluation (through the framework's driver)."""

from __future__ import annotations

import csv
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, assert_clean, footprint, scenario_dict

from fogsdn.core.processes import ours_alive
from fogsdn.core.scenario import load_scenario, parse_scenario
from fogsdn.live.cleanup import leftover_records
from fogsdn.studies.study import Study, run_study

emulation = pytest.mark.emulation


@contextmanager
def _kill_the_first_points_worker() -> Iterator[list[str]]:
    """SIGKILL one worker of the first live run this process starts, once its clients
    are sending; yields the labels killed (one)."""
    killed: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for rec in leftover_records():
                if not rec.owner or rec.owner[0] != os.getpid():
                    continue
                workers = sorted(k for k in rec.pids if k.startswith("worker "))
                if workers and any(k.startswith("client") for k in rec.pids):
                    time.sleep(0.3)  # some load first
                    pid, start = rec.pids[workers[0]]
                    if ours_alive(pid, start):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(workers[0])
                        return
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield killed
    finally:
        done.set()
        t.join(10)


def _rows(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _swept_file(tmp_path: Path) -> Path:
    sc = parse_scenario(scenario_dict(
        name="crashsweep", seed=2, duration_ms=300, warmup_ms=0, timeout_ms=500,
        time_scale=20.0, churn={"eta": 0, "xi": 0, "initial": "available"},
        sweep={"parameter": "workload.lambda_lp", "values": [0.2, 0.6]}))
    f = tmp_path / "crashsweep.yaml"
    f.write_text(sc.to_yaml())
    return f


@emulation
def test_a_crashed_live_sweep_point_fails_and_the_command_exits_non_zero(
        tmp_path: Path) -> None:
    from fogsdn.cli.study_command import main as study_main

    before = footprint()
    out = tmp_path / "sweep"
    with _kill_the_first_points_worker() as killed:
        rc = study_main(["--scenario", str(_swept_file(tmp_path)), "--engine", "emulate",
                         "--executor", "serial", "--out", str(out)])
    assert killed, "no live run was seen to kill a worker in"
    assert rc != 0
    failed = _rows(out / "sweep_failures.csv")
    assert len(failed) == 1 and "crashed" in str(failed[0]), failed
    assert "SIGKILL" in str(failed[0])
    kept = _rows(out / "sweep.csv")  # a row per class, of the other point only: it ran
    assert kept and {r["value"] for r in kept} == {"0.6"} and failed[0]["value"] == "0.2"
    assert_clean(before)


def _drill(study: Study, out: Path) -> None:
    before = footprint()
    with _kill_the_first_points_worker() as killed:
        res = run_study(study, out, executor="serial", log=lambda s: None)
    assert killed, "no live run was seen to kill a worker in"
    assert len(res.failures) == 1, res.failures
    [(_, why)] = res.failures
    assert "crashed" in why and "SIGKILL" in why, why
    assert len(res.rows) == len(study.plan()) - 1 >= 1  # the other points ran
    assert_clean(before)


@emulation
def test_a_crashed_live_size_point_fails(tmp_path: Path) -> None:
    from fogsdn.studies.size_study import SizeStudy

    base = load_scenario(ROOT / "scenarios" / "seed002b_load.yaml").with_overrides(
        {"sweep.values": [0.1377, 0.3442], "sweep.policies": ["random"]})
    _drill(SizeStudy(base, tmp_path, engine="emulate", duration_ms=1500.0), tmp_path)


@emulation
def test_a_crashed_live_agent_point_fails(tmp_path: Path) -> None:
    from fogsdn.studies.agent_study import AgentStudy

    base = parse_scenario(scenario_dict(name="crashagents", time_scale=20.0,
                                        churn={"eta": 0, "xi": 0, "initial": "available"}))
    _drill(AgentStudy(base, ["least_loaded"], [1, 2], tmp_path, "emulate", 1000, 1.5, None),
           tmp_path)
