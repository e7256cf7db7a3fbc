"""A logical IoT client: Poisson HP and LP tasks to the service address, one TCP flow
per task, sent by the traffic engine (fogsdn.nodes.traffic_engine) at the drawn instants.

The class travels in DSCP (HP 46, LP 0); the controller's rules decide which worker
serves it. Every request ends as exactly one trace row, streamed to disk so an
interrupted run keeps what it has.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections.abc import Callable

from fogsdn.core import rx_stamp
from fogsdn.core.scenario import Scenario
from fogsdn.core.stages import StagePlan, stage_port
from fogsdn.core.streams import replication_seed
from fogsdn.core.trace import Outcome, TraceRow, TraceWriter
from fogsdn.core.workload import Arrival, client_names, request_id
from fogsdn.nodes.protocol import DSCP, ProtocolError, TaskRequest, parse_reply


class Client:
    """One client's requests; the engine draws them and decides when each is sent."""

    def __init__(self, name: str, scenario: Scenario, service: tuple[str, int], epoch: float,
                 writer: TraceWriter, replication: int = 0,
                 stages: StagePlan | None = None,
                 open_socket: Callable[[], socket.socket] | None = None) -> None:
        self.name = name
        # a TCP socket in this client's own host (the engine's, fogsdn.nodes.host_sockets)
        self.open_socket = open_socket or (
            lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        self.sc = scenario
        self.service = service
        self.epoch = epoch
        self.writer = writer
        self.ms_real = scenario.timebase.real_s_per_model_ms
        # which of the simulator's clients this is, for its seed: request c1-0000005 is
        # the simulated client 0's sixth request (the engine draws them: TrafficEngine)
        self.index = client_names(scenario).index(name)
        self.seed = replication_seed(scenario.seed, replication)
        # size-based policies (seed 002b): the stage travels in the destination port
        self.stages: StagePlan = stages or StagePlan("none")
        self.sent = 0
        self.done = 0
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
        sock = self.open_socket()
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

    async def send(self, arrival: Arrival, seq: int) -> None:
        """Request `seq` (drawn as `arrival`), now, to its one trace row."""
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
