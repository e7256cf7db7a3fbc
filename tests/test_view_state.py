"""The run view's pure part (fogsdn.view.state): token check, request checks, running
class figures, trace parsing and the state and topology documents."""

from __future__ import annotations

import json
import math

import pytest
from conftest import scenario_dict

from fogsdn.core.scenario import parse_scenario, scenario_graph
from fogsdn.view.state import (
    ClassTally,
    NodeLive,
    RequestError,
    check_bearer,
    finite,
    json_object,
    link_loads,
    parse_trace_lines,
    require_token,
    run_timeline,
    split_complete,
    state_document,
    topology_document,
    utilisation,
)


def test_bearer_token() -> None:
    assert check_bearer("Bearer s3cret", "s3cret")
    assert check_bearer("bearer  s3cret ", "s3cret")
    for header in (None, "", "s3cret", "Bearer", "Bearer wrong", "Basic s3cret"):
        assert not check_bearer(header, "s3cret"), header
    assert not check_bearer("Bearer ", "")  # no token: writes refused
    with pytest.raises(RequestError) as err:
        require_token("Bearer wrong", "s3cret")
    assert err.value.status == 401 and "\n" not in str(err.value)


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b"\xff\xfe", b"3"])
def test_body_must_be_one_object(body: bytes) -> None:
    with pytest.raises(RequestError) as err:
        json_object(body)
    assert err.value.status == 400


def test_body_object() -> None:
    assert json_object(b'{"name": "nodiff"}') == {"name": "nodiff"}


def test_class_tally_figures_and_warmup() -> None:
    t = ClassTally(warmup_ms=10.0)
    t.add(5.0, "ok", 100.0)  # warm-up: not counted
    for i in range(200):
        t.add(20.0 + i, "ok", 2.0 + (i % 5))  # mean 4
    t.add(300.0, "blocked", math.nan)
    t.add(301.0, "timeout", math.nan)
    f = t.figures()
    assert f["sent"] == 202 and f["answered"] == 200 and f["blocked"] == 1
    assert f["W"] == pytest.approx(4.0)
    assert 0 < f["W_ci95"] < 1.0
    assert f["blocking"] == pytest.approx(1 / 202)
    assert f["blocking_ci95"] > 0


def test_tally_history_is_bounded() -> None:
    t = ClassTally()
    t.add(0.0, "ok", 1.0)
    for k in range(1500):
        t.mark(float(k))
    assert len(t.history) <= 600
    assert t.history[0][0] == 0.0 and t.history[-1][0] > 1000


def test_trace_lines_parse_and_skip_torn() -> None:
    header = ["request_id", "client", "cls", "size", "t_send", "t_done", "node", "outcome",
              "response_ms", "node_ms"]
    lines = ["c1-1,c1,hp,1.0,3.5,6.0,fn,ok,2.6,2.5", "c1-2,c1,lp,1.0,4.0,,,blocked,,",
             "c1-3,c1,lp,1.0,", "garbage", "c1-4,c1,xx,1,1,1,fn,ok,1,1"]
    recs = parse_trace_lines(lines, header)
    assert [(r.cls, r.t_send, r.outcome, r.node) for r in recs] == [
        ("hp", 3.5, "ok", "fn"), ("lp", 4.0, "blocked", "")]
    assert recs[0].node_ms == 2.5 and math.isnan(recs[1].node_ms)


def test_split_complete() -> None:
    assert split_complete("a\nb\nc") == (["a", "b"], "c")
    assert split_complete("a\n") == (["a"], "")
    assert split_complete("partial") == ([], "partial")


def test_utilisation() -> None:
    assert utilisation(None, (1.0, 0.5), 1) is None
    assert utilisation((1.0, 0.0), (1.0, 0.0), 1) is None
    assert utilisation((1.0, 0.0), (2.0, 0.5), 1) == pytest.approx(0.5)
    assert utilisation((1.0, 0.0), (2.0, 0.5), 2) == pytest.approx(0.25)
    assert utilisation((1.0, 0.0), (2.0, 5.0), 1) == 1.0


def test_topology_document_and_loads() -> None:
    sc = parse_scenario(scenario_dict(topology={"kind": "star", "link": {"delay_ms": 0.5}}))
    g = scenario_graph(sc)
    doc = topology_document(g)
    names = {n["name"]: n for n in doc["nodes"]}
    assert {"fn", "ofn1", "c1", "c2"} <= set(names)
    assert names["fn"]["role"] == "fn" and names["fn"]["kind"] == "host"
    assert any(n["kind"] == "switch" for n in doc["nodes"])
    assert len(doc["links"]) == g.number_of_edges()
    assert all(link["delay_ms"] == 0.5 for link in doc["links"])
    loads = link_loads(g, {"fn": 0.7})
    fn_link = next(link["id"] for link in doc["links"] if "fn" in (link["a"], link["b"]))
    assert loads[fn_link] == 0.7 and sum(loads.values()) == 0.7


def test_state_document_is_strict_json() -> None:
    t = ClassTally()
    t.add(1.0, "ok", 2.0)
    t.mark(1.0)
    doc = state_document(
        mode="live", t_model_ms=5.0, duration_ms=100.0, running=True,
        nodes=[NodeLive("fn", "fn", True, 20, 3, 0.4, 12.5, 0.8),
               NodeLive("ofn1", "ofn", False, 10)],
        tallies={"hp": t, "lp": ClassTally()},
        prediction={"hp": {"W": 1.5, "blocking": 0.01}, "lp": {"W": 3.0, "blocking": 0.1}},
        links={"fn-s1": 0.8}, policy="prioritized",
        timeline=run_timeline([{"t": 2.0, "node": "ofn1", "state": "unavailable"}],
                              [{"policy": "nodiff", "from_ms": 3.0}]),
        epochs=[{"policy": "prioritized", "from_ms": 0.0, "to_ms": None}])
    text = json.dumps(doc, allow_nan=False)  # NaN would break the browser's JSON.parse
    back = json.loads(text)
    assert [n["up"] for n in back["nodes"]] == [True, False]
    assert back["nodes"][0]["in_system"] == 3 and back["nodes"][1]["in_system"] is None
    assert back["classes"]["hp"]["predicted"] == {"W": 1.5, "blocking": 0.01}
    assert back["classes"]["lp"]["W"] is None  # nothing answered yet
    assert back["classes"]["hp"]["history"][0][:2] == [1.0, 2.0]
    assert [e["kind"] for e in back["timeline"]] == ["churn", "policy"]
    assert back["timeline"][0]["up"] is False


def test_finite() -> None:
    assert finite({"a": [math.nan, 1.0, math.inf], "b": (2,)}) == {"a": [None, 1.0, None],
                                                                    "b": [2]}


def test_epoch_tallies_keep_each_policy_apart() -> None:
    from fogsdn.view.state import EpochTallies

    et = EpochTallies()
    et.open(0.0)
    et.add("hp", 1.0, "ok", 1.0)
    et.mark(2.0)
    et.open(10.0)
    et.add("hp", 9.0, "ok", 5.0)  # sent before the swap, finished after: the first epoch's
    et.add("hp", 11.0, "ok", 3.0)
    et.add("xx", 11.0, "ok", 3.0)  # not a class: ignored
    et.mark(12.0)
    assert et.tallies[0]["hp"].figures()["W"] == pytest.approx(3.0)
    assert et.current()["hp"].figures()["W"] == pytest.approx(3.0)
    assert et.current()["hp"].answered == 1 and et.current()["lp"].sent == 0
    hist = et.histories()["hp"]
    assert [p[0] for p in hist] == [2.0, 10.0, 12.0] and hist[1][1:] == [None, None, None]


def test_class_routes_from_controller_events() -> None:
    from fogsdn.view.state import ClassRoutes, event_lines

    r = ClassRoutes()
    for ev in event_lines([
            '{"event": "ready", "groups": {"hp": {"fn": 16}, "lp": {"ofn1": 16}}}',
            '{"event": "availability", "groups": {"lp": {"fn": 16}}}',
            '{"event": "arp_reply"}', "{torn"]):
        r.apply(ev)
    doc = r.document()
    assert doc["hp"] == {"kind": "groups", "share": {"fn": 1.0}}
    assert doc["lp"]["share"] == {"fn": 1.0}
    r.apply({"event": "policy_swap", "per_request": True, "groups": {}})
    for node in ("fn", "fn", "fn", "ofn1"):
        r.apply({"event": "decision", "cls": "hp", "node": node})
    doc = r.document()
    assert doc["hp"] == {"kind": "decisions", "share": {"fn": 0.75, "ofn1": 0.25}, "of": 4}
    assert doc["lp"]["share"] == {}


def test_timeline_keeps_every_policy_change_and_the_latest_churn() -> None:
    from fogsdn.view.state import recent_timeline

    tl = ([{"t_ms": 0.0, "kind": "policy", "policy": "a"}]
          + [{"t_ms": float(i), "kind": "churn", "node": "o", "up": i % 2 == 0}
             for i in range(1, 500)]
          + [{"t_ms": 600.0, "kind": "policy", "policy": "b"}])
    kept = recent_timeline(tl, keep=10)
    assert [e["policy"] for e in kept if e["kind"] == "policy"] == ["a", "b"]
    assert [e["t_ms"] for e in kept if e["kind"] == "churn"] == [float(i) for i in range(490, 500)]
    assert [e["t_ms"] for e in kept] == sorted(e["t_ms"] for e in kept)


def test_learning_agent_state_from_decisions() -> None:
    from fogsdn.view.state import ClassRoutes

    r = ClassRoutes()
    r.apply({"event": "decision", "cls": "lp", "node": "fn",
             "agent": {"choice": 2, "decisions": 40, "weights": {"fn": 0.7, "ofn1": 0.3}}})
    assert r.agent == {"choice": 2, "decisions": 40, "weights": {"fn": 0.7, "ofn1": 0.3}}
    r.apply({"event": "policy_swap", "per_request": False, "groups": {}})
    assert r.agent is None
