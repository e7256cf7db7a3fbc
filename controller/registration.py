"""Registration channel: how an OFN's join or leave reaches the controller (stdlib only).

Seed 000 has OFNs announce entering and leaving to the AP (cellular registration);
here the mobility model speaks for the OFN over the controller's Unix socket, and
the answer comes once the new rules are in (barrier reply).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any


def register(path: str | Path, node: str, available: bool, timeout: float = 5.0
             ) -> dict[str, Any]:
    """Tell the controller an OFN joined or left; returns once its rules are in."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        body = {"node": node, "state": "available" if available else "unavailable",
                "t": time.monotonic()}
        s.sendall(json.dumps(body).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return json.loads(data.decode())
