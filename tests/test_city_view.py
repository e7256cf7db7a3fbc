"""Seed 003's live city in the view (issue 21): the state document built from the
runner's positions and the daemons' and clients' state files (fogsdn.city.map_state),
and its adapter served over loopback (fogsdn.city.map_view): the map, each client's chosen
node, the coordinates, writes refused."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fogsdn.city.layout import CityLayout, FogSite
from fogsdn.city.map_state import city_state_document
from fogsdn.city.map_view import CityNow, CityView
from fogsdn.city.mobile_client import client_status_path
from fogsdn.view.server import ViewServer

LAYOUT = CityLayout(side_m=1500.0, towers=((100.0, 200.0), (1400.0, 900.0), (700.0, 50.0)),
                    fog_nodes=(FogSite("f1", (100.0, 200.0), 6),
                               FogSite("f2", (1000.0, 1200.0), 4)))
FOG_STATES: dict[str, dict[str, Any]] = {
    "f1": {"members": 3, "coord": {"vec": [1.5, -2.0], "error": 0.4, "height": 0.1,
                                   "adjustment": 0.0}, "refused": 0},
    # f2 has written nothing yet
}
CLIENT_STATES: dict[str, dict[str, Any]] = {
    "c1": {"node": "f1", "coord": {"vec": [0.5, 0.25], "error": 1.0, "height": 0.0,
                                   "adjustment": 0.0}},
    "c2": {"node": "f2", "coord": None},  # a selector that keeps no coordinate
    # c3 has not stepped yet
}


def _document() -> dict[str, Any]:
    return city_state_document(
        layout=LAYOUT, selector="vivaldi", ratio=0.5, t_s=2.0, duration_live_s=20.0,
        time_scale=10.0,
        running=True, clients=["c1", "c2", "c3"],
        positions=[(10.0, 20.0), (30.0, 40.0), (50.0, 60.0)],
        fog_states=FOG_STATES, client_states=CLIENT_STATES)


def test_the_city_document_carries_the_map_choices_and_coordinates() -> None:
    doc = _document()
    assert doc["study"] == "city" and doc["mode"] == "live" and doc["running"] is True
    assert doc["t_model_ms"] == 200.0 and doc["duration_ms"] == 2000.0  # 10 real ms per model ms
    city = doc["city"]
    assert city["side_m"] == 1500.0 and city["selector"] == "vivaldi"
    assert city["towers"] == [{"x": 100.0, "y": 200.0}, {"x": 1400.0, "y": 900.0},
                              {"x": 700.0, "y": 50.0}]
    assert city["fogs"] == [
        {"name": "f1", "x": 100.0, "y": 200.0, "slots": 6, "members": 3, "coord": [1.5, -2.0]},
        {"name": "f2", "x": 1000.0, "y": 1200.0, "slots": 4, "members": None, "coord": None}]
    assert city["clients"] == [
        {"name": "c1", "x": 10.0, "y": 20.0, "node": "f1", "coord": [0.5, 0.25]},
        {"name": "c2", "x": 30.0, "y": 40.0, "node": "f2", "coord": None},
        {"name": "c3", "x": 50.0, "y": 60.0, "node": None, "coord": None}]


def test_the_city_document_has_a_table_row_per_fog_node() -> None:
    nodes = _document()["nodes"]
    assert [n["name"] for n in nodes] == ["f1", "f2"]
    assert nodes[0]["in_system"] == 3 and nodes[0]["capacity"] == 6
    assert nodes[0]["utilisation"] == 0.5
    assert nodes[1]["in_system"] is None and nodes[1]["utilisation"] is None
    json.dumps(_document(), allow_nan=False)  # what a browser can parse


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_city_view_reads_the_state_files_and_refuses_writes(tmp_path: Path) -> None:
    (tmp_path / "f1.json").write_text(json.dumps(FOG_STATES["f1"]))
    client_status_path(tmp_path, "c1").write_text(json.dumps(CLIENT_STATES["c1"]))
    client_status_path(tmp_path, "c2").write_text("{torn")  # caught mid-write: nothing known
    view = CityView(LAYOUT, 20.0, 10.0)
    srv = ViewServer(view, 0)
    srv.start()
    try:
        status, before = _get(srv.url + "api/state")
        assert status == 200 and before["city"]["clients"] == [] and before["running"] is False
        view.now = CityNow("vivaldi", 0.5, tmp_path, ("c1", "c2"), ((1.0, 2.0), (3.0, 4.0)),
                           time.monotonic())
        status, doc = _get(srv.url + "api/state")
        req = urllib.request.Request(srv.url + "api/policy", data=b'{"name": "nodiff"}',
                                     method="PUT")
        try:
            urllib.request.urlopen(req, timeout=5)
            put_status, err = 200, {}
        except urllib.error.HTTPError as e:
            put_status, err = e.code, json.loads(e.read())
    finally:
        srv.stop()
    assert status == 200 and doc["running"] is True
    assert [(c["name"], c["node"], c["coord"]) for c in doc["city"]["clients"]] == [
        ("c1", "f1", [0.5, 0.25]), ("c2", None, None)]
    assert doc["city"]["fogs"][0]["members"] == 3 and doc["city"]["fogs"][1]["members"] is None
    assert put_status == 405 and "city study" in err["error"]
