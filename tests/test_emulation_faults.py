"""Faults on a schedule, live: every kind applied at its instant on a real network, each
reported with its cost, a scheduled kill not counted as a crash (the run exits 0), and
the trace still accounts for every request once (docs/reliability.md)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_clean, footprint, scenario_dict

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.live.supervisor import exit_code

pytestmark = pytest.mark.emulation

FAULTS: list[dict[str, Any]] = [
    {"t_ms": 150, "kind": "loss_burst", "node": "fn", "loss": 0.5, "duration_ms": 100},
    {"t_ms": 300, "kind": "kill_worker", "node": "ofn1", "restart_after_ms": 60},
    {"t_ms": 450, "kind": "link_down", "node": "ofn1", "duration_ms": 60},
    {"t_ms": 600, "kind": "kill_controller"},
    {"t_ms": 750, "kind": "cut_ofn", "node": "ofn1", "duration_ms": 150},
    {"t_ms": 950, "kind": "kill_worker", "node": "fn"},  # never started again
]


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Any]:
    from fogsdn.live.queueing_run import run_emulation

    before = footprint()
    sc = parse_scenario(scenario_dict(
        name="faults", seed=4, duration_ms=1100, time_scale=20.0, timeout_ms=200,
        churn={"eta": 0, "xi": 0, "initial": "available"},
        topology={"access": {"delay_ms": 0.02}}, faults=FAULTS))
    out = tmp_path_factory.mktemp("faults") / "run"
    summary = run_emulation(sc, out, show_progress=False)
    return out, summary, before


def test_scheduled_faults_are_not_crashes(faulted: tuple) -> None:
    _, summary, _ = faulted
    assert summary["incidents"] == [] and summary["crashed"] is False
    assert exit_code(summary) == 0
    assert summary.get("not_compared") or summary.get("outside_model")  # no model has them


def test_every_fault_was_applied_at_its_instant_and_reported(faulted: tuple) -> None:
    _, summary, _ = faulted
    faults = summary["faults"]
    assert [f["kind"] for f in faults] == [f["kind"] for f in FAULTS]
    for f, spec in zip(faults, FAULTS, strict=True):
        assert "error" not in f, f
        if spec["kind"] == "cut_ofn":
            continue  # applied by the churn replay: availability.csv
        first = f["steps"][0]["t_applied_ms"]
        assert spec["t_ms"] - 1 <= first <= spec["t_ms"] + 20, f  # within 20 model ms
        assert set(f["cost"]) == {"lost", "timed_out", "blocked", "rerouted", "window_ms",
                                  "recovery_ms"}
    loss, kill_ofn, down, ctl, _, kill_fn = faults
    assert len(loss["steps"]) == 2 and len(down["steps"]) == 2  # on, then off again
    assert kill_ofn["exit"] == "killed by SIGKILL" and "back_after_start_ms" in kill_ofn
    assert kill_ofn["cost"]["recovery_ms"] is not None  # it served again
    assert ctl["exit"] == "killed by SIGKILL" and ctl["outage_ms"] > 0
    assert kill_fn["exit"] == "killed by SIGKILL" and kill_fn["cost"]["recovery_ms"] is None


def test_the_cut_held_the_ofn_away_and_nothing_was_served_there(faulted: tuple) -> None:
    out, _, _ = faulted
    with open(out / "availability.csv") as fh:
        avail = [(float(r["t"]), r["state"]) for r in csv.DictReader(fh) if r["node"] == "ofn1"]
    assert (750.0, "unavailable") in avail and (900.0, "available") in avail
    rows = read_trace(out / "trace.csv")
    # sent well inside the cut (after its rules were in): none answered by the OFN
    assert not [r for r in rows if r.node == "ofn1" and r.outcome is Outcome.OK
                and 770 <= r.t_send <= 880]


def test_the_trace_still_accounts_for_every_request_once(faulted: tuple) -> None:
    out, summary, _ = faulted
    rows = read_trace(out / "trace.csv")
    ids = [r.request_id for r in rows]
    assert len(ids) == len(set(ids)) == summary["requests"] > 0
    late = [r for r in rows if r.t_send > 980]  # the FN's worker is dead from 950 on
    assert late and not [r for r in late if r.node == "fn" and r.outcome is Outcome.OK]


def test_nothing_left_after_a_faulted_run(faulted: tuple) -> None:
    _, _, before = faulted
    assert_clean(before)
