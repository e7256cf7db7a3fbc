"""cbench-style controller benchmark: our os-ken app beside a minimal learning switch.

Why: every packet-in costs the Python controller about a millisecond and a cluster
change must reach the switch quickly, so both are measured side by side with a
yardstick: the reactive path (ARP PACKET_INs from fake switches) and rule updates
(OFN leave/join to barrier reply). Method: docs/benchmarks.md.

    .venv/bin/python scripts/bench_controller.py [--duration 4] [--switches 4] [--window 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fogsdn.controller.config import ControllerConfig
from fogsdn.controller.launch import start_controller
from fogsdn.controller.registration import register
from fogsdn.core.fabric import Fabric
from fogsdn.core.scenario import Role, load_scenario, scenario_graph
from fogsdn.core.topology import fabric_of
from fogsdn.live.proc_memory import cpu_seconds
from fogsdn.live.supervisor import free_port
from tools.bench.common import ROOT
from tools.rigs.fake_switch import (
    T_FLOW_MOD,
    T_GROUP_MOD,
    FakeSwitch,
    Tally,
    connect,
    fleet,
    probe,
)

SCENARIO = ROOT / "scenarios" / "default.yaml"
BASELINE_APP = "tools.bench.apps.simple_switch_13"
CONTROLLERS: tuple[tuple[str, str | None], ...] = (("ours", None), ("baseline", BASELINE_APP))
OVS_BRIDGE = "fzbench0"
START_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 2.0
UPDATE_WARMUP = 10  # unmeasured registrations before each rule-update series
MAX_SWITCHES = 255  # the switch index is one byte of the requester MAC


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no samples."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))]


@dataclass(frozen=True)
class PhaseResult:
    controller: str
    mode: str
    switches: int
    window: int
    sent: int
    answered: int
    lost: int
    misrouted: int
    flow_mods: int
    measured_s: float
    responses_per_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    gen_cpu: float  # this process's CPU share while measuring (1.0: the generator saturated)
    ctl_cpu: float  # the controller's CPU share while measuring (NaN: unknown)


async def _phase(controller: str, mode: str, switches: list[FakeSwitch], tally: Tally,
                 window: int, duration_s: float, warmup_s: float,
                 limit: int | None, ctl_pid: int | None) -> PhaseResult:
    """One mode: keep `window` packet-ins outstanding per switch; measure after warm-up."""
    tally.reset()
    tally.limit = limit
    flow_mods0 = sum(sw.received[T_FLOW_MOD] for sw in switches)
    for sw in switches:
        sw.sent = 0
    tally.replenish = True
    t0 = time.perf_counter()
    tally.t_measure = t0 + warmup_s
    for sw in switches:
        sw.send_packet_ins(window if limit is None else min(window, limit))
    if limit is None:
        await asyncio.sleep(warmup_s)
        gen0, ctl0, w0 = time.process_time(), cpu_seconds(ctl_pid), time.perf_counter()
        await asyncio.sleep(duration_s)
    else:
        gen0, ctl0, w0 = time.process_time(), cpu_seconds(ctl_pid), time.perf_counter()
        total, deadline = limit * len(switches), t0 + warmup_s + duration_s
        while (tally.sent < total or tally.outstanding) and time.perf_counter() < deadline:
            await asyncio.sleep(0.002)
    t_stop = time.perf_counter()
    tally.t_stop = t_stop
    wall = max(t_stop - w0, 1e-9)
    gen_cpu, ctl_cpu = (time.process_time() - gen0) / wall, (cpu_seconds(ctl_pid) - ctl0) / wall
    tally.replenish = False
    deadline = t_stop + DRAIN_TIMEOUT_S
    while tally.outstanding and time.perf_counter() < deadline:
        await asyncio.sleep(0.002)
    lost = len(tally.outstanding)
    tally.outstanding.clear()
    measured = max(t_stop - tally.t_measure, 1e-9)
    lat = tally.latencies_ms
    return PhaseResult(
        controller, mode, len(switches), window, tally.sent, tally.answered, lost,
        tally.misrouted, sum(sw.received[T_FLOW_MOD] for sw in switches) - flow_mods0,
        measured, tally.in_window / measured, percentile(lat, 50), percentile(lat, 99),
        sum(lat) / len(lat) if lat else math.nan, gen_cpu, ctl_cpu)


async def bench_packet_ins(port: int, fabric: Fabric, controller: str, switches: int,
                           modes: Sequence[tuple[str, int]], duration_s: float,
                           warmup_s: float, limit: int | None = None,
                           ctl_pid: int | None = None) -> list[PhaseResult]:
    """Connect `switches` fake switches to the controller on `port`, run each (mode, window)."""
    if not 1 <= switches <= MAX_SWITCHES:
        raise ValueError(f"switches: 1..{MAX_SWITCHES}, got {switches}")
    sws = fleet(fabric, switches)
    try:
        for sw in sws:
            await connect(sw, port, START_TIMEOUT_S)
        await asyncio.wait_for(asyncio.gather(*(sw.handshaken.wait() for sw in sws)),
                               START_TIMEOUT_S)
        for sw in sws:
            await probe(sw)  # the datapath is in MAIN_DISPATCHER and the app answers
            sw.send_learn_seed()
            await probe(sw)  # ... and has processed the seed (same connection, in order)
        return [await _phase(controller, mode, sws, sws[0].tally, window, duration_s, warmup_s,
                             limit, ctl_pid)
                for mode, window in modes]
    finally:
        for sw in sws:
            sw.close()


def run_packet_in_bench(port: int, fabric: Fabric, controller: str, switches: int,
                        modes: Sequence[tuple[str, int]], duration_s: float, warmup_s: float,
                        limit: int | None = None, ctl_pid: int | None = None
                        ) -> list[PhaseResult]:
    """Synchronous entry point of `bench_packet_ins`."""
    return asyncio.run(bench_packet_ins(port, fabric, controller, switches, modes, duration_s,
                                        warmup_s, limit, ctl_pid))


# -- rule updates ---------------------------------------------------------------------------
@dataclass(frozen=True)
class UpdateResult:
    target: str
    updates: int
    acked: int
    group_mods: int  # -1 where not observed (a real switch)
    rtt_p50_ms: float
    rtt_p99_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    errors: tuple[str, ...] = ()


def warm_up(registration: Path, node: str, count: int, available: bool = True) -> None:
    """Unmeasured leave/join pairs (the first ones after start-up are slower); ends as begun."""
    for _ in range((count + 1) // 2):
        register(registration, node, not available)
        register(registration, node, available)


def rule_updates(target: str, registration: Path, node: str, count: int,
                 start_available: bool = True) -> UpdateResult:
    """Alternate leave/join of `node` `count` times; each waits for the barrier reply."""
    up = not start_available
    rtts: list[float] = []
    lats: list[float] = []
    errors: list[str] = []
    acked = 0
    for _ in range(count):
        t0 = time.monotonic()
        reply = register(registration, node, up)
        rtts.append((time.monotonic() - t0) * 1000.0)
        if reply.get("installed") is True:
            acked += 1
        elif len(errors) < 5:
            errors.append(json.dumps(reply))
        if "latency_ms" in reply:
            latency = reply["latency_ms"]
            assert isinstance(latency, int | float), reply  # a JSON number
            lats.append(float(latency))
        up = not up
    return UpdateResult(target, count, acked, -1, percentile(rtts, 50), percentile(rtts, 99),
                        percentile(lats, 50), percentile(lats, 99), tuple(errors))


def _wait_ready(ctl: ControllerRun) -> None:
    """Until the controller writes its ready file; an error if it says anything else."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ctl.proc.poll() is not None:
            raise RuntimeError(f"controller exited (rc {ctl.proc.returncode}) before "
                               f"{ctl.ready.name}")
        if ctl.ready.exists() and (text := ctl.ready.read_text().strip()):
            if text != "ready":
                raise RuntimeError(f"controller: {text}")
            return
        time.sleep(0.02)
    raise TimeoutError(f"no {ctl.ready.name} within {START_TIMEOUT_S:.0f} s")


async def _fake_rule_updates(ctl: ControllerRun, fabric: Fabric, node: str, count: int,
                             warmup: int) -> UpdateResult:
    (sw,) = fleet(fabric, 1)
    ctl.ready.unlink(missing_ok=True)  # a ready file from an earlier switch would lie
    try:
        await connect(sw, ctl.port, START_TIMEOUT_S)
        await asyncio.to_thread(_wait_ready, ctl)
        await asyncio.to_thread(warm_up, ctl.registration, node, warmup)
        g0 = sw.received[T_GROUP_MOD]
        res = await asyncio.to_thread(rule_updates, "fake switch", ctl.registration, node, count)
        return replace(res, group_mods=sw.received[T_GROUP_MOD] - g0)
    finally:
        sw.close()


def run_fake_rule_updates(ctl: ControllerRun, fabric: Fabric, node: str, count: int,
                          warmup: int = 0) -> UpdateResult:
    """Rule updates against our controller driving one fake switch."""
    return asyncio.run(_fake_rule_updates(ctl, fabric, node, count, warmup))


def _ovs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ovs-vsctl", "--timeout=10", *args], capture_output=True, text=True)


def ovs_unusable() -> str | None:
    """Why a real OVS bridge cannot be used here, or None."""
    if shutil.which("ovs-vsctl") is None:
        return "ovs-vsctl not found"
    if os.geteuid() != 0:
        return "not root"
    if _ovs("show").returncode != 0:
        return "ovs-vsctl show failed (ovsdb-server/ovs-vswitchd not running?)"
    if _ovs("br-exists", OVS_BRIDGE).returncode == 0:
        return f"bridge {OVS_BRIDGE} already exists (another benchmark running?)"
    return None


def ovs_rule_updates(workdir: Path, fabric: Fabric, node: str, count: int,
                     warmup: int = 0) -> UpdateResult:
    """Rule updates against our controller driving a userspace OVS bridge (removed after)."""
    with running_controller(workdir, "ours-ovs", fabric) as ctl:
        try:
            r = _ovs("add-br", OVS_BRIDGE, "--", "set", "bridge", OVS_BRIDGE,
                     "datapath_type=netdev", "protocols=OpenFlow13", "fail-mode=secure",
                     "--", "set-controller", OVS_BRIDGE, f"tcp:127.0.0.1:{ctl.port}")
            if r.returncode != 0:
                raise RuntimeError(f"ovs-vsctl add-br: {r.stderr.strip()}")
            _wait_ready(ctl)
            warm_up(ctl.registration, node, warmup)
            res = rule_updates("real OVS", ctl.registration, node, count)
        finally:
            _ovs("--if-exists", "del-br", OVS_BRIDGE)
        of_errors = [ln for ln in ctl.events.read_text().splitlines() if '"of_error"' in ln]
        if of_errors:
            res = replace(res, errors=(*res.errors, *of_errors[:3]))
        return res


# -- controller processes -------------------------------------------------------------------
@dataclass(frozen=True)
class ControllerRun:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    registration: Path
    ready: Path
    events: Path
    log: Path


def bench_fabric() -> tuple[Fabric, str]:
    """The default scenario's fog star (ports 1..n) and the OFN that leaves and joins."""
    sc = load_scenario(SCENARIO)
    ofn = next(n.name for n in sc.nodes if n.role is Role.OFN)
    return fabric_of(scenario_graph(sc)), ofn


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started, by its PID: terminate, then kill."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(3.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(3.0)


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


@contextmanager
def running_controller(workdir: Path, name: str, fabric: Fabric,
                       app: str | None = None) -> Iterator[ControllerRun]:
    """Start `fogsdn.controller.main` (our app, or `app`) on a free port; always stop it after."""
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    conf = ControllerConfig(fabric=fabric, scenario=SCENARIO, events=d / "events.jsonl",
                            ready=d / "ready", registration=d / "reg.sock",
                            available={h.name: True for h in fabric.workers()})
    port = free_port()
    log_path = d / "controller.log"
    proc = start_controller(conf, d / "controller.json", port, log_path,
                            apps=() if app is None else (app,))
    try:
        yield ControllerRun(name, port, proc, conf.registration, conf.ready, conf.events, log_path)
    except BaseException:
        if tail := _tail(log_path):
            print(f"--- {name} controller log (tail) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        _stop(proc)


# -- report ---------------------------------------------------------------------------------
def _f(x: float, nd: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:.{nd}f}"


def format_report(phases: Sequence[PhaseResult], updates: Sequence[UpdateResult],
                  skipped: Sequence[str]) -> str:
    lines = ["Reactive path (PACKET_IN -> PACKET_OUT), fake OpenFlow 1.3 switches",
             f"{'controller':<10} {'mode':<11} {'sw':>3} {'win':>4} {'sent':>7} {'answered':>8} "
             f"{'lost':>5} {'misrouted':>9} {'flow_mods':>9} {'resp/s':>9} {'p50 ms':>7} "
             f"{'p99 ms':>7} {'gen cpu':>7} {'ctl cpu':>7}"]
    for r in phases:
        lines.append(f"{r.controller:<10} {r.mode:<11} {r.switches:>3} {r.window:>4} "
                     f"{r.sent:>7} {r.answered:>8} {r.lost:>5} {r.misrouted:>9} "
                     f"{r.flow_mods:>9} {r.responses_per_s:>9.0f} {_f(r.p50_ms):>7} "
                     f"{_f(r.p99_ms):>7} {_f(r.gen_cpu):>7} {_f(r.ctl_cpu):>7}")
    by = {(r.controller, r.mode): r for r in phases}
    for mode in dict.fromkeys(r.mode for r in phases):
        o, b = by.get(("ours", mode)), by.get(("baseline", mode))
        if o and b:
            rate = o.responses_per_s / max(b.responses_per_s, 1e-9)
            lines.append(f"ratio ours/baseline, {mode}: resp/s x{rate:.2f}, "
                         f"p50 x{o.p50_ms / b.p50_ms:.2f}, p99 x{o.p99_ms / b.p99_ms:.2f}")
    if updates:
        lines += ["", "Rule update (OFN leave/join registration -> barrier reply), our controller",
                  f"{'target':<12} {'updates':>7} {'acked':>6} {'group_mods':>10} "
                  f"{'rtt p50':>8} {'rtt p99':>8} {'lat p50':>8} {'lat p99':>8}  (ms)"]
        for u in updates:
            gm = "-" if u.group_mods < 0 else str(u.group_mods)
            lines.append(f"{u.target:<12} {u.updates:>7} {u.acked:>6} {gm:>10} "
                         f"{_f(u.rtt_p50_ms):>8} {_f(u.rtt_p99_ms):>8} "
                         f"{_f(u.latency_p50_ms):>8} {_f(u.latency_p99_ms):>8}")
            lines += [f"  error: {e}" for e in u.errors]
    lines += [f"skipped: {s}" for s in skipped]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=4.0,
                    help="measured seconds per controller and mode (default 4)")
    ap.add_argument("--warmup", type=float, default=0.5,
                    help="unmeasured seconds before each mode (default 0.5)")
    ap.add_argument("--switches", type=int, default=4, help="fake switches (default 4)")
    ap.add_argument("--window", type=int, default=32,
                    help="outstanding PACKET_INs per switch in throughput mode (default 32)")
    ap.add_argument("--updates", type=int, default=200,
                    help="leave/join registrations per rule-update target (default 200)")
    ap.add_argument("--no-ovs", action="store_true", help="skip the real OVS bridge")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)
    if not 1 <= a.switches <= MAX_SWITCHES or a.window < 1 or a.duration <= 0:
        ap.error(f"need 1 <= --switches <= {MAX_SWITCHES}, --window >= 1, --duration > 0")

    cmdline = shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(argv)
    print(f"command: {cmdline}", flush=True)
    fabric, ofn = bench_fabric()
    modes = [("latency", 1), ("throughput", a.window)]
    phases: list[PhaseResult] = []
    updates: list[UpdateResult] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fzbench-") as tmp:
        work = Path(tmp)
        for name, app in CONTROLLERS:
            print(f"packet-ins: {name} ...", flush=True)
            with running_controller(work, name, fabric, app) as ctl:
                phases += run_packet_in_bench(ctl.port, fabric, name, a.switches, modes,
                                              a.duration, a.warmup, None, ctl.proc.pid)
        print("rule updates: fake switch ...", flush=True)
        with running_controller(work, "ours-updates", fabric) as ctl:
            updates.append(run_fake_rule_updates(ctl, fabric, ofn, a.updates, UPDATE_WARMUP))
        why = "--no-ovs" if a.no_ovs else ovs_unusable()
        if why is None:
            print(f"rule updates: real OVS bridge {OVS_BRIDGE} ...", flush=True)
            updates.append(ovs_rule_updates(work, fabric, ofn, a.updates, UPDATE_WARMUP))
        else:
            skipped.append(f"rule updates on real OVS: {why}")
    print()
    print(format_report(phases, updates, skipped))
    if a.json:
        a.json.write_text(json.dumps({"command": cmdline,
                                      "packet_in": [asdict(r) for r in phases],
                                      "rule_update": [asdict(u) for u in updates],
                                      "skipped": skipped}, indent=1))
    ok = all(r.lost == 0 for r in phases) and all(u.acked == u.updates for u in updates)
    return 0 if ok else 1

