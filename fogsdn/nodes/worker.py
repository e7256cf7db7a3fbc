"""FN/OFN/cloud task server, run inside a Mininet host (its own network namespace).

Serves tasks on a TCP port with a `Worker` (`fogsdn/nodes/task_server.py`) and answers a Unix
control socket (`stats`, `drop`, `handoff`, `ballast`): filesystems are shared across
Mininet hosts, networks are not. If an internal thread dies the process exits (70).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from fogsdn.core import rx_stamp
from fogsdn.core.local_rpc import recv_line, send_json, unix_call
from fogsdn.core.realtime import go_realtime
from fogsdn.core.scenario import Discipline, Servers
from fogsdn.nodes.task_server import READ_TIMEOUT_S, Worker

SWITCH_INTERVAL_S = 0.0002  # the worker's GIL switch interval (Python's default is 5 ms)


def serve_control(w: Worker, sock: socket.socket) -> None:
    """Answer control commands on the worker's Unix socket until it stops: `stats`,
    `drop`, `handoff` (to a host:port), `ballast` (MB held, for memory tests)."""
    while not w.stopping:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        with conn:
            try:
                conn.settimeout(2.0)
                msg = json.loads(recv_line(conn, 1024).decode() or "{}")
                cmd = msg.get("cmd")
                if cmd == "drop":
                    out: dict[str, object] = {"dropped": w.drop_all()}
                elif cmd == "handoff":
                    host, _, port = str(msg["to"]).rpartition(":")
                    out = {"handed_off": w.handoff_all((host, int(port)))}
                elif cmd == "stats":
                    out = w.stats()
                elif cmd == "ballast":
                    out = {"ballast_mb": w.hold_ballast(int(msg["mb"]))}
                else:
                    out = {"error": f"unknown command {cmd!r}"}
            except (OSError, ValueError, AttributeError, KeyError) as err:
                out = {"error": str(err)}
            with suppress(OSError):
                send_json(conn, out)


def control_request(path: str | Path, cmd: str, timeout: float = 2.0,
                    **args: object) -> dict[str, Any]:
    """Send one control command to a worker's Unix socket (used by the runner)."""
    return unix_call(path, {"cmd": cmd, **args}, timeout)


class LoadReporter:
    """The worker's connection to the controller's load socket (SOCK_SEQPACKET, so a
    message is whole and a burst is not cut at 10): never waits; a report that cannot go
    (no controller now, or its socket full) is dropped, since the next one is whole again;
    a lost connection is tried again at most every RECONNECT_S."""

    RECONNECT_S = 0.1

    def __init__(self, path: str, stream: bool = False) -> None:
        """`stream`: `path` is a stream socket (the controller's on another server, which
        ssh forwards): each report goes as one line, and a line only partly sent ends the
        connection (the next one starts whole)."""
        self.path = path
        self.stream = stream
        self._sock: socket.socket | None = None
        self._next_try = 0.0
        self._lock = threading.Lock()  # reports come from the handler and completion threads

    def __call__(self, data: bytes) -> None:
        with self._lock:
            if self._sock is None:
                now = time.monotonic()
                if now < self._next_try:
                    return
                self._next_try = now + self.RECONNECT_S
                sock = socket.socket(socket.AF_UNIX,
                                     socket.SOCK_STREAM if self.stream else socket.SOCK_SEQPACKET)
                try:
                    sock.connect(self.path)
                except OSError:
                    sock.close()
                    return
                sock.setblocking(False)
                self._sock = sock
            line = data + b"\n" if self.stream else data
            try:
                sent = self._sock.send(line)
            except BlockingIOError:
                return  # full: this one is lost, the next is whole
            except OSError:
                sent = -1
            if sent == len(line):
                return
            self._sock.close()  # a failed send, or a line cut short on a stream
            self._sock = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--host", default="0.0.0.0",
                    help="listen address (inside the host's own namespace)")
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--mu", type=float, required=True)
    ap.add_argument("--capacity", type=int, required=True)
    ap.add_argument("--servers", choices=[s.value for s in Servers], default="single")
    ap.add_argument("--discipline", choices=[d.value for d in Discipline], default="fifo",
                    help="which waiting request a single server takes next (by `cls`)")
    ap.add_argument("--time-scale", type=float, required=True, help="real ms per model ms")
    ap.add_argument("--control", required=True, help="Unix socket path for control commands")
    ap.add_argument("--load-report", metavar="SOCKET",
                    help="Unix SOCK_SEQPACKET socket of the controller, told of each change of "
                         "what this node holds (fogsdn.core.load_report)")
    ap.add_argument("--load-report-stream", action="store_true",
                    help="--load-report is a stream socket: one report per line (the "
                         "controller on another server, forwarded by ssh)")
    ap.add_argument("--events", help="JSON-lines file for drops, errors and final counts")
    ap.add_argument("--max-size", type=float, default=float("inf"),
                    help="refuse requests whose size is above this (work units)")
    ap.add_argument("--bytes-per-ms", type=float,
                    help="work: cpu: each task hashes this many bytes per nominal real ms "
                         "(the runner's calibration); without it, model work")
    ap.add_argument("--kill-after", type=float, default=float("inf"),
                    help="TAGS stage limit: serve a task up to this size, then answer killed")
    ap.add_argument("--read-timeout", type=float, default=READ_TIMEOUT_S,
                    help="seconds a client has to send its whole request line")
    ap.add_argument("--realtime", action="store_true",
                    help="run SCHED_FIFO (root), so that replies leave on time on a busy "
                         "machine")
    a = ap.parse_args(argv)
    bad = [msg for wrong, msg in (
        (a.mu <= 0 or a.capacity < 1 or a.time_scale <= 0 or a.read_timeout <= 0,
         "--mu, --time-scale and --read-timeout must be > 0 and --capacity >= 1"),
        (a.bytes_per_ms is not None and not a.bytes_per_ms > 0, "--bytes-per-ms must be > 0"),
        (a.discipline != "fifo" and (a.servers != "single" or a.bytes_per_ms is not None),
         "--discipline other than fifo needs --servers single and model work"),
        (not a.max_size > 0 or not a.kill_after > 0, "--max-size and --kill-after must be > 0"),
    ) if wrong]
    if bad:
        print(f"worker: {bad[0]}", file=sys.stderr)
        return 2

    # the completion thread must get the interpreter back soon after its timed wait ends;
    # with the default 5 ms switch interval a handler thread that holds it can delay a
    # reply by milliseconds (the node's service tail)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # --realtime: SCHED_FIFO for this thread before any other starts, so all inherit it
    # (the completion thread alone would wait for a handler's GIL; docs/emulation.md)
    granted = go_realtime() if a.realtime else None
    events = open(a.events, "a") if a.events else None  # noqa: SIM115
    w = Worker(a.name, a.mu, a.capacity, Servers(a.servers), a.time_scale, events,
               max_size=a.max_size, read_timeout_s=a.read_timeout,
               bytes_per_ms=a.bytes_per_ms, kill_after=a.kill_after,
               discipline=Discipline(a.discipline),
               report=None if a.load_report is None else LoadReporter(a.load_report,
                                                                      a.load_report_stream))
    srv = socket.create_server((a.host, a.port), backlog=512, reuse_port=False)
    rx_stamp.enable(srv)  # a request arrives when the kernel has it (fogsdn/core/rx_stamp.py)
    srv.settimeout(0.2)
    ctl_path = Path(a.control)
    ctl_path.unlink(missing_ok=True)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.bind(str(ctl_path))
    ctl.listen(8)
    ctl.settimeout(0.2)

    def _term(signum: int, frame: object) -> None:
        w.stop()

    if granted is not None:
        w.log_event(event="realtime", granted=granted)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    threading.Thread(target=w.guarded, args=(w.serve_completions,), daemon=True,
                     name="completions").start()
    if w.cpu is not None:
        w.cpu.start(wrap=w.guarded)
    threading.Thread(target=w.guarded, args=(serve_control, w, ctl), daemon=True,
                     name="control").start()
    print(f"worker {a.name} ready on :{a.port} pid {os.getpid()}", flush=True)
    try:
        while not w.stopping:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=w.handle, args=(conn,), daemon=True).start()
    finally:
        srv.close()
        ctl.close()
        ctl_path.unlink(missing_ok=True)
        if w.cpu is not None:
            w.cpu.stop()
        w.log_event(event="final", **w.stats())
        if events:
            events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
