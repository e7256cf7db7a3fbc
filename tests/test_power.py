"""The power arithmetic against hand-computed values, and the exact prediction."""

from __future__ import annotations

import math

import pytest

from fogsdn.core.scenario import ScenarioError, ServerPower, SwitchPower, parse_scenario
from fogsdn.exact.ctmc import predict
from fogsdn.exact.model_params import model_params_from_scenario
from fogsdn.measure.comparison import predicted_power_block
from fogsdn.models.power_model import (
    PowerError,
    PowerSample,
    awake_ports,
    busy_fraction,
    hold_intervals,
    power_block,
    power_csv_text,
    server_power_w,
    switch_power_w,
)


def test_server_power_is_linear_in_utilization() -> None:
    spec = ServerPower()  # 63.1 W idle, 200 W at full load
    assert server_power_w(spec, 0.0) == pytest.approx(63.1)
    assert server_power_w(spec, 1.0) == pytest.approx(200.0)
    assert server_power_w(spec, 0.25) == pytest.approx(63.1 + 136.9 * 0.25)  # 97.325
    assert server_power_w(ServerPower(idle_w=10, max_w=30), 0.6) == pytest.approx(22.0)
    assert server_power_w(spec, 1.02) == pytest.approx(200.0)  # poll jitter is clamped
    with pytest.raises(PowerError, match="utilization"):
        server_power_w(spec, 1.5)
    with pytest.raises(PowerError, match="utilization"):
        server_power_w(spec, math.nan)


def test_switch_power_idle_ports_and_traffic() -> None:
    spec = SwitchPower()  # 20 W idle, 30 W peak, 0.5 W per active port, 1000 Mb/s
    assert switch_power_w(spec, 0, 4, 0.0) == pytest.approx(20.0)
    # 3 of 4 ports active, 100 Mb/s: 20 + 1.5 + (30 - 20 - 2) * 0.1 = 22.3
    assert switch_power_w(spec, 3, 4, 12.5e6) == pytest.approx(22.3)
    # every port active at capacity (and beyond): the seed's peak
    assert switch_power_w(spec, 4, 4, 125e6) == pytest.approx(30.0)
    assert switch_power_w(spec, 4, 4, 1e12) == pytest.approx(30.0)
    # ports alone above the peak: no traffic term, never negative
    wide = SwitchPower(port_w=1.0)
    assert switch_power_w(wide, 12, 12, 125e6) == pytest.approx(32.0)
    with pytest.raises(PowerError, match="active_ports"):
        switch_power_w(spec, 5, 4, 0.0)
    with pytest.raises(PowerError, match="bytes_per_s"):
        switch_power_w(spec, 1, 4, -1.0)


def test_busy_fraction() -> None:
    assert busy_fraction([0.4, 0.3, 0.3], 1) == pytest.approx(0.6)
    assert busy_fraction([0.5, 0.25, 0.25], 2) == pytest.approx(0.375)
    with pytest.raises(PowerError):
        busy_fraction([0.5, 0.2], 1)


def test_power_block_is_time_weighted() -> None:
    samples = [
        PowerSample(0.0, 1.0, "fn", "server", 100.0, utilization=0.2),
        PowerSample(1.0, 0.5, "fn", "server", 200.0, utilization=1.0),
        PowerSample(0.0, 1.0, "s1", "switch", 21.0, active_ports=2, ports=4, bytes_per_s=1e3),
        PowerSample(1.0, 0.5, "s1", "switch", 24.0, active_ports=4, ports=4, bytes_per_s=2e3),
    ]
    b = power_block(samples, answered=50)
    # fn: (100 * 1 + 200 * 0.5) / 1.5; s1: (21 + 12) / 1.5
    assert b["nodes"] == {"fn": pytest.approx(200.0 / 1.5)}
    assert b["switches"] == {"s1": pytest.approx(22.0)}
    assert b["total_W"] == pytest.approx(200.0 / 1.5 + 22.0)
    assert b["energy_J"] == pytest.approx(200.0 + 33.0)
    assert b["energy_per_request_J"] == pytest.approx(233.0 / 50)
    assert b["utilization"] == {"fn": pytest.approx((0.2 + 0.5) / 1.5)}
    assert math.isnan(power_block(samples, answered=0)["energy_per_request_J"])  # type: ignore[arg-type]
    text = power_csv_text(samples).splitlines()
    assert text[0] == "t_s,dt_s,element,kind,utilization,active_ports,ports,bytes_per_s,power_w"
    assert text[1] == "0.000,1.000000,fn,server,0.200000,,,,100.000000"
    assert text[2] == "0.000,1.000000,s1,switch,,2,4,1000.000000,21.000000"
    assert len(text) == 5


def _scenario(**over: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "p", "duration_ms": 1000, "time_scale": 5,
        "workload": {"lambda_hp": 0.3, "lambda_lp": 0.2, "clients": 2},
        "nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 4,
                   "power": {"idle_w": 50, "max_w": 150}}],
    }
    data.update(over)
    return data


def test_predicted_server_power_of_mm1k_by_hand() -> None:
    """One FN, basic scheme: M/M/1/4 with rho = 0.5, P(busy) = 1 - p0."""
    sc = parse_scenario(_scenario())
    pred = predict(model_params_from_scenario(sc))
    rho = 0.5
    p0 = (1 - rho) / (1 - rho ** 5)  # 16/31
    block = predicted_power_block(sc, pred)
    assert block["utilization"] == {"fn": pytest.approx(1 - p0)}
    assert block["nodes"] == {"fn": pytest.approx(50 + 100 * (1 - p0))}
    # one switch with 1 + 2 ports, all active; 0.5 req per model ms = 100 req/s at scale 5
    ports_w = 20 + 0.5 * 3
    traffic_w = (30 - 20 - 1.5) * (100 * 916 * 8 / 1e9)
    assert block["switches"] == {"s1": pytest.approx(ports_w + traffic_w)}


def test_power_fields_validated_with_one_line_errors() -> None:
    with pytest.raises(ScenarioError, match="max_w"):
        parse_scenario(_scenario(nodes=[{"name": "fn", "role": "fn", "mu": 1, "capacity": 2,
                                         "power": {"idle_w": 90, "max_w": 80}}]))
    with pytest.raises(ScenarioError, match="peak_w"):
        parse_scenario(_scenario(switch_power={"idle_w": 40}))
    sc = parse_scenario(_scenario())
    assert sc.switch_power == SwitchPower()
    assert sc.nodes[0].power == ServerPower(idle_w=50, max_w=150)


def test_simulator_account_bins_busy_time_and_traffic_by_real_second() -> None:
    from fogsdn.core.scenario import scenario_graph
    from fogsdn.sim.power import PowerAccount
    from fogsdn.sim.rows import BLOCKED, OK, TIMEOUT

    sc = parse_scenario(_scenario())  # time_scale 5: 200 model ms per real second
    acc = PowerAccount(sc, scenario_graph(sc))
    # answered: served 100..300 model ms = 0.5..1.5 real s; arrived at 50 (bin 0)
    acc([(300.0, OK, 0, 0, 0, 1.0, 50.0, 0, 200.0, 200.0),
         # blocked at 250 model ms (bin 1): traffic, no busy time
         (250.0, BLOCKED, 1, 1, 1, 1.0, 250.0, 0, math.nan, math.nan, ""),
         # timed out, but the node served it 340..380 model ms (bin 1)
         (350.0, TIMEOUT, 2, 1, 1, 1.0, 250.0, 0, 40.0, 40.0, "node finished at 380.000000")])
    s = acc.samples()
    assert [x.dt_s for x in s if x.kind == "server"] == [1.0, pytest.approx(0.9)]
    fn = [x for x in s if x.element == "fn"]
    assert fn[0].utilization == pytest.approx(0.5)
    assert fn[1].utilization == pytest.approx((0.5 + 0.2) / 0.9)
    assert fn[0].power_w == pytest.approx(100.0)  # 50 + 100 * 0.5
    sw = [x for x in s if x.element == "s1"]
    # bin 0: c1 sends to fn; bin 1: fn answers c1, c2's two requests come and go
    assert [x.active_ports for x in sw] == [2, 3]
    assert sw[0].bytes_per_s == pytest.approx(458.0)
    assert sw[1].bytes_per_s == pytest.approx(5 * 458.0 / 0.9)


def test_simulated_run_writes_power_close_to_exact(tmp_path: object) -> None:
    from pathlib import Path

    from fogsdn.sim.runner import run_simulation

    out = Path(str(tmp_path))
    sc = parse_scenario(_scenario(duration_ms=20000))
    summary = run_simulation(sc, out, trace=False)
    lines = (out / "power.csv").read_text().splitlines()
    seconds = math.ceil(summary["end_ms"] * 5 / 1000)
    assert len(lines) == 1 + 2 * seconds  # fn and s1 each second
    pw, exact = summary["power"], summary["predicted"]["power"]
    assert pw["energy_J"] == pytest.approx(pw["total_W"] * pw["duration_s"], rel=1e-3)
    assert abs(pw["servers_W"] - exact["servers_W"]) / exact["servers_W"] < 0.03


def test_policy_chain_busy_matches_the_closed_chain() -> None:
    """The policy chain's P(node busy) equals the closed chain's for a built-in scheme."""
    from conftest import ROOT

    from fogsdn.core.scenario import load_scenario
    from fogsdn.exact.policy_chain import predict_policy
    from fogsdn.measure.comparison import node_busy
    from fogsdn.policies import make_policy

    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    closed = node_busy(sc, predict(model_params_from_scenario(sc)))
    chain = node_busy(sc, predict_policy(sc, make_policy(sc.policy)))
    assert set(chain) == {"fn", "ofn1"}
    for name in chain:
        assert chain[name] == pytest.approx(closed[name], rel=1e-9)


def test_idle_ports_draw_their_low_power_figure_and_a_quiet_switch_sleeps() -> None:
    spec = SwitchPower(port_w=0.5, port_idle_w=0.1, sleep_w=4.0, port_hold_s=1.5)
    # 1 of 4 ports awake, no traffic: 20 + 0.5 + 3 x 0.1
    assert switch_power_w(spec, 1, 4, 0.0) == pytest.approx(20.8)
    assert switch_power_w(spec, 0, 4, 0.0) == pytest.approx(4.0)  # asleep
    assert switch_power_w(SwitchPower(port_idle_w=0.1), 0, 4, 0.0) == pytest.approx(20.4)
    assert hold_intervals(spec, 1.0) == 2  # 1.5 s: the two intervals before stay awake
    assert hold_intervals(SwitchPower(port_hold_s=2.0), 1.0) == 2
    assert hold_intervals(SwitchPower(), 1.0) == 0
    assert awake_ports([{"1"}, set(), {"2", "1"}]) == 2
    for bad, field in (({"port_idle_w": 0.6}, "port_idle_w"), ({"sleep_w": 25.0}, "sleep_w"),
                       ({"port_hold_s": -1.0}, "port_hold_s")):
        with pytest.raises(ValueError, match=field):
            SwitchPower(**bad)


def test_simulated_switch_sleeps_once_its_ports_have_been_quiet_for_the_hold(tmp_path) -> None:
    """Traffic in the first real second of every 7 (a profile with an idle phase): the
    switch keeps its ports awake for the hold (2 s) after the last request, sleeps, and
    wakes with the next busy phase."""
    from fogsdn.sim.runner import run_simulation

    sc = parse_scenario({
        "name": "sleepy", "seed": 2, "duration_ms": 7500, "warmup_ms": 0, "time_scale": 1,
        "deadline_ms": 30, "timeout_ms": 100,
        "workload": {"lambda_hp": 0.1, "lambda_lp": 0.1, "clients": 1,
                     "profile": {"phases": [{"duration_ms": 1000, "factor": 1.0},
                                            {"duration_ms": 6000, "factor": 0.0}]}},
        "nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20}],
        "churn": {"eta": 0.0, "xi": 1.0},
        "policy": {"name": "basic"},
        "switch_power": {"port_hold_s": 2.0, "port_idle_w": 0.1, "sleep_w": 3.0}})
    summary = run_simulation(sc, tmp_path / "s")
    rows = [ln.split(",") for ln in (tmp_path / "s" / "power.csv").read_text().splitlines()[1:]]
    sw = {float(r[0]): (int(r[5]), float(r[8])) for r in rows if r[3] == "switch"}
    assert sw[0.0][0] == 2  # the client's and the FN's ports carry requests
    assert sw[2.0][0] == 2  # held awake: the last requests ended in second 0 or 1
    assert sw[4.0] == sw[5.0] == sw[6.0] == (0, pytest.approx(3.0))  # asleep
    assert sw[7.0][0] == 2  # the next busy phase wakes it
    assert summary["power"]["switches"]["s1"] < 20.0


@pytest.mark.parametrize("overrides", [
    {},  # answered and blocked; busy intervals across second boundaries
    {"nodes.fn.servers": "multi", "timeout_ms": 20.0},  # timed out once the node finished
    {"churn.leave": "drop", "timeout_ms": 15.0, "time_scale": 50.0},  # lost; long intervals
])
def test_simulator_account_by_columns_is_the_row_by_row_one(
        overrides: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """The account takes a batch as columns; its sums are the row-at-a-time loop's, to
    the last bit (each second's busy time is added a piece at a time, in row order)."""
    from pathlib import Path

    from fogsdn.core.scenario import load_scenario, scenario_graph
    from fogsdn.sim.engine import simulate
    from fogsdn.sim.power import PowerAccount

    sc = load_scenario(Path(__file__).resolve().parent.parent / "scenarios" / "default.yaml")
    sc = sc.with_overrides(overrides)
    batches: list[list[tuple[object, ...]]] = []
    simulate(sc, batches.append, requests=30_000)
    by_columns, by_rows = PowerAccount(sc, scenario_graph(sc)), PowerAccount(sc, scenario_graph(sc))
    monkeypatch.setattr(by_rows, "_batch", by_rows._one_by_one)
    for b in batches:
        by_columns(b)
        by_rows(b)
    assert by_columns.busy == by_rows.busy
    assert by_columns.traffic == by_rows.traffic
    assert by_columns.active == by_rows.active
    assert by_columns.end_s == by_rows.end_s
    assert power_csv_text(by_columns.samples()) == power_csv_text(by_rows.samples())
