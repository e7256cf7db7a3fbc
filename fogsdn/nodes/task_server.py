"""The task server a worker process runs (`fogsdn/nodes/worker.py`): admission, service
timing, replies, a leaving OFN's drop or handoff, and the counts it reports.

A `ServiceQueue` (or, for another `--discipline`, the simulator's own `ClassQueue`)
serves size/mu model ms stretched by the time scale. Replies leave at the scheduled
absolute end of service, so timer overshoot never accumulates. Inputs are bounded
and a dead internal thread ends the worker with status 70 (docs/reliability.md).
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import IO, Any

from fogsdn.core import rx_stamp
from fogsdn.core.load_report import MAX_ENDS, LoadReport
from fogsdn.core.local_rpc import recv_line
from fogsdn.core.scenario import Discipline, Servers, TaskClass
from fogsdn.models.service_queue import ClassQueue, Job, ServiceQueue
from fogsdn.nodes.cpu_work import CpuServers, CpuTask
from fogsdn.nodes.protocol import (
    MAX_REQUEST_BYTES,
    ProtocolError,
    TaskRequest,
    encode_reply,
    parse_reply,
    parse_request,
)

READ_TIMEOUT_S = 5.0  # for the whole request line, not per read
MAX_READING = 256  # connections whose request line is still being read
THREAD_DIED = 70  # exit status when an internal thread dies (EX_SOFTWARE)
SPIN_S = 0.0005  # wake this early and spin to the scheduled end (see serve_completions)


@dataclass(order=True)
class _Pending:
    end: float
    seq: int
    conn: socket.socket
    rid: str
    arrival: float
    start: float
    nominal_ms: float
    cls: str
    client: str
    killed: bool = False  # served up to the TAGS cutoff only: the reply says `killed`


def _peer(conn: socket.socket) -> tuple[str, int] | None:
    """The client's (ip, port): the key of its connection's decision at the controller."""
    try:
        ip, port = conn.getpeername()[:2]
    except (OSError, ValueError):
        return None
    return str(ip), int(port)


def _abort(conn: socket.socket) -> None:
    """Close with RST so the peer learns at once (used for dropped tasks)."""
    with suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()


class Worker:
    """One node's task server; the process (`fogsdn.nodes.worker.main`) feeds it connections."""

    def __init__(self, name: str, mu: float, capacity: int, servers: Servers,
                 time_scale: float, events: IO[str] | None = None,
                 max_size: float = float("inf"), read_timeout_s: float = READ_TIMEOUT_S,
                 bytes_per_ms: float | None = None,
                 kill_after: float = float("inf"),
                 discipline: Discipline = Discipline.FIFO,
                 report: Callable[[bytes], None] | None = None) -> None:
        self.name = name
        # each change of what it holds, to the controller (fogsdn.core.load_report)
        self._report = report
        self._report_seq = itertools.count()
        self.mu = mu
        self.kill_after = kill_after  # TAGS stage limit (size units): serve up to it, then kill
        self.max_size = max_size
        self.read_timeout_s = read_timeout_s
        self._reading = 0
        self.ms_real = time_scale / 1000.0  # real seconds per model ms
        self.queue = ServiceQueue(capacity, servers)
        if discipline is not Discipline.FIFO and (servers is Servers.MULTI
                                                  or bytes_per_ms is not None):
            raise ValueError(f"discipline {discipline.value} needs one server and model work")
        # not FIFO: the held requests, each a _Pending whose start and end are set when
        # it completes (or leaves); None: `queue` and `_pending` as always
        self.ordered: ClassQueue[_Pending] | None = (
            None if discipline is Discipline.FIFO else ClassQueue(capacity, discipline))
        self._pending: list[_Pending] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._events = events
        self._events_lock = threading.Lock()
        self.counts = {"admitted": 0, "blocked": 0, "completed": 0, "errors": 0, "dropped": 0}
        self._ballast: list[bytearray] = []
        # work: cpu (docs/containers.md): tasks hash bytes_per_ms bytes per nominal real ms
        self.bytes_per_ms = bytes_per_ms
        self.cpu: CpuServers | None = None
        if bytes_per_ms is not None:
            self.cpu = CpuServers(capacity, capacity if servers is Servers.MULTI else 1,
                                  self._cpu_done)
        self._busy_done = 0.0  # server-seconds of service finished or cut short (power)

    # -- events -------------------------------------------------------------
    def log_event(self, **rec: object) -> None:
        if self._events is None:
            return
        with self._events_lock:
            self._events.write(json.dumps(rec) + "\n")
            self._events.flush()

    # -- request path ---------------------------------------------------------
    def handle(self, conn: socket.socket) -> None:
        """Read one request line and admit it, block it, or answer an error."""
        with self._cond:
            busy = self._reading >= MAX_READING
            if busy:
                self.counts["errors"] += 1
            else:
                self._reading += 1
        if busy:
            self._reply_now(conn, encode_reply(
                status="error", node=self.name,
                error=f"busy: {MAX_READING} connections are being read already"))
            return
        client = _peer(conn)
        try:
            req, arrival = self._read_request(conn)
        except (ProtocolError, OSError) as err:
            with self._cond:
                self.counts["errors"] += 1
                sent = self._snapshot(client, arrived_at=time.monotonic())
            self._send_report(sent)
            self._reply_now(conn, encode_reply(status="error", node=self.name, error=str(err)))
            self.log_event(event="error", error=str(err))
            return
        finally:
            with self._cond:
                self._reading -= 1
        killed = req.size > self.kill_after
        nominal_ms = (self.kill_after if killed else req.size) / self.mu
        if self.cpu is not None and self.bytes_per_ms is not None:
            work = round(nominal_ms * self.ms_real * 1000.0 * self.bytes_per_ms)
            with self._cond:
                before = self._count()
                admitted = self.cpu.admit(CpuTask(arrival, work, (conn, req.id, nominal_ms)))
                self.counts["admitted" if admitted else "blocked"] += 1
                sent = self._snapshot(client, before, arrival)
        else:
            admitted, sent = self._admit(conn, req, arrival, nominal_ms, killed, client)
        self._send_report(sent)
        if not admitted:
            self._reply_now(conn, encode_reply(id=req.id, status="blocked", node=self.name,
                                               nominal_ms=nominal_ms))

    def _admit(self, conn: socket.socket, req: TaskRequest, arrival: float,
               nominal_ms: float, killed: bool, client: tuple[str, int] | None
               ) -> tuple[bool, LoadReport | None]:
        """Hold a request (False: full), waking the completion thread: it may now have an
        earlier end to wait for (an idle server, a preemption); and the report to send."""
        service = nominal_ms * self.ms_real
        with self._cond:
            before = self._count()
            if self.ordered is not None:
                p = _Pending(math.nan, next(self._seq), conn, req.id, arrival, math.nan,
                             nominal_ms, str(req.cls), req.client, killed)
                admitted = self.ordered.admit(arrival, req.cls is TaskClass.HP, service,
                                              p) is not None
            else:
                adm = self.queue.admit(arrival, service)
                admitted = adm is not None
                if adm is not None:
                    heapq.heappush(self._pending, _Pending(
                        adm.end, next(self._seq), conn, req.id, arrival, adm.start,
                        nominal_ms, str(req.cls), req.client, killed))
            self.counts["admitted" if admitted else "blocked"] += 1
            if admitted:
                self._cond.notify()
            return admitted, self._snapshot(client, before, arrival)

    def _read_request(self, conn: socket.socket) -> tuple[TaskRequest, float]:
        """The request line, which must arrive whole within read_timeout_s."""
        deadline = time.monotonic() + self.read_timeout_s
        buf = b""
        arrival = time.monotonic()  # replaced by the kernel's stamp of each read
        while b"\n" not in buf and len(buf) <= MAX_REQUEST_BYTES:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                conn.settimeout(left)
                chunk, arrival = rx_stamp.recv_stamped(conn, 4096)
            except TimeoutError:
                raise ProtocolError(
                    f"request line not complete within {self.read_timeout_s:g} s") from None
            if not chunk:
                break
            buf += chunk
        line = buf.split(b"\n", 1)[0]
        if b"\n" not in buf and len(buf) <= MAX_REQUEST_BYTES:
            raise ProtocolError("connection closed before a full request line")
        return parse_request(line, self.max_size), arrival

    @staticmethod
    def _reply_now(conn: socket.socket, data: bytes) -> None:
        try:
            conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    def serve_completions(self) -> None:
        """Send each reply at its scheduled end of service: a timed wait wakes 0.1-0.2 ms
        late (docs/architecture.md), so wake SPIN_S early and spin outside the lock."""
        if self.ordered is not None:
            self._serve_ordered(self.ordered)
            return
        while not self._stop.is_set():
            with self._cond:
                if not self._pending:
                    self._cond.wait(0.2)
                    continue
                wait = self._pending[0].end - time.monotonic()
                if wait > SPIN_S:
                    self._cond.wait(min(wait - SPIN_S, 1.0))
                    continue
                p = heapq.heappop(self._pending)
                self.counts["completed"] += 1
                self._busy_done += p.end - p.start
                sent = self._snapshot()
            self._reply_at_end(p)
            self._send_report(sent)

    def _serve_ordered(self, q: ClassQueue[_Pending]) -> None:
        """`serve_completions` for a ClassQueue: at the end of the request in service, move
        the queue's clock there (starting the next one), then reply to what finished."""
        while not self._stop.is_set():
            with self._cond:
                if not q.done:
                    end = q.next_end()
                    if end is None:
                        self._cond.wait(0.2)
                        continue
                    wait = end - time.monotonic()
                    if wait > SPIN_S:
                        self._cond.wait(min(wait - SPIN_S, 1.0))
                        continue
                    q.advance(end)
                p = self._ended(q.done.pop(0))
                self.counts["completed"] += 1
                sent = self._snapshot()
            self._reply_at_end(p)
            self._send_report(sent)

    @staticmethod
    def _ended(job: Job[_Pending]) -> _Pending:
        """A finished job's request, start set so end - start is the service it got
        (preempted stints included) and start - arrival its wait."""
        p = job.payload
        p.end = job.end
        p.start = job.start - job.served
        return p

    def _reply_at_end(self, p: _Pending) -> None:
        while time.monotonic() < p.end:
            pass
        done = time.monotonic()
        s = self.ms_real
        self._reply_now(p.conn, encode_reply(
            id=p.rid, status="killed" if p.killed else "ok", node=self.name,
            wait_ms=(p.start - p.arrival) / s, service_ms=(done - p.start) / s,
            node_ms=(done - p.arrival) / s, nominal_ms=p.nominal_ms))

    def _cpu_done(self, task: CpuTask, start: float, end: float) -> None:
        """A real-work task finished on a server thread: reply with what it took."""
        conn, rid, nominal_ms = task.payload
        with self._cond:
            self.counts["completed"] += 1
            self._busy_done += end - start
            sent = self._snapshot()
        self._send_report(sent)
        s = self.ms_real
        self._reply_now(conn, encode_reply(
            id=rid, status="ok", node=self.name, wait_ms=(start - task.arrival) / s,
            service_ms=(end - start) / s, node_ms=(end - task.arrival) / s,
            nominal_ms=nominal_ms))

    # -- control ------------------------------------------------------------
    def drop_all(self) -> int:
        """The OFN left with `drop`: everything it holds is lost (in `cpu` work, what
        waits; a task in service runs to its end)."""
        waiting = self.cpu.clear() if self.cpu is not None else []
        with self._cond:
            victims = ([(t.payload[0], t.payload[1]) for t in waiting] if self.cpu is not None
                       else [(p.conn, p.rid) for p in self._take_all(time.monotonic())])
            self.counts["dropped"] += len(victims)
            sent = self._snapshot()
        self._send_report(sent)
        for conn, rid in victims:
            _abort(conn)
            self.log_event(event="dropped", id=rid, t=time.monotonic())
        return len(victims)

    def _take_all(self, now: float) -> list[_Pending]:
        """Everything held at `now` in serving order, end - max(now, start) the work each
        has left (the caller holds the lock)."""
        if self.ordered is not None:  # in service first, then as it would serve them
            return [self._moving(j, now) for j in self.ordered.clear(now)]
        victims, self._pending = sorted(self._pending), []
        self._busy_done += self._busy_in(victims, now)
        self.queue.clear(now)
        return victims

    def handoff_all(self, to: tuple[str, int]) -> int:
        """The OFN left with `handoff`: what it holds moves, in order, to the FN's queue,
        each with the work it has left; the FN's answer is relayed over the client's own
        connection, node_ms counted from the arrival here (docs/simulator.md, Churn)."""
        now = time.monotonic()
        with self._cond:
            victims = self._take_all(now)
            self.counts["handed_off"] = self.counts.get("handed_off", 0) + len(victims)
            sent = self._snapshot()
        self._send_report(sent)
        moves = []
        for p in victims:
            left_ms = (p.end - max(now, p.start)) / self.ms_real
            size = max(0.0, left_ms * self.mu)
            try:
                fn = socket.create_connection(to, timeout=2.0)
                fn.sendall(TaskRequest(p.rid, TaskClass(p.cls), size, p.client).encode())
            except OSError as err:
                self._relay_failed(p, f"handoff connect: {err}")
                continue
            moves.append((p, fn))
            self.log_event(event="handed_off", id=p.rid, t=now)
        for p, fn in moves:  # in arrival order at the FN; answers come back in parallel
            threading.Thread(target=self._relay, args=(p, fn), daemon=True).start()
        return len(victims)

    @staticmethod
    def _moving(job: Job[_Pending], now: float) -> _Pending:
        """A job taken away at `now`, as a pending request whose end - now is its work left."""
        p = job.payload
        p.start, p.end = now, now + job.work
        return p

    def _relay_failed(self, p: _Pending, why: str) -> None:
        self._reply_now(p.conn, encode_reply(id=p.rid, status="dropped", node=self.name,
                                             nominal_ms=p.nominal_ms, error=why))

    def _relay(self, p: _Pending, fn: socket.socket) -> None:
        try:
            with fn:
                fn.settimeout(None)
                reply = parse_reply(recv_line(fn).strip())
        except (OSError, ValueError, ProtocolError) as err:
            self._relay_failed(p, f"handoff: {err}")
            return
        if reply.get("status") != "ok":
            # the FN was full: the model drops what does not fit
            self._relay_failed(p, f"handoff: FN answered {reply.get('status')}")
            return
        # the sojourn runs from the task's arrival here to its completion at the FN;
        # service and nominal are the FN's (what it was asked to do and did)
        node_ms = (time.monotonic() - p.arrival) / self.ms_real
        service_ms = float(reply["service_ms"])  # type: ignore[arg-type]
        self._reply_now(p.conn, encode_reply(
            id=p.rid, status="ok", node=reply.get("node", "?"), handoff_from=self.name,
            wait_ms=node_ms - service_ms, service_ms=service_ms, node_ms=node_ms,
            nominal_ms=reply.get("nominal_ms")))

    def hold_ballast(self, mb: int) -> int:
        """Hold `mb` MB more of touched memory (tests of a container's memory limit,
        docs/containers.md); returns the total held."""
        if not 0 <= mb <= 1 << 16:
            raise ValueError(f"mb must be in [0, 65536], got {mb}")
        chunk = bytearray(mb * 1024 * 1024)
        for i in range(0, len(chunk), 4096):
            chunk[i] = 1  # touch every page, so it is charged to the cgroup
        self._ballast.append(chunk)
        return sum(len(c) for c in self._ballast) // (1024 * 1024)

    @staticmethod
    def _busy_in(held: list[_Pending], now: float) -> float:
        """Server-seconds the held tasks have been in service up to `now`."""
        return sum(min(now, p.end) - p.start for p in held if p.start < now)

    def stats(self) -> dict[str, object]:
        """The node's counts and load; `busy_s` (server-seconds of service so far) is what
        the runner polls once a second for the node's utilisation (power)."""
        now = time.monotonic()
        with self._cond:
            held, work_left = self._held(now)
            busy = (self.ordered.busy_s(now) if self.ordered is not None
                    else self._busy_in(self._pending, now))
            return {"node": self.name, "in_system": held, **self.counts,
                    "busy_s": self._busy_done + busy, "t": now,
                    "work_left_ms": max(0.0, work_left) / self.ms_real}

    def _count(self) -> int:
        """What it holds (the caller holds the lock)."""
        if self.cpu is not None:
            return self.cpu.in_system
        return len(self.ordered) if self.ordered is not None else len(self._pending)

    def _held(self, now: float) -> tuple[int, float]:
        """What it holds at `now` and the real seconds of work that is (the caller holds
        the lock)."""
        if self.cpu is not None:  # real work: its length is the kernel's
            return self._count(), 0.0
        if self.ordered is not None:
            return self._count(), self.ordered.work_left(now)
        # single server: what it holds ends when its last pending task does
        return self._count(), max((p.end for p in self._pending), default=now) - now

    def _ends(self) -> tuple[float, ...]:
        """The scheduled ends of the earliest held requests (the caller holds the lock):
        all known in FIFO, the one in service in another discipline, none in real work."""
        if self.cpu is not None:
            return ()
        if self.ordered is not None:
            end = self.ordered.next_end()
            return () if end is None else (end,)
        return tuple(p.end for p in heapq.nsmallest(MAX_ENDS, self._pending))

    def _snapshot(self, arrival: tuple[str, int] | None = None, before: int | None = None,
                  arrived_at: float | None = None) -> LoadReport | None:
        """The report of what it holds now (the caller holds the lock, so reports are
        numbered in the order of the changes they follow); None when nobody listens."""
        if self._report is None:
            return None
        now = time.monotonic()
        held, work_left = self._held(now)
        return LoadReport(self.name, next(self._report_seq), held, now + max(0.0, work_left),
                          arrival, (held if before is None else before)
                          if arrival is not None else None,
                          arrived_at if arrival is not None else None, self._ends())

    def _send_report(self, r: LoadReport | None) -> None:
        """Out of the lock: a report that cannot go (no controller now, or its socket
        full) is dropped; the next one carries the whole count again."""
        if r is not None and self._report is not None:
            with suppress(OSError):
                self._report(r.encode())

    def guarded(self, target: Any, *args: Any) -> None:
        """Run an internal thread; if it dies, log why and end the process (never live on
        broken)."""
        try:
            target(*args)
        except BaseException as err:  # noqa: BLE001 (any death ends the worker)
            why = f"{threading.current_thread().name} thread died: {err.__class__.__name__}: {err}"
            print(f"worker {self.name}: {why}", file=sys.stderr, flush=True)
            self.log_event(event="thread_died", error=why)
            os._exit(THREAD_DIED)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
