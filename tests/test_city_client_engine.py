"""The city's client engine (fogsdn.city.client_engine): every mobile client of a point as
a thread of one process. Its pieces with fakes and loopback sockets; the engine itself
runs in tests/test_emulation_city.py."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_city_live import FakeCity, _config

from fogsdn.city.client_engine import city_clients, run_client, serve_echoes
from fogsdn.city.fog_daemon import CityConfig
from fogsdn.city.mobile_client import CityClient, client_result, drive
from fogsdn.nodes.ncs.discovery import ClientParams
from fogsdn.nodes.probe import EchoResponder, Prober


def _client(cfg: CityConfig, net: Any) -> CityClient:
    return CityClient("c1", cfg, "optimal", net, random.Random(1), net.members)


def _started(tmp_path: Path, duration_s: float, period_s: float) -> CityConfig:
    """A point that starts now: steps `period_s` real seconds apart (time scale 1)."""
    return replace(_config({"x": 2, "y": 3}), state_dir=tmp_path, time_scale=1.0,
                   epoch=time.monotonic(), duration_live_s=duration_s,
                   client=ClientParams(period_s=(period_s, period_s), start_s=(0.0, 0.0)))


def test_one_thread_answers_the_probes_of_every_client() -> None:
    stop = threading.Event()
    responders = [EchoResponder(("127.0.0.1", 0)) for _ in range(3)]
    echo = threading.Thread(target=serve_echoes, args=(responders, stop), daemon=True)
    echo.start()
    prober = Prober(("127.0.0.1", 0))
    try:
        samples = [prober.ping(r.address, timeout_s=2.0) for r in responders for _ in range(2)]
    finally:
        stop.set()
        echo.join(timeout=2)
        prober.close()
        for r in responders:
            r.close()
    assert not echo.is_alive()
    assert all(s.rtt_ms is not None and 0 <= s.rtt_ms < 2000 for s in samples)
    # read once the thread has stopped: an echo reaches the prober before the thread
    # that sent it counts it (a clean-clone CI run read [2, 2, 1] here)
    assert [r.counters.received for r in responders] == [2, 2, 2]
    assert [r.counters.sent for r in responders] == [2, 2, 2]


def test_a_client_steps_once_a_period_until_the_point_ends(tmp_path: Path) -> None:
    cfg = _started(tmp_path, duration_s=0.5, period_s=0.1)
    net = FakeCity({"x": 1.0, "y": 4.0}, {"x": 2, "y": 3})
    client = _client(cfg, net)
    t0 = time.monotonic()
    drive(client, cfg, threading.Event(), tmp_path / "client-c1.json")
    took = time.monotonic() - t0
    steps = client.result.delivered + client.result.lost
    assert 3 <= steps <= 6 and 0.45 <= took < 1.5, (steps, took)
    assert client.node == "x"  # the nearer node, by the truth the fake gives
    out = client_result(client, EchoResponder(("127.0.0.1", 0)).counters)
    assert out["delivered"] == client.result.delivered and "coordinate_errors" in out


def test_a_live_client_steps_when_its_simulated_twin_does(tmp_path: Path) -> None:
    """The engine gives client k of the runner's order the simulator's client k's draws
    of its start and periods, so both engines step at the same model instants (here one
    real second per model second, both clients at once: 3 s); the choices stay each
    engine's own."""
    from test_city_live import _study

    from fogsdn.city.event_model import CitySimulation

    st = _study(fog_nodes=2, total_slots=5, ratios=[0.5], seed=4)
    sim = CitySimulation(st, "random", 0.5)
    simulated: dict[int, list[float]] = {}

    def record(c: Any, t: float) -> None:
        simulated.setdefault(sim.clients.index(c), []).append(t)

    sim._client_step = record  # type: ignore[method-assign]
    sim.run()
    span_s = 3.0
    cfg = replace(_config({"x": 2, "y": 3}), state_dir=tmp_path, time_scale=1.0, seed=4,
                  epoch=time.monotonic(), duration_live_s=span_s,
                  client=ClientParams(period_s=st.period_s, start_s=st.start_s),
                  clients={"c1": "10.0.0.101", "c2": "10.0.0.102"})
    nets = {n: FakeCity({"x": 1.0, "y": 4.0}, {"x": 2, "y": 3}) for n in cfg.clients}
    lives: list[list[float]] = []
    threads = []
    for client in city_clients(cfg, "random", nets, lambda: {}):
        steps: list[float] = []
        client.step = steps.append  # type: ignore[method-assign]
        lives.append(steps)
        threads.append(threading.Thread(target=drive, args=(
            client, cfg, threading.Event(), tmp_path / f"client-{client.name}.json")))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=2 * span_s)
    for k, live in enumerate(lives):
        twin = [t for t in simulated[k] if t < span_s]
        assert len(live) == len(twin) >= 2, (k, live, twin)
        assert live == pytest.approx(twin, abs=0.1), (k, live, twin)
    assert lives[0] != pytest.approx(lives[1], abs=0.01)  # each its own draws


def test_stop_ends_a_sleeping_client_at_once(tmp_path: Path) -> None:
    cfg = _started(tmp_path, duration_s=60.0, period_s=30.0)
    client = _client(cfg, FakeCity({"x": 1.0, "y": 4.0}, {"x": 2, "y": 3}))
    stop = threading.Event()
    t = threading.Thread(target=drive, args=(client, cfg, stop, tmp_path / "s.json"))
    t.start()
    time.sleep(0.2)  # its first step done, asleep for 30 s
    stop.set()
    t.join(timeout=2)
    assert not t.is_alive()


class _Broken(FakeCity):
    def truth(self) -> dict[str, Any]:
        raise KeyError("static")


def test_a_client_that_fails_is_named_and_the_others_go_on(tmp_path: Path) -> None:
    cfg = _started(tmp_path, duration_s=0.3, period_s=0.1)
    broken = _client(cfg, _Broken({"x": 1.0, "y": 4.0}, {"x": 2, "y": 3}))
    fine = CityClient("c2", cfg, "optimal", FakeCity({"x": 1.0, "y": 4.0}, {"x": 2, "y": 3}),
                      random.Random(2), lambda: {"x": 0, "y": 0})
    failed: list[str] = []
    threads = [threading.Thread(target=run_client, args=(c, cfg, threading.Event(), failed))
               for c in (broken, fine)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert failed == ["c1: KeyError: 'static'"]
    assert fine.result.delivered >= 2
