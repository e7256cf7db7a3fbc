"""One JSON line each way over a Unix socket: the runner, controller and workers' control
channel (filesystems are shared across Mininet hosts, networks are not); and a JSON file
replaced whole, for a process that polls it."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

MAX_LINE = 1 << 16


def recv_line(sock: socket.socket, limit: int = MAX_LINE) -> bytes:
    """Bytes up to and including the first newline (or until the peer closes)."""
    data = b""
    while not data.endswith(b"\n") and len(data) <= limit:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def send_json(sock: socket.socket, obj: Any) -> None:
    sock.sendall(json.dumps(obj).encode() + b"\n")


def unix_call(path: str | Path, request: Mapping[str, object], timeout: float = 2.0
              ) -> dict[str, object]:
    """Send one request, return the one-line JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        send_json(s, request)
        answer = json.loads(recv_line(s).decode())
    if not isinstance(answer, dict):
        raise ValueError(f"{path}: answer is not a JSON object")
    return answer


def serve_unix(path: Path, handle: Callable[[socket.socket], object],
               spawn: Callable[..., object], backlog: int = 16) -> None:
    """Listen on a fresh Unix socket at `path` for ever, each connection handed to `handle`
    in a task of its own (`spawn`: the caller's threads, e.g. os-ken's hub)."""
    path.unlink(missing_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(backlog)
    while True:
        conn, _ = srv.accept()
        spawn(handle, conn)


def listen_packets(path: Path, backlog: int = 64) -> socket.socket:
    """A fresh Unix SOCK_SEQPACKET socket listening at `path`: whole messages, one
    connection per sender."""
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(str(path))
    sock.listen(backlog)
    return sock


def listen_stream(path: Path, backlog: int = 64) -> socket.socket:
    """A fresh Unix SOCK_STREAM socket listening at `path` (its messages need framing)."""
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(backlog)
    return sock


def answer_one(conn: socket.socket, answer: Callable[[Any], Mapping[str, object]], timeout: float,
               errors: tuple[type[Exception], ...]) -> None:
    """Read one JSON request from `conn` and send `answer`'s reply, or `{"error": its
    first line}` where reading or answering raised one of `errors`; then close it."""
    with conn:
        try:
            conn.settimeout(timeout)
            out = answer(json.loads(recv_line(conn).decode()))
        except errors as err:
            out = {"error": str(err).splitlines()[0] if str(err) else repr(err)}
        with suppress(OSError):  # the caller gave up waiting
            send_json(conn, out)


def write_json_atomic(path: Path, obj: object) -> None:
    """Write JSON that another process may read at any moment: it sees all or nothing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)
