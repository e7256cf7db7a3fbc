"""One JSON line each way over a Unix socket: the runner, controller and workers' control
channel (filesystems are shared across Mininet hosts, networks are not); and a JSON file
replaced whole, for a process that polls it."""

from __future__ import annotations

import json
import os
import socket
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


def unix_call(path: str | Path, request: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """Send one request, return the one-line JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        send_json(s, request)
        answer = json.loads(recv_line(s).decode())
    if not isinstance(answer, dict):
        raise ValueError(f"{path}: answer is not a JSON object")
    return answer


def write_json_atomic(path: Path, obj: object) -> None:
    """Write JSON that another process may read at any moment: it sees all or nothing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)
