"""A user's policy file outside the repository runs live, and a failing one never takes
the controller down (emulation: root and Open vSwitch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from user_policies import (
    FAILS_WHEN_OFN_DOWN,
    HP_AWAY,
    LOOPS_LIVE,
    write_policy,
    write_scenario,
)

from fogsdn.core.trace import Outcome, read_trace
from fogsdn.policies.resolve import resolve_scenario

pytestmark = pytest.mark.emulation


def test_users_policy_file_runs_live_from_the_documented_command(tmp_path: Path) -> None:
    assert ROOT not in tmp_path.parents
    write_policy(tmp_path, HP_AWAY)
    scenario = write_scenario(tmp_path, "my_policy.py", time_scale=20, seed=5)
    out = tmp_path / "live"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"),
                        "--scenario", str(scenario), "--duration", "4", "--quiet",
                        "--out", str(out)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = [x for x in read_trace(out / "trace.csv") if x.outcome is Outcome.OK]
    assert {x.node for x in rows if x.cls == "lp"} == {"fn"}  # not seed 000's scheme
    assert "ofn1" in {x.node for x in rows if x.cls == "hp"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"]["name"] == "hp_away" and summary["policy"]["errors"] == 0


def test_a_policy_that_raises_live_falls_back_to_the_fns(tmp_path: Path) -> None:
    from fogsdn.live.queueing_run import run_emulation

    path = write_policy(tmp_path, FAILS_WHEN_OFN_DOWN)
    sc = resolve_scenario(write_scenario(tmp_path, path.name, time_scale=20, seed=5,
                                         duration_ms=200))
    summary = run_emulation(sc, tmp_path / "live", show_progress=False)
    pol = summary["policy"]
    assert pol["name"] == "brittle" and pol["errors"] > 0
    assert str(path) in pol["first_error"] and "IndexError" in pol["first_error"]
    rows = read_trace(tmp_path / "live" / "trace.csv")
    # the controller stayed up: every request was answered (served, or blocked by a full
    # OFN, which the policy chose), none timed out or was lost
    assert len(rows) > 50 and {x.outcome for x in rows} <= {Outcome.OK, Outcome.BLOCKED}
    assert {x.node for x in rows if x.outcome is Outcome.BLOCKED} <= {"ofn1"}
    lp_nodes = [x.node for x in rows if x.cls == "lp" and x.outcome is Outcome.OK]
    assert lp_nodes.count("ofn1") > 0  # the user's decide ran while it could
    assert lp_nodes.count("fn") == pol["errors"]  # this policy sends LP to the FN only
    events = [json.loads(x) for x in (tmp_path / "live" / "controller-events.jsonl")
              .read_text().splitlines()]
    fallbacks = [e for e in events if e["event"] == "policy_error"]
    assert len(fallbacks) == pol["errors"]


def test_a_policy_that_loops_live_is_stopped_and_the_fns_stand_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `decide` that never returns would hold the controller's event thread for ever:
    it is stopped at the time limit, said once naming the call, and the run goes on with
    the safe routes; every request is answered or accounted for once."""
    from fogsdn.live.queueing_run import run_emulation

    monkeypatch.setenv("FOGSDN_POLICY_TIME_LIMIT_S", "1")
    path = write_policy(tmp_path, LOOPS_LIVE)
    sc = resolve_scenario(write_scenario(tmp_path, path.name, time_scale=20, seed=5,
                                         duration_ms=300))
    summary = run_emulation(sc, tmp_path / "live", show_progress=False)
    pol = summary["policy"]
    assert pol["name"] == "stuck" and pol["errors"] == 1
    assert "decide" in pol["first_error"] and "did not return within 1 s" in pol["first_error"]
    assert summary["crashed"] is False
    rows = read_trace(tmp_path / "live" / "trace.csv")
    ids = [x.request_id for x in rows]
    assert len(ids) == len(set(ids)) == summary["requests"] > 50
    late = [x for x in rows if x.t_send > 200]  # long after the loop was stopped
    assert late and all(x.outcome is Outcome.OK for x in late)
