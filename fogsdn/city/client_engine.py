"""The city's client engine: every mobile client of a point in one process.

One Python process per client spent two cores on the clients themselves: at the paper's
scale (200 clients) their imports alone took minutes of CPU at each point's start, and
hundreds of processes queued for the cores. Here each client is a thread of one process
(its steps block on its own sockets, so the threads mostly sleep), its sockets made inside
its own host (`HostSockets.inside`), so every probe, task and Meridian message still
leaves from the client's address over the client's links. RTTs are timed by the kernel's
receive stamps, not by when a thread got the interpreter. One thread answers the fog
nodes' Meridian probes to every client.

    python -m fogsdn.city.client_engine --config POINT/city.json --selector vivaldi \
        --clients c1=HOST_PID,... --truth-dir STATE/truth --out-dir POINT [--realtime]

Each client's result is POINT/<client>.json, written at the point's end or on SIGTERM
or SIGINT; the engine's CPU time and threads go to POINT/client-engine.json.
"""

from __future__ import annotations

import argparse
import random
import resource
import selectors
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from fogsdn.city.fog_daemon import PROBE_PORT, CityConfig, MemberBoard, member_board_path
from fogsdn.city.mobile_client import (
    CityClient,
    Transport,
    UdpTransport,
    client_result,
    client_status_path,
    drive,
)
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.realtime import go_realtime
from fogsdn.nodes.host_sockets import HostSocketError, HostSockets, parse_hosts
from fogsdn.nodes.ncs.discovery import step_times_rng
from fogsdn.nodes.ncs.selection import SELECTORS
from fogsdn.nodes.probe import EchoResponder, ProbeError, Turnarounds

ENGINE_STATS = "client-engine.json"
POLL_S = 0.1  # how often the echo thread looks at the stop flag


def city_clients(cfg: CityConfig, selector: str, nets: Mapping[str, Transport],
                 members: Callable[[], dict[str, int]]) -> list[CityClient]:
    """The engine's clients, one per transport: each with its own choices and with the
    step times of its simulated twin (client k of the runner's order is the simulator's
    client k), so a live point steps when the simulated one does."""
    order = {name: k for k, name in enumerate(cfg.clients)}
    return [CityClient(name, cfg, selector, net, random.Random(f"{cfg.seed}-{selector}-{name}"),
                       members, step_times_rng(cfg.seed, order[name]))
            for name, net in nets.items()]


def serve_echoes(responders: list[EchoResponder], stop: threading.Event) -> None:
    """Answer the probes to every client from one thread, until `stop`."""
    with selectors.DefaultSelector() as sel:
        for r in responders:
            sel.register(r.sock, selectors.EVENT_READ, r)
        while not stop.is_set():
            for key, _ in sel.select(POLL_S):
                try:
                    key.data.answer_one()
                except OSError:
                    continue


def run_client(client: CityClient, cfg: CityConfig, stop: threading.Event,
               failed: list[str]) -> None:
    """`drive` on this thread; a client that fails is named in `failed` (the engine then
    exits non-zero: its point is not a measurement) with its traceback in the log."""
    try:
        drive(client, cfg, stop, client_status_path(cfg.state_dir, client.name))
    except Exception as err:  # our own bug: the point says so, the other clients go on
        traceback.print_exc()
        failed.append(f"{client.name}: {type(err).__name__}: {err}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, required=True, help="the point's city.json")
    ap.add_argument("--selector", required=True, choices=sorted(SELECTORS))
    ap.add_argument("--clients", required=True,
                    help="NAME=HOST_PID,...: each client and its host's process, whose "
                         "network namespace its sockets are made in")
    ap.add_argument("--truth-dir", type=Path, required=True,
                    help="the runner's truth files, <client>.json")
    ap.add_argument("--out-dir", type=Path, required=True, help="where <client>.json go")
    ap.add_argument("--stats", type=Path, default=None,
                    help=f"this engine's statistics (default OUT_DIR/{ENGINE_STATS}; one per "
                         "engine where the clients run on several machines)")
    ap.add_argument("--realtime", action="store_true", help="run SCHED_FIFO (root)")
    args = ap.parse_args(argv)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        hosts = parse_hosts(args.clients)
        unstarted = CityConfig.read_unstarted(args.config)
        unknown = sorted(set(hosts) - set(unstarted.clients))
        if unknown:
            raise ValueError(f"--clients: {', '.join(unknown)} not clients of {args.config}")
        sockets = HostSockets(hosts)
    except (ValueError, OSError) as err:  # pydantic's ValidationError is a ValueError
        print(f"city client engine: {err}", file=sys.stderr)
        return 2
    with ExitStack() as closing:
        closing.callback(sockets.close)
        nets: dict[str, UdpTransport] = {}
        responders: list[EchoResponder] = []
        try:
            for name in hosts:  # each client's sockets in its own host, bound to its address
                with sockets.inside(name):
                    nets[name] = UdpTransport(unstarted, name, args.truth_dir / f"{name}.json")
                    responders.append(EchoResponder((unstarted.clients[name], PROBE_PORT)))
                closing.callback(responders[-1].close)
                closing.callback(nets[name].sock.close)
                closing.callback(nets[name].prober.close)
        except (HostSocketError, ProbeError, OSError) as err:
            print(f"city client engine: {err}", file=sys.stderr)
            return 2
        try:
            cfg = unstarted.with_epoch(stop=stop.is_set)
        except RuntimeError as err:
            print(f"city client engine: {err}", file=sys.stderr)
            return 1 if not stop.is_set() else 0
        realtime = go_realtime() if args.realtime else False  # the threads inherit it
        board = MemberBoard(member_board_path(cfg.state_dir), list(cfg.fogs))
        closing.callback(board.close)
        clients = city_clients(cfg, args.selector, nets, board.read)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        echo = threading.Thread(target=serve_echoes, args=(responders, stop),
                                name="echoes", daemon=True)
        echo.start()
        failed: list[str] = []
        threads = [threading.Thread(target=run_client, name=c.name, daemon=True,
                                    args=(c, cfg, stop, failed)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():  # joined in slices: the main thread takes the signals
                t.join(POLL_S)
        stop.set()
        echo.join()
        for c, r in zip(clients, responders, strict=True):
            write_json_atomic(args.out_dir / f"{c.name}.json", client_result(c, r.counters))
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        echoed, taken_off = Turnarounds(), Turnarounds()
        for r in responders:
            echoed.merge(r.counters.turnarounds)
        for net in nets.values():
            taken_off.merge(net.prober.counters.turnarounds)
            taken_off.merge(net.task_turnarounds)
        write_json_atomic(args.stats or args.out_dir / ENGINE_STATS, {
            "turnarounds": {"echoed": echoed.to_dict(), "taken_off": taken_off.to_dict()},
            "clients": len(clients), "threads": len(threads) + 2, "realtime": realtime,
            "cpu_s": round((cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
                           3),
            "wall_s": round(time.monotonic() - cfg.epoch, 3), "max_rss_kb": cpu1.ru_maxrss,
            "failed": failed})
    for line in failed:
        print(f"city client engine: client {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
