"""The live power meter's parsing and arithmetic, with fake readers (no OVS needed)."""

from __future__ import annotations

import pytest

from fogsdn.core.scenario import NodeSpec, Role, ServerPower, SwitchPower
from fogsdn.live.power_meter import (
    LivePowerMeter,
    PortCounters,
    moved_ports,
    parse_dump_ports,
    switch_sample,
)

DUMP = """OFPST_PORT reply (OF1.3) (xid=0x2): 3 ports
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
           duration=12.345s
  port  1: rx pkts=10, bytes=1500, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=12, bytes=2000, drop=0, errs=0, coll=0
           duration=12.340s
  port  2: rx pkts=7, bytes=700, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=5, bytes=500, drop=0, errs=0, coll=0
           duration=12.340s
"""


def test_parse_dump_ports_skips_local() -> None:
    assert parse_dump_ports(DUMP) == {"1": PortCounters(10, 1500, 12, 2000),
                                      "2": PortCounters(7, 700, 5, 500)}


def test_switch_sample_counts_moved_ports_and_received_bytes() -> None:
    before = parse_dump_ports(DUMP)
    after = {"1": PortCounters(20, 2500, 22, 3000), "2": PortCounters(7, 700, 5, 500)}
    s = switch_sample(SwitchPower(), "s1", 3.0, 0.5, before, after)
    assert (s.active_ports, s.ports) == (1, 2)
    assert s.bytes_per_s == pytest.approx(2000.0)  # 1000 bytes received in 0.5 s
    assert s.power_w == pytest.approx(20 + 0.5 + 9 * 2000 * 8 / 1e9)


def test_meter_turns_busy_time_into_samples() -> None:
    clock = {"t": 10.0, "busy": 0.0, "ports": 0}

    def busy(name: str) -> tuple[float, float]:
        return clock["t"], clock["busy"]

    def ports(bridge: str) -> dict[str, PortCounters]:
        n = int(clock["ports"])
        return {"1": PortCounters(n, 100 * n, n, 100 * n)}

    node = NodeSpec(name="fn", role=Role.FN, mu=1, capacity=4,
                    power=ServerPower(idle_w=10, max_w=20))
    m = LivePowerMeter({"fn": (node, 1)}, {"s1": "brx"}, SwitchPower(), busy, epoch=10.0,
                       read_ports=ports)
    m._read_all(first=True)
    clock.update(t=11.0, busy=0.25, ports=5)
    m._read_all(first=False)
    clock.update(t=12.0, busy=1.25)  # fully busy, no traffic
    m._read_all(first=False)
    fn = [s for s in m.samples if s.kind == "server"]
    assert [s.t_s for s in fn] == [0.0, 1.0]
    assert [s.utilization for s in fn] == [pytest.approx(0.25), pytest.approx(1.0)]
    assert [s.power_w for s in fn] == [pytest.approx(12.5), pytest.approx(20.0)]
    sw = [s for s in m.samples if s.kind == "switch"]
    assert [s.active_ports for s in sw] == [1, 0]


def test_a_dead_worker_counts_as_an_idle_machine() -> None:
    calls = {"n": 0}

    def busy(name: str) -> tuple[float, float]:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError("connection refused")
        return 0.0, 0.0

    node = NodeSpec(name="fn", role=Role.FN, mu=1, capacity=4,
                    power=ServerPower(idle_w=10, max_w=20))
    m = LivePowerMeter({"fn": (node, 1)}, {}, SwitchPower(), busy, epoch=0.0)
    m._read_all(first=True)
    m._read_all(first=False)
    [s] = m.samples
    assert s.utilization == 0.0 and s.power_w == pytest.approx(10.0)
    assert m.errors and "connection refused" in m.errors[0]


def test_a_port_stays_awake_for_the_hold_then_idles_and_the_switch_sleeps() -> None:
    spec = SwitchPower(port_hold_s=1.0, port_idle_w=0.1, sleep_w=2.0)
    quiet = {"1": PortCounters(5, 500, 5, 500), "2": PortCounters(5, 500, 5, 500)}
    # nothing moved now, port 1 moved one interval ago: it is held awake
    held = switch_sample(spec, "s1", 2.0, 1.0, quiet, quiet, earlier_active=[{"1"}])
    assert held.active_ports == 1 and held.power_w == pytest.approx(20 + 0.5 + 0.1)
    asleep = switch_sample(spec, "s1", 3.0, 1.0, quiet, quiet, earlier_active=[set()])
    assert asleep.active_ports == 0 and asleep.power_w == pytest.approx(2.0)
    moved = {"1": PortCounters(6, 600, 5, 500), "2": PortCounters(5, 500, 5, 500)}
    assert moved_ports(quiet, moved) == {"1"}
