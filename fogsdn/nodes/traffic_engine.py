"""The traffic engine: every client of a run as a logical client in one process.

One Python process per client spent the two cores on the clients themselves (their
imports, their event loops, their turns on the run queue). The engine runs them all on
one event loop instead. Each client's sockets are made inside that client's host
(fogsdn.nodes.host_sockets), so what the network sees does not change: the same
addresses, links and DSCP. Requests leave at the drawn instants of the run's one stream,
woken at the absolute instant (fogsdn.nodes.deadline_timer); how late each left is the
trace's `t_send` against its drawn instant (`send_lateness` in summary.json).

The runner starts it with the clients' host process ids; it writes RUN/epoch.<tag>.ready
when set up, starts at the instant written into RUN/epoch, and on SIGTERM or SIGINT
records every outstanding request and flushes its traces. At the end it writes its own
CPU time and sends to `--stats`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.realtime import go_realtime
from fogsdn.core.scenario import ScenarioError, load_scenario
from fogsdn.core.stages import StagePlan
from fogsdn.core.trace import TraceWriter
from fogsdn.core.workload import Arrival, arrivals
from fogsdn.nodes.client import Client
from fogsdn.nodes.deadline_timer import DeadlineTimer
from fogsdn.nodes.host_sockets import HostSocketError, HostSockets, parse_hosts

INTERRUPT_GRACE_S = 2.0
PROGRESS_EVERY_S = 1.0
FLUSH_SLICES = 10  # the traces are flushed a tenth at a time, every PROGRESS_EVERY_S / 10


class TrafficEngine:
    """Sends every client's requests at their drawn instants until the schedules end or
    `interrupted` is set; each request's task writes its own trace row."""

    def __init__(self, clients: list[Client], progress: Path | None = None) -> None:
        self.clients = clients
        self.progress = progress  # {client: [sent, answered]}, rewritten whole each second
        self.interrupted = asyncio.Event()
        self.precise = False  # whether the wake-ups were a timerfd's (DeadlineTimer)
        self._schedule: Iterator[tuple[Client, int, Arrival]] | None = None
        self._next: tuple[Client, int, Arrival] | None = None

    def _draws(self) -> Iterator[tuple[Client, int, Arrival]]:
        """The run's arrivals in time order (the simulator's one stream for the seed),
        those of this engine's clients, each with its number among its client's: one
        pass over the stream, not one per client (that was 0.1 ms an arrival at 200)."""
        ref = self.clients[0]
        mine = {c.index: c for c in self.clients}
        seqs = dict.fromkeys(mine, 0)
        for a in arrivals(ref.sc.workload, ref.seed, ref.sc.duration_ms):
            c = mine.get(a.client)
            if c is not None:
                yield c, seqs[a.client], a
                seqs[a.client] += 1

    def prime(self) -> None:
        """Draw the first arrival now, before the start instant: the streams' set-up
        and first block should not hold the first sends."""
        self._schedule = self._draws()
        self._next = next(self._schedule, None)

    def write_progress(self) -> None:
        if self.progress is not None:
            write_json_atomic(self.progress, {c.name: [c.sent, c.done] for c in self.clients})

    async def _report(self) -> None:
        """Progress once a second, in one file; the traces flushed a slice at a time,
        so that no single wake-up writes every client's file (at 200 clients one that
        did held the sends up to 7 ms)."""
        k = 0
        while True:
            for c in self.clients[k % FLUSH_SLICES::FLUSH_SLICES]:
                c.writer.flush()
            if k % FLUSH_SLICES == 0:
                self.write_progress()
            k += 1
            await asyncio.sleep(PROGRESS_EVERY_S / FLUSH_SLICES)

    async def run(self) -> None:
        timer = DeadlineTimer(asyncio.get_running_loop())
        self.precise = timer.precise

        async def on_interrupt() -> None:
            await self.interrupted.wait()
            timer.wake()

        watcher = asyncio.create_task(on_interrupt())
        reporter = asyncio.create_task(self._report())
        tasks: set[asyncio.Task[None]] = set()
        if self._schedule is None:
            self.prime()
        assert self._schedule is not None
        try:
            while self._next is not None and not self.interrupted.is_set():
                c, seq, arrival = self._next
                await timer.until(c.epoch + arrival.t_ms * c.ms_real)
                if self.interrupted.is_set():
                    break
                t = asyncio.create_task(c.send(arrival, seq))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
                c.sent += 1
                self._next = next(self._schedule, None)
            if tasks and not self.interrupted.is_set():
                # normal end: each outstanding request is bounded by its own timeout,
                # but an interrupt may still come while we wait
                waiter = asyncio.ensure_future(asyncio.wait(set(tasks)))
                stopper = asyncio.ensure_future(self.interrupted.wait())
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
            if tasks:
                _, still = await asyncio.wait(set(tasks), timeout=INTERRUPT_GRACE_S)
                for t in still:
                    t.cancel()
                if still:
                    await asyncio.wait(still)
        finally:
            watcher.cancel()
            reporter.cancel()
            timer.close()
            self.write_progress()
            for c in self.clients:
                c.writer.flush()


def wait_for_epoch(path: Path, tag: str, timeout_s: float = 60.0) -> float | None:
    """Say we are ready, then wait for the shared epoch (None if never given, or if the
    runner stopped us meanwhile)."""
    stop: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    Path(f"{path}.{tag}.ready").write_text("ready\n")
    deadline = time.monotonic() + timeout_s
    while not stop and time.monotonic() < deadline:
        try:
            return float(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", required=True,
                    help="NAME=HOST_PID,...: each client and its host's process (a Mininet "
                         "host's shell), whose network namespace its sockets are made in")
    ap.add_argument("--tag", required=True, help="this engine's name in RUN/epoch.<tag>.ready")
    ap.add_argument("--scenario", required=True, help="the run's resolved scenario file")
    ap.add_argument("--service", required=True, help="service address HOST:PORT")
    ap.add_argument("--epoch-file", required=True,
                    help="file the runner writes time.monotonic() of model t=0 into")
    ap.add_argument("--trace-dir", required=True, help="where trace-<client>.csv go")
    ap.add_argument("--stats", required=True, help="JSON of this engine's CPU and sends")
    ap.add_argument("--replication", type=int, default=0)
    ap.add_argument("--stages", help="size-based stage plan, JSON (fogsdn.core.stages.StagePlan)")
    ap.add_argument("--realtime", action="store_true",
                    help="run SCHED_FIFO (priority 1, as the workers): no ordinary process "
                         "delays a send")
    a = ap.parse_args(argv)
    try:
        hosts = parse_hosts(a.clients)
        stages = StagePlan.from_json(a.stages) if a.stages else None
        sc = load_scenario(a.scenario)
        sockets = HostSockets(hosts)
    except (ValueError, ScenarioError, HostSocketError) as err:
        print(f"traffic engine: {err}", file=sys.stderr)
        return 2
    host, _, port = a.service.rpartition(":")
    trace_dir = Path(a.trace_dir)
    realtime = go_realtime() if a.realtime else False
    writers = {n: TraceWriter(trace_dir / f"trace-{n}.csv") for n in hosts}
    clients = [Client(n, sc, (host, int(port)), math.nan, writers[n], a.replication, stages,
                      open_socket=lambda n=n: sockets.tcp(n))  # type: ignore[misc]
               for n in hosts]
    engine = TrafficEngine(clients, trace_dir / f"load-{a.tag}.progress")
    engine.prime()
    epoch = wait_for_epoch(Path(a.epoch_file), a.tag)
    if epoch is None:
        for w in writers.values():
            w.close()
        return 1
    for c in clients:
        c.epoch = epoch
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)

    async def _main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, engine.interrupted.set)
        await engine.run()

    try:
        asyncio.run(_main())
    finally:
        for w in writers.values():
            w.close()
        sockets.close()
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - epoch
        Path(a.stats).write_text(json.dumps({
            "clients": len(clients), "sent": sum(c.sent for c in clients),
            "cpu_s": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
            "wall_s": wall, "max_rss_kb": cpu1.ru_maxrss, "precise_timer": engine.precise,
            "realtime": realtime,
        }) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
