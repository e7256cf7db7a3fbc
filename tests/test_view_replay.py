"""Replay of a finished run (fogsdn.view.replay) over a made-up results folder, and the
REST client's request building (scripts/fogsdn_ctl.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, TraceRow, write_trace
from fogsdn.view.replay import ReplayError, ReplaySource, in_system_at, up_at
from fogsdn.view.state import RequestError


def _folder(tmp_path: Path) -> Path:
    sc = parse_scenario(scenario_dict(duration_ms=100, warmup_ms=0))
    (tmp_path / "scenario.yaml").write_text(sc.to_yaml())
    rows = [TraceRow(f"r{i}", "c1", "hp" if i % 2 else "lp", 1.0, float(i), float(i) + 2.0,
                     "fn", Outcome.OK, 2.0, 2.0) for i in range(90)]
    rows.append(TraceRow("b", "c1", "lp", 1.0, 50.0, float("nan"), "ofn1", Outcome.BLOCKED))
    write_trace(tmp_path / "trace.csv", rows)
    (tmp_path / "availability.csv").write_text(
        "t,node,state,t_applied,t_installed,dropped,handed_off,lead,error\n"
        "0.0,ofn1,available,0,0,,,,\n40.0,ofn1,unavailable,40,40,,,,\n")
    (tmp_path / "epoch").write_text("1000.0")
    (tmp_path / "controller-events.jsonl").write_text(  # t: monotonic s; 10 real ms per model ms
        '{"t": 999.0, "event": "ready", "groups": {"hp": {"fn": 16}, "lp": {"ofn1": 16}}}\n'
        '{"t": 1000.4, "event": "availability", "groups": {"lp": {"fn": 16}}}\n')
    (tmp_path / "summary.json").write_text(json.dumps({
        "predicted": {"hp": {"W": 1.5, "blocking": 0.0}, "lp": {"W": 2.5, "blocking": 0.0}},
        "policy_epochs": [
            {"policy": "prioritized", "from_ms": 0.0, "to_ms": 60.0,
             "predicted": {"hp": {"W": 1.5, "blocking": 0.0}, "lp": {"W": 2.5, "blocking": 0}}},
            {"policy": "nodiff", "from_ms": 60.0, "to_ms": 100.0, "predicted": None}]}))
    return tmp_path


def test_state_at_a_time(tmp_path: Path) -> None:
    src = ReplaySource.of(_folder(tmp_path))
    early = src.state(30.0)
    assert early["mode"] == "replay" and early["policy"] == "prioritized"
    nodes = {n["name"]: n for n in early["nodes"]}
    assert nodes["ofn1"]["up"] is True and nodes["fn"]["in_system"] == 2
    assert early["answered"] == 29  # finished by t = 30 (sent at 0..28)
    assert early["classes"]["hp"]["predicted"] == {"W": 1.5, "blocking": 0.0}
    assert early["classes"]["hp"]["W"] == pytest.approx(2.0)
    assert early["classes"]["lp"]["routes"]["share"] == {"ofn1": 1.0}
    late = src.state(70.0)
    assert late["classes"]["lp"]["routes"]["share"] == {"fn": 1.0}  # the OFN left at 40
    assert {n["name"]: n["up"] for n in late["nodes"]}["ofn1"] is False
    assert late["policy"] == "nodiff" and late["classes"]["hp"]["predicted"] is None
    assert [e["kind"] for e in late["timeline"]].count("policy") == 2
    # the figures are the current epoch's: nodiff's requests, sent from 60 on
    assert late["classes"]["lp"]["blocked"] == 0
    # sent 60..68, done by 70
    assert late["classes"]["hp"]["sent"] + late["classes"]["lp"]["sent"] == 9
    assert src.state(55.0)["classes"]["lp"]["blocked"] == 1
    gap = [p for p in late["classes"]["hp"]["history"] if p[1:] == [None, None, None]]
    assert [p[0] for p in gap] == [60.0]  # the chart breaks at the swap
    assert len(src.state()["classes"]["hp"]["history"]) > 50  # the chart over the whole run
    with pytest.raises(RequestError):
        src.state(-1.0)
    with pytest.raises(RequestError) as err:
        src.swap_policy({"name": "nodiff"})
    assert err.value.status == 405


def test_helpers() -> None:
    avail = [{"t": "0", "node": "o", "state": "available"},
             {"t": "5", "node": "o", "state": "unavailable"}]
    assert up_at(avail, "o", 4.9) and not up_at(avail, "o", 5.0)
    rows = [TraceRow("a", "c", "hp", 1.0, 0.0, 4.0, "fn", Outcome.OK, 3.0, 3.0)]
    assert [in_system_at(rows, "fn", t) for t in (0.5, 1.0, 3.9, 4.0)] == [0, 1, 1, 0]


def test_ctl_policy_body(tmp_path: Path) -> None:
    from fogsdn_ctl import policy_body

    assert policy_body("nodiff", None, ["alpha=0.7", "k=3", "flag=true", "s=x"]) == {
        "name": "nodiff", "alpha": 0.7, "params": {"k": 3, "flag": True, "s": "x"}}
    f = tmp_path / "p.py"
    assert policy_body(None, str(f), [])["module"] == str(f.resolve())
    with pytest.raises(SystemExit):
        policy_body("x", None, ["novalue"])


def test_an_online_learners_curve_comes_with_every_state(tmp_path: Path) -> None:
    from fogsdn.controller.learner_reports import CURVE_COLUMNS, curve_rows
    from fogsdn.policies.base import Epoch

    folder = _folder(tmp_path)
    assert ReplaySource.of(folder).state(30.0)["learning_curve"] == []  # no learner
    (folder / "learning_curve.csv").write_text(CURVE_COLUMNS + curve_rows(0, "path_rnn", [
        Epoch(200, "rank 0", 3.4, 214.8, 1.0), Epoch(400, "rank 2", 3.7, 146.2, 0.889)]))
    curve = ReplaySource.of(folder).state(30.0)["learning_curve"]
    assert [(r["policy_epoch"], r["decisions"], r["action"], r["network_w"]) for r in curve] == [
        (0, 200, "rank 0", 214.8), (0, 400, "rank 2", 146.2)]


def test_the_replay_page_follows_the_slider_and_shows_the_curve(tmp_path: Path) -> None:
    """In headless Chromium: two slider moves in a row (the second while the first's
    request is out) end with the page at the second; the learner's curve is drawn."""
    pytest.importorskip("playwright.sync_api")
    from browser_page import replay_page, slide_to

    from fogsdn.controller.learner_reports import CURVE_COLUMNS, curve_rows
    from fogsdn.policies.base import Epoch

    folder = _folder(tmp_path)
    (folder / "learning_curve.csv").write_text(CURVE_COLUMNS + curve_rows(0, "path_rnn", [
        Epoch(200, "rank 0", 3.4, 214.8, 1.0), Epoch(400, "rank 2", 3.7, 146.2, 0.889)]))
    with replay_page(folder) as (watched, _):
        page = watched.page
        page.wait_for_selector("#curve tbody tr", timeout=30_000)
        assert [r.get_attribute("data-decisions")
                for r in page.query_selector_all("#curve tbody tr")] == ["200", "400"]
        page.fill("#slider", "30")
        slide_to(page, 70)  # at once: the first answer has not come back
        page.wait_for_timeout(300)  # nothing later moves it back
        assert page.inner_text("#clock") == "70" and page.inner_text("#policy") == "nodiff"
        assert watched.errors == [] and watched.off_machine == []


@pytest.mark.parametrize(("name", "text", "cause"), [
    ("availability.csv", "t,node,state\n0.0,ofn1,available\nsoon,ofn1,unavailable\n",
     "availability.csv: line 3: t: a number, got 'soon'"),
    ("availability.csv", "t,node,state\n1e999,ofn1,available\n", "line 2: t: a finite number"),
    ("availability.csv", "t,node,state\n1.0,ofn1,gone\n", "line 2: node and state"),
    ("power.csv", "t_s,dt_s,element,power_w\n0,1,fn,lots\n", "power.csv: line 2: power_w"),
    ("summary.json", "[1, 2]", "summary.json: a JSON object expected, got list"),
    ("summary.json", "{not json", "summary.json: "),
    ("summary.json", "[" * 5000 + "]" * 5000, "summary.json: "),
    ("trace.csv", "\x00\x01binary", "trace.csv: "),
])
def test_a_broken_file_is_named_with_its_row(tmp_path: Path, name: str, text: str,
                                              cause: str) -> None:
    """Refused when the folder is read (scripts/view.py says it in one line, exit 2),
    never a page whose every state request fails."""
    folder = _folder(tmp_path)
    (folder / name).write_text(text)
    with pytest.raises(ReplayError) as err:
        ReplaySource.of(folder)
    assert cause in str(err.value) and "\n" not in str(err.value)


def test_view_script_says_a_broken_folder_in_one_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "availability.csv").write_text("t,node,state\nsoon,ofn1,available\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "view.py"), str(folder),
                        "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "availability.csv: line 2: t: a number" in r.stderr


def test_a_time_past_the_end_is_refused_as_before_the_start(tmp_path: Path) -> None:
    src = ReplaySource.of(_folder(tmp_path))
    assert src.state(100.0)["mode"] == "replay"  # the end itself is shown
    for t in (-1.0, 1e9, float("inf")):
        with pytest.raises(RequestError) as err:
            src.state(t)
        assert err.value.status == 400 and "t: model ms in [0, " in str(err.value)
