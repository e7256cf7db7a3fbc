"""The live run's view source (fogsdn.live.live_view) over a fake run: a results folder with
a growing trace, and a fake controller on the registration socket."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import scenario_dict

from fogsdn.core.local_rpc import recv_line, send_json
from fogsdn.core.scenario import parse_scenario, scenario_graph
from fogsdn.live.live_view import LiveView, write_token
from fogsdn.live.queueing_run import Progress
from fogsdn.view.state import RequestError

HEADER = "request_id,client,cls,size,t_send,t_done,node,outcome,response_ms,node_ms\n"


class FakeController:
    """Answers each registration-socket request with `answer`, keeping what it got."""

    def __init__(self, path: Path, answer: dict[str, Any]) -> None:
        self.got: list[dict[str, Any]] = []
        self.answer = answer
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                self.got.append(json.loads(recv_line(conn)))
                send_json(conn, self.answer)


@pytest.fixture
def run(tmp_path: Path) -> SimpleNamespace:
    sc = parse_scenario(scenario_dict(warmup_ms=0))
    sock = tmp_path / "sock"
    sock.mkdir()
    live = SimpleNamespace(graph=scenario_graph(sc), sock_dir=sock, notes=[])
    return SimpleNamespace(sc=sc, out=tmp_path, live=live, epoch=time.monotonic(),
                           progress=Progress(ofn_state={"ofn1": True}), availability=[],
                           clients={"c1": None}, power=None, stop=threading.Event())


def test_state_follows_the_trace_and_the_churn(run: SimpleNamespace) -> None:
    view = LiveView(run, "tok")
    trace = run.out / "trace-c1.csv"
    trace.write_text(HEADER + "a,c1,hp,1,1.0,3.0,fn,ok,2.0,2.0\nb,c1,lp,1,2.0,")  # torn
    (run.out / "load-engine.progress").write_text('{"c1": [7, 5]}')
    view._tick()
    st = view.state()
    assert st["mode"] == "live" and st["running"] and st["policy"] == "prioritized"
    assert (st["sent"], st["answered"]) == (7, 5)
    assert st["classes"]["hp"]["answered"] == 1 and st["classes"]["lp"]["sent"] == 0
    with open(trace, "a") as fh:
        fh.write("5.0,fn,blocked,,\n")
    view._tick()
    assert view.state()["classes"]["lp"]["blocked"] == 1
    run.progress.ofn_state["ofn1"] = False  # the runner applied a leave: shown at once
    run.availability.append({"t": 4.0, "node": "ofn1", "state": "unavailable"})
    st = view.state()
    assert {n["name"]: n["up"] for n in st["nodes"]} == {"fn": True, "ofn1": False}
    assert st["timeline"][-1] == {"t_ms": 4.0, "kind": "churn", "node": "ofn1", "up": False}
    assert st["nodes"][0]["in_system"] is None  # no worker answered: unknown, not 0
    assert st["classes"]["hp"]["predicted"]["W"] > 0  # the exact model, computed once


def test_swap_checked_sent_and_recorded(run: SimpleNamespace) -> None:
    ctl = FakeController(run.live.sock_dir / "controller.sock", {"ok": True, "installed": True})
    view = LiveView(run, "tok")
    out = view.swap_policy({"name": "nodiff", "alpha": 0.2})
    assert out["ok"] and out["policy"] == "nodiff"
    assert ctl.got == [{"cmd": "policy", "spec": {"name": "nodiff", "alpha": 0.2,
                                                  "params": {}}}]
    assert [e["policy"] for e in view.policy_epochs()] == ["prioritized", "nodiff"]
    kept = json.loads((run.live.sock_dir / "policy.json").read_text())
    assert kept["name"] == "nodiff"  # for a controller the supervisor restarts
    assert view.state()["policy"] == "nodiff"
    with pytest.raises(RequestError) as err:
        view.swap_policy({"name": "no_such"})
    assert err.value.status == 400 and len(ctl.got) == 1  # refused before the controller
    view.stop()
    assert view.policy_epochs()[-1]["to_ms"] is not None


def test_swap_the_controller_refuses_changes_nothing(run: SimpleNamespace) -> None:
    FakeController(run.live.sock_dir / "controller.sock", {"error": "policy 'x': boom"})
    view = LiveView(run, "tok")
    with pytest.raises(RequestError, match="controller: policy 'x': boom"):
        view.swap_policy({"name": "nodiff"})
    assert [e["policy"] for e in view.policy_epochs()] == ["prioritized"]
    assert view.state()["policy"] == "prioritized"
    assert not (run.live.sock_dir / "policy.json").exists()


def test_swap_with_the_controller_down(run: SimpleNamespace) -> None:
    view = LiveView(run, "tok")
    with pytest.raises(RequestError) as err:
        view.swap_policy({"name": "nodiff"})
    assert err.value.status == 502 and len(view.policy_epochs()) == 1


def test_token_file_is_private(tmp_path: Path) -> None:
    token = write_token(tmp_path / "run")
    f = tmp_path / "run" / "api_token"
    assert f.read_text().strip() == token and len(token) >= 24
    assert f.stat().st_mode & 0o777 == 0o600
    assert write_token(tmp_path / "run") != token  # fresh per run


def test_an_online_learners_curve_is_shown_as_its_epochs_close(run: SimpleNamespace) -> None:
    from fogsdn.controller.learner_reports import CURVE_COLUMNS, curve_rows
    from fogsdn.policies.base import Epoch

    view = LiveView(run, "tok")
    view._tick()
    assert view.state()["learning_curve"] == []
    curve = run.out / "learning_curve.csv"
    curve.write_text(CURVE_COLUMNS + curve_rows(0, "path_rnn", [Epoch(200, "rank 0", 3.4, 214.8,
                                                                      1.0)])
                     + "0,path_rnn,400,ra")  # the controller is mid-write
    view._tick()
    assert [r["decisions"] for r in view.state()["learning_curve"]] == [200]
    with open(curve, "a") as fh:
        fh.write("nk 2,3.7,146.2,0.889\n" + curve_rows(1, "path_rnn", [Epoch(200, "a 0.9", 2.0,
                                                                           150.0, 1.0)]))
    view._tick()
    rows = view.state()["learning_curve"]
    assert [(r["policy_epoch"], r["decisions"], r["action"]) for r in rows] == [
        (0, 200, "rank 0"), (0, 400, "rank 2"), (1, 200, "a 0.9")]
