"""Seed 003's live city in a real browser (issue 21): `scripts/sweep.py --scenario
scenarios/city.yaml --engine emulate --view PORT`, one selector (vivaldi) at one ratio
for a few seconds; headless Debian chromium (Playwright) finds every fog node on the map
and in the table, every client on the map, clients joined to a node, Vivaldi
coordinates, clients moving, and no console error. Root, Open vSwitch; run under the
emulation lock."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from browser_page import chromium_page, require_chromium
from conftest import ROOT, wait_until

pytestmark = pytest.mark.emulation

FOG_NODES, CLIENTS = 4, 8  # city.yaml: 4 fog nodes, 16 slots; ratio 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state(url: str) -> Any:
    try:
        r = requests.get(url + "api/state", timeout=5)
        return r.json() if r.ok else None
    except (requests.RequestException, ValueError):
        return None


def _client_xy(page: Any) -> dict[str, tuple[str | None, str | None]]:
    return {c.get_attribute("data-client"): (c.get_attribute("cx"), c.get_attribute("cy"))
            for c in page.query_selector_all("[data-client]")}


def test_the_city_map_in_a_browser(tmp_path: Path) -> None:
    pytest.importorskip("playwright.sync_api")
    require_chromium()
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    out = tmp_path / "out"
    log = tmp_path / "runner.log"
    # The browser starts before the runner: a cold Chromium takes seconds on a loaded
    # machine, and the view closes with the run.
    with chromium_page(url) as watched, open(log, "wb") as fh:
        page = watched.page
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "sweep.py"), "--scenario",
             str(ROOT / "scenarios" / "city.yaml"), "--engine", "emulate", "--out", str(out),
             "--set", "selectors=[vivaldi]", "--set", "ratios=[0.5]", "--set", "duration_live_s=30",
             # steps and probes every real second or so (the study file's pace at time
             # scale 10 is one per 5-10 s): the map has something to show at once
             "--set", "start_s=[0.05,0.2]", "--set", "period_s=[0.05,0.1]",
             "--set", "node_probe_s=0.1",
             "--view", str(port)], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
        try:
            def clients_placed() -> bool:
                assert proc.poll() is None, f"the runner exited; see {log}"
                st = _state(url)
                return bool(st and st.get("running") and len(st["city"]["clients"]) == CLIENTS)

            wait_until(clients_placed, "the point's clients on the map", 180)
            r = requests.put(url + "api/policy", json={"name": "nodiff"}, timeout=5)
            assert r.status_code == 405 and list(r.json()) == ["error"]
            page.goto(url)
            page.wait_for_selector(f"[data-client=c{CLIENTS}]", timeout=30_000)
            fogs = {f.get_attribute("data-fog") for f in page.query_selector_all("[data-fog]")}
            rows = {r.get_attribute("data-node")
                    for r in page.query_selector_all("tr[data-node]")}
            assert len(fogs) == FOG_NODES and rows == fogs
            assert len(page.query_selector_all("[data-tower]")) == FOG_NODES
            assert set(_client_xy(page)) == {f"c{k}" for k in range(1, CLIENTS + 1)}
            # clients join a node (the line and colour to it) and learn coordinates
            page.wait_for_function(
                "[...document.querySelectorAll('[data-client]')].filter("
                "(c) => c.dataset.chosen).length >= 4", timeout=15_000)
            page.wait_for_function(
                f"document.querySelectorAll('[data-coord]').length > {FOG_NODES}",
                timeout=15_000)
            chosen = {c.get_attribute("data-chosen")
                      for c in page.query_selector_all("[data-client]")} - {""}
            assert chosen <= fogs
            # the map follows the clients' walks
            before = _client_xy(page)
            time.sleep(3.0)
            assert _client_xy(page) != before
            assert watched.errors == [] and watched.off_machine == []
            rc = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
    assert rc == 0, log.read_text()[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crashed"] is False
    assert [p["clients_reporting"] for p in summary["points"]] == [CLIENTS]
