"""Link benchmark: how exactly the link element delays, jitters and drops, and how fast it is.

Every multi-switch run leans on the link element, so each section (delay, jitter_loss,
throughput, reroute, startup) measures it beside a plain veth or plain Mininet: method in
docs/benchmarks.md, figures in docs/links.md and docs/topologies.md. Needs root.

    flock /tmp/fogsdn-emulation.lock .venv/bin/python scripts/bench_links.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fogsdn.live.proc_memory import cpu_seconds
from fogsdn.measure.metrics import p50_p99
from fogsdn.netem.hop_probe import HopChain
from fogsdn.netem.link_params import LinkParams
from fogsdn.netem.linkem import LinkShaper, choose_mechanism, make_shaper
from tools.bench.topology import reroute_section, startup_section
from tools.rigs.linkem_testnet import Rig, namespace_rig, ping_rtts, tcp_transfer, udp_rtts

DELAYS_MS = (1.0, 5.0, 20.0, 50.0)
LINK = "bench"


@dataclass
class BenchContext:
    mechanism: str
    state_dir: Path
    pings: int
    interval_ms: float
    seconds: float
    failures: int = 100  # reroute: link failures per variant


def _rtt_figures(rig: Rig, ctx: BenchContext) -> dict[str, float]:
    """Round trips by ping (the headline) and by our UDP echo, both SCHED_FIFO."""
    icmp = ping_rtts(rig, ctx.pings, ctx.interval_ms / 1e3, realtime=True)
    udp = udp_rtts(rig, ctx.pings, ctx.interval_ms, realtime=True)["rtt_ms"]
    i, u = p50_p99(icmp, 4), p50_p99(udp, 4)
    return {"rtt_ms_p50": i["p50"], "rtt_ms_p99": i["p99"], "replies": len(icmp),
            "udp_rtt_ms_p50": u["p50"], "udp_rtt_ms_p99": u["p99"], "udp_replies": len(udp)}


def _say_rtt(label: str, f: dict[str, float], more: str = "") -> None:
    print(f"  {label:<15} RTT p50 {f['rtt_ms_p50']:8.3f} ms  p99 {f['rtt_ms_p99']:8.3f}  "
          f"(UDP echo p50 {f['udp_rtt_ms_p50']:.3f}){more}", flush=True)


def _relay_pid(shaper: LinkShaper) -> int | None:
    pids = shaper.created().pids
    return next(iter(pids.values()))[0] if pids else None


@contextmanager
def _shaped(ctx: BenchContext, params: LinkParams, seed: int = 0
            ) -> Iterator[tuple[Rig, LinkShaper]]:
    """The namespace rig with the element attached at `params`, closed after."""
    with namespace_rig() as rig:
        assert rig.intf_a and rig.intf_b
        shaper = make_shaper(ctx.mechanism, ctx.state_dir, seed)
        try:
            shaper.attach(LINK, rig.intf_a, rig.intf_b, params)
            yield rig, shaper
        finally:
            shaper.close()


def delay_section(ctx: BenchContext) -> dict[str, Any]:
    """Configured vs measured RTT; baseline: a plain veth, and the element at 0 ms."""
    with namespace_rig(spliced=False) as rig:
        baseline = _rtt_figures(rig, ctx)
    _say_rtt("plain veth", baseline)
    rows: list[dict[str, Any]] = []
    with _shaped(ctx, LinkParams()) as (rig, shaper):
        pid = _relay_pid(shaper)
        cpu0, t0 = (cpu_seconds(pid) if pid else 0.0), time.monotonic()
        zero = _rtt_figures(rig, ctx)
        _say_rtt("element, 0 ms", zero)
        for d in DELAYS_MS:
            shaper.update(LINK, LinkParams(delay_ms=d))
            f = _rtt_figures(rig, ctx)
            rtt = 2 * d
            tol = max(0.2, 0.02 * rtt)
            row = {"configured_ms": d, "configured_rtt_ms": rtt, **f,
                   "error_ms_p50": round(f["rtt_ms_p50"] - rtt, 4),
                   "udp_error_ms_p50": round(f["udp_rtt_ms_p50"] - rtt, 4),
                   "udp_excess_over_baseline_ms_p50":
                       round(f["udp_rtt_ms_p50"] - rtt - baseline["udp_rtt_ms_p50"], 4),
                   "ratio_p50": round(f["rtt_ms_p50"] / rtt, 5),
                   "tolerance_ms": tol,
                   "within_target": abs(f["rtt_ms_p50"] - rtt) <= tol}
            rows.append(row)
            _say_rtt(f"one-way {d:5.1f} ms", f,
                     f"  configured {rtt:.1f}, error {row['error_ms_p50']:+.3f} ms "
                     f"(target +-{tol:.2f}: {'met' if row['within_target'] else 'MISSED'})")
        # pings every few ms: the cost of waking (and spinning) for sparse frames
        light = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) if pid else None
    if light is not None:
        print(f"  relay CPU under this light traffic: {light:.3f} cores", flush=True)
    return {"delay": rows, "baseline": baseline, "element_zero_delay": zero,
            "relay_cpu_cores_light_traffic": None if light is None else round(light, 4)}


def jitter_loss_section(ctx: BenchContext) -> dict[str, Any]:
    """RTT spread under +-1 ms jitter at 5 ms, and loss at 5 % per direction."""
    delay, jitter, loss = 5.0, 1.0, 0.05
    count, interval = max(ctx.pings, 1000), 2.0  # 2 ms apart: jitter cannot reorder them
    with _shaped(ctx, LinkParams(delay_ms=delay, jitter_ms=jitter), seed=1) as (rig, shaper):
        rtts = udp_rtts(rig, count, interval, realtime=True)["rtt_ms"]
        icmp = ping_rtts(rig, count, interval / 1e3, realtime=True)
        shaper.update(LINK, LinkParams(delay_ms=delay, loss=loss))
        before = shaper.stats(LINK)
        lossy = udp_rtts(rig, count, interval, realtime=True)
        stats = {k: v - before.get(k, 0) for k, v in shaper.stats(LINK).items()}
    # the RTT is triangular on 2*delay +- 2*jitter (docs/benchmarks.md, jitter_loss)
    half_width = jitter * (2 - math.sqrt(0.4))
    out_j = {"delay_ms": delay, "configured_jitter_ms": jitter,
             **{f"rtt_ms_p{q}": round(float(np.percentile(rtts, q)), 4) for q in (5, 50, 95)},
             "expected_rtt_ms_p5_p50_p95": [round(2 * delay - half_width, 4), 2 * delay,
                                            round(2 * delay + half_width, 4)],
             "icmp_rtt_ms_p5_p50_p95": [round(float(np.percentile(icmp, q)), 4)
                                        for q in (5, 50, 95)],
             "rtt_std_ms": round(float(np.std(rtts)), 4),
             "expected_rtt_std_ms": round(jitter * math.sqrt(2 / 3), 4),
             "rtt_ms_min": round(min(rtts), 4), "rtt_ms_max": round(max(rtts), 4),
             "expected_rtt_range_ms": [2 * (delay - jitter), 2 * (delay + jitter)]}
    out_l: dict[str, Any] = {"configured": loss, "probes": count,
                             "round_trip_expected": round(1 - (1 - loss) ** 2, 5),
                             "round_trip_measured": round(lossy["lost"] / count, 5)}
    if "ab_dropped_loss" in stats and stats["ab_rx_packets"]:
        out_l["per_direction_measured"] = round(
            (stats["ab_dropped_loss"] + stats["ba_dropped_loss"])
            / (stats["ab_rx_packets"] + stats["ba_rx_packets"]), 5)
    print(f"  jitter +-{jitter} ms at {delay} ms: RTT p5/p50/p95 {out_j['rtt_ms_p5']:.3f} / "
          f"{out_j['rtt_ms_p50']:.3f} / {out_j['rtt_ms_p95']:.3f} ms (expected "
          f"{' / '.join(f'{x:.3f}' for x in out_j['expected_rtt_ms_p5_p50_p95'])}; ping "
          f"{' / '.join(f'{x:.2f}' for x in out_j['icmp_rtt_ms_p5_p50_p95'])}); std "
          f"{out_j['rtt_std_ms']:.3f} (expected {out_j['expected_rtt_std_ms']:.3f}); range "
          f"{out_j['rtt_ms_min']:.3f}..{out_j['rtt_ms_max']:.3f} "
          f"(expected {out_j['expected_rtt_range_ms']})", flush=True)
    print(f"  loss {loss:.0%} per direction: round trips lost {out_l['round_trip_measured']:.2%}"
          f" (expected {out_l['round_trip_expected']:.2%}), per direction "
          f"{out_l.get('per_direction_measured', math.nan):.2%}", flush=True)
    return {"jitter": out_j, "loss": out_l}


def throughput_section(ctx: BenchContext) -> dict[str, Any]:
    """TCP through one 5 ms link, the relay's CPU, and a 100 Mbit/s cap; plain veth beside."""
    delay, cap = 5.0, 100.0
    with namespace_rig(spliced=False) as rig:
        with tcp_transfer(rig, ctx.seconds) as plain:
            pass
    out: dict[str, Any] = {"throughput_delay_ms": delay,
                           "baseline_throughput_mbps": round(plain.get("mbps", math.nan), 1)}
    with _shaped(ctx, LinkParams(delay_ms=delay)) as (rig, shaper):
        pid = _relay_pid(shaper)
        cpu0, t0 = (cpu_seconds(pid) if pid else 0.0), time.monotonic()
        with tcp_transfer(rig, ctx.seconds) as t:
            pass
        cores = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) if pid else None
        st = shaper.stats(LINK)
        shaper.update(LINK, LinkParams(delay_ms=delay, bw_mbps=cap))
        with tcp_transfer(rig, ctx.seconds) as capped:
            pass
    mbps = t.get("mbps", math.nan)
    out.update({
        "throughput_mbps": round(mbps, 1),
        "relay_cpu_cores": None if cores is None else round(cores, 3),
        "mean_frame_bytes": round(st["ab_tx_bytes"] / max(st["ab_tx_packets"], 1)),
        "cpu_ms_per_s_per_mbps": None if cores is None else round(1000 * cores / mbps, 4),
        "capped": {"bw_mbps": cap, "throughput_mbps": round(capped.get("mbps", math.nan), 1),
                   "ratio": round(capped.get("mbps", math.nan) / cap, 4)},
    })
    cpu = ("kernel (netem)" if cores is None else
           f"relay {cores:.2f} cores = {out['cpu_ms_per_s_per_mbps']:.3f} CPU-ms/s per Mbit/s")
    print(f"  TCP through {delay} ms: {mbps:.0f} Mbit/s ({cpu}); plain veth "
          f"{out['baseline_throughput_mbps']:.0f} Mbit/s; capped at {cap:.0f}: "
          f"{out['capped']['throughput_mbps']:.1f} Mbit/s", flush=True)
    return out


@contextmanager
def _cpu_hogs(count: int) -> Iterator[None]:
    """`count` busy loops at ordinary priority, as a loaded run's processes are."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def hop_cost_section(ctx: BenchContext) -> dict[str, Any]:
    """The emulator's cost per hop (an element and a bridge, one way) as a run measures
    it (fogsdn.netem.hop_probe), on the quiet machine and beside 1 and 2 busy loops,
    alternated, five times each."""
    chain = HopChain("fzbench", ctx.mechanism, ctx.state_dir, lambda _res: None).open()
    runs: dict[str, list[float]] = {"quiet": [], "1 hog": [], "2 hogs": []}
    try:
        for _ in range(5):
            for label, hogs in (("quiet", 0), ("1 hog", 1), ("2 hogs", 2)):
                with _cpu_hogs(hogs):
                    time.sleep(0.5)
                    runs[label].append(chain.measure(ctx.pings).per_hop_ms)
    finally:
        chain.close()
    median = {label: round(float(np.median(v)), 4) for label, v in runs.items()}
    each = {label: [round(x, 4) for x in v] for label, v in runs.items()}
    for label in runs:
        print(f"  {label:<7} cost per hop {median[label]:.3f} ms real one way "
              f"(runs: {', '.join(f'{x:.3f}' for x in each[label])})", flush=True)
    return {"hop_cost": {label: {"per_hop_real_ms_median": median[label],
                                 "per_hop_real_ms": each[label]} for label in runs}}


SECTIONS: dict[str, Callable[[BenchContext], dict[str, Any]]] = {
    "hop_cost": hop_cost_section,
    "delay": delay_section,
    "jitter_loss": jitter_loss_section,
    "throughput": throughput_section,
    "reroute": reroute_section,
    "startup": startup_section,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--mechanism", default="auto", choices=["auto", "netem", "userspace"])
    ap.add_argument("--pings", type=int, default=200, help="probes per delay (default 200)")
    ap.add_argument("--interval-ms", type=float, default=5.0, help="between probes (default 5)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per TCP transfer (default 5)")
    ap.add_argument("--failures", type=int, default=100,
                    help="reroute: link failures (default 100; fewer while iterating)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated, of {', '.join(SECTIONS)}")
    a = ap.parse_args(argv)
    names = [s for s in a.sections.split(",") if s]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    if a.pings < 10 or a.interval_ms <= 0 or a.seconds <= 0 or a.failures < 1:
        ap.error("need --pings >= 10, --interval-ms > 0, --seconds > 0, --failures >= 1")
    if os.geteuid() != 0:
        sys.exit("bench_links: needs root (network namespaces, raw sockets)")
    mechanism = choose_mechanism(a.mechanism)
    print(f"command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    print(f"mechanism: {mechanism}", flush=True)
    result: dict[str, Any] = {"mechanism": mechanism, "cpus": os.cpu_count(),
                              "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3]}
    with tempfile.TemporaryDirectory(prefix="fogsdn-bench-links-") as tmp:
        ctx = BenchContext(mechanism, Path(tmp), a.pings, a.interval_ms, a.seconds, a.failures)
        for name in names:
            print(f"{name}:", flush=True)
            result.update(SECTIONS[name](ctx))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {a.json}")
    return 0

