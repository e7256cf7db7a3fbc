"""IoT client: Poisson HP and LP tasks to the service address, one TCP flow per task.

The class travels in DSCP (HP 46, LP 0); the controller's rules decide which worker
serves it. Every request ends as exactly one trace row, streamed to disk so an
interrupted run keeps what it has. The runner starts it in the client's namespace; it
writes RUN/epoch.<name>.ready when set up and starts at the instant written into RUN/epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

from fogsdn.core import rx_stamp
from fogsdn.core.scenario import Scenario, load_scenario
from fogsdn.core.stages import StagePlan, stage_port
from fogsdn.core.streams import replication_seed
from fogsdn.core.trace import Outcome, TraceRow, TraceWriter
from fogsdn.core.workload import Arrival, client_arrivals, client_names, request_id
from fogsdn.nodes.protocol import DSCP, ProtocolError, TaskRequest, parse_reply

INTERRUPT_GRACE_S = 2.0


class Client:
    def __init__(self, name: str, scenario: Scenario, service: tuple[str, int], epoch: float,
                 writer: TraceWriter, progress: Path | None = None, replication: int = 0,
                 stages: StagePlan | None = None) -> None:
        self.name = name
        self.sc = scenario
        self.service = service
        self.epoch = epoch
        self.writer = writer
        self.progress = progress
        self.ms_real = scenario.time_scale / 1000.0
        # the simulator's arrivals for this client and seed, drawn lazily as they are due:
        # request c1-0000005 here is the simulated client 0's sixth request
        self.schedule: Iterator[Arrival] = client_arrivals(
            scenario.workload, replication_seed(scenario.seed, replication),
            client_names(scenario).index(name), scenario.duration_ms)
        # size-based policies (seed 002b): the stage travels in the destination port
        self.stages: StagePlan = stages or StagePlan("none")
        self.sent = 0
        self.done = 0
        self.interrupted = asyncio.Event()
        self._open: dict[str, TraceRow] = {}

    def model_now(self) -> float:
        return (time.monotonic() - self.epoch) / self.ms_real

    def _finish(self, row: TraceRow) -> None:
        if self._open.pop(row.request_id, None) is None:
            return  # already recorded (never twice)
        self.writer.write(row)
        self.done += 1

    async def _exchange(self, req: TaskRequest, port: int, local_ports: list[int]
                        ) -> tuple[dict[str, object], float]:
        """One connection to the service address at `port`: the request out, the reply in
        (and when the kernel received it, `time.monotonic()`: the response ends there, not
        when this loop got round to reading it). The connection's own port is appended to
        `local_ports` (the controller names connections by it, fogsdn.controller.rt_measure)."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, DSCP[req.cls] << 2)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            await loop.sock_connect(sock, (self.service[0], port))
            local_ports.append(sock.getsockname()[1])
            await loop.sock_sendall(sock, req.encode())
            rx_stamp.enable(sock)
            buf = b""
            while b"\n" not in buf:
                chunk, received = await rx_stamp.sock_recv_stamped(loop, sock, 4096)
                if not chunk:
                    raise ConnectionResetError("connection closed without a reply")
                buf += chunk
        finally:
            sock.close()
        return parse_reply(buf.split(b"\n", 1)[0]), received

    async def _one(self, arrival: Arrival, seq: int) -> None:
        req = TaskRequest(request_id(self.name, seq), arrival.cls, arrival.size, self.name)
        t_send = self.model_now()
        row = TraceRow(req.id, self.name, str(arrival.cls), arrival.size, t_send)
        self._open[req.id] = row
        timeout_s = self.sc.timeout_ms * self.ms_real
        stage = self.stages.first_stage(arrival.size)
        visited: list[str] = []
        local_ports: list[int] = []
        spent = {"node_ms": 0.0, "wait_ms": 0.0, "service_ms": 0.0}  # over killed stages
        wasted = 0.0
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    port = self.service[1] if stage is None else stage_port(self.service[1], stage)
                    reply, received = await self._exchange(req, port, local_ports)
                    visited.append(str(reply.get("node", "")))
                    if reply["status"] != "killed" or stage is None:
                        break
                    # TAGS: killed at the cutoff; the same request restarts at the next stage
                    for k in spent:
                        spent[k] += float(reply[k])  # type: ignore[arg-type]
                    wasted += float(reply["service_ms"])  # type: ignore[arg-type]
                    nxt = self.stages.next_stage(stage)
                    if nxt is None:
                        raise ProtocolError(f"killed at the last stage ({reply.get('node')})")
                    stage = nxt
            row.t_done = (received - self.epoch) / self.ms_real
            row.response_ms = row.t_done - t_send
            row.node = str(reply.get("node", ""))
            row.nominal_ms = float(reply.get("nominal_ms", math.nan))  # type: ignore[arg-type]
            if stage is not None:
                row.hosts, row.wasted_ms = ">".join(visited), wasted
            status = reply["status"]
            if status == "ok":
                row.outcome = Outcome.OK
                if reply.get("handoff_from"):
                    row.error = f"handed off from {reply['handoff_from']}"
                for k in spent:
                    setattr(row, k, float(reply[k]) + spent[k])  # type: ignore[arg-type]
            elif status == "blocked":
                row.outcome = Outcome.BLOCKED
            elif status == "dropped":  # an OFN that left with `drop` or a failed handoff
                row.outcome = Outcome.LOST
                row.error = str(reply.get("error", "dropped"))[:200]
            else:
                row.outcome = Outcome.LOST
                row.error = f"worker error: {reply.get('error', '?')}"
        except TimeoutError:
            row.outcome = Outcome.TIMEOUT
            row.t_done = self.model_now()
        except (OSError, ProtocolError, ValueError, KeyError) as err:
            row.outcome = Outcome.LOST
            row.t_done = self.model_now()
            row.error = f"{err.__class__.__name__}: {err}"[:200]
        except asyncio.CancelledError:
            row.outcome = Outcome.TIMEOUT
            row.t_done = self.model_now()
            row.error = "interrupted"
            row.ports = ">".join(map(str, local_ports))
            self._finish(row)
            raise
        row.ports = ">".join(map(str, local_ports))
        self._finish(row)

    async def _report(self) -> None:
        while True:
            if self.progress is not None:
                self.progress.write_text(f"{self.sent} {self.done}\n")
            self.writer.flush()
            await asyncio.sleep(1.0)

    async def run(self) -> None:
        reporter = asyncio.create_task(self._report())
        tasks: set[asyncio.Task[None]] = set()
        for seq, arrival in enumerate(self.schedule):
            due = self.epoch + arrival.t_ms * self.ms_real
            delay = due - time.monotonic()
            if delay > 0:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self.interrupted.wait(), delay)
            if self.interrupted.is_set():
                break
            t = asyncio.create_task(self._one(arrival, seq))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            self.sent += 1
        if tasks and not self.interrupted.is_set():
            # normal end: every outstanding request is bounded by its own timeout,
            # but an interrupt may still arrive while we wait
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
        reporter.cancel()
        if self.progress is not None:
            self.progress.write_text(f"{self.sent} {self.done}\n")


def wait_for_epoch(path: Path, name: str, timeout_s: float = 60.0) -> float | None:
    """Say we are ready, then wait for the shared epoch (None if never given)."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    Path(f"{path}.{name}.ready").write_text("ready\n")
    deadline = time.monotonic() + timeout_s
    while not stop and time.monotonic() < deadline:
        try:
            return float(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--scenario", required=True, help="the run's resolved scenario file")
    ap.add_argument("--service", required=True, help="service address HOST:PORT")
    ap.add_argument("--epoch-file", required=True,
                    help="file the runner writes time.monotonic() of model t=0 into, once "
                         "every client is ready (this client writes FILE.<name>.ready)")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--replication", type=int, default=0)
    ap.add_argument("--stages", help="size-based stage plan, JSON (fogsdn.core.stages.StagePlan)")
    a = ap.parse_args(argv)
    try:
        stages = StagePlan.from_json(a.stages) if a.stages else None
    except ValueError as err:
        print(f"client: --{err}", file=sys.stderr)
        return 2
    host, _, port = a.service.rpartition(":")
    sc = load_scenario(a.scenario)
    trace = Path(a.trace)
    epoch = wait_for_epoch(Path(a.epoch_file), a.name)
    if epoch is None:
        return 1
    with TraceWriter(trace) as writer:
        client = Client(a.name, sc, (host, int(port)), epoch, writer,
                        trace.with_suffix(".progress"), a.replication, stages)

        async def _main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, client.interrupted.set)
            await client.run()

        asyncio.run(_main())
    return 0


if __name__ == "__main__":
    sys.exit(main())
