"""Registration channel (stdlib only): an OFN's join or leave, or a policy swap, over the
controller's Unix socket; the answer comes once the new rules are in.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from fogsdn.core.local_rpc import unix_call


def register(path: str | Path, node: str, available: bool, timeout: float = 5.0
             ) -> dict[str, object]:
    """Tell the controller an OFN joined or left; returns once its rules are in."""
    return unix_call(path, {"node": node, "state": "available" if available else "unavailable",
                            "t": time.monotonic()}, timeout)


def swap_policy(path: str | Path, spec: Mapping[str, object], timeout: float = 10.0
                ) -> dict[str, object]:
    """Have the controller run another policy (a resolved `PolicySpec` as a dict,
    fogsdn.controller.policy_swap); returns once the switches hold its rules, or `error`."""
    return unix_call(path, {"cmd": "policy", "spec": spec}, timeout)


def availability_request(msg: Mapping[str, Any], nodes: Collection[str], now: float
                         ) -> tuple[str, bool, float]:
    """(node, available, when) of a `register` request (`now` where it says not when);
    ValueError (or KeyError) for one it cannot apply."""
    node, state = str(msg["node"]), str(msg["state"])
    if state not in ("available", "unavailable"):
        raise ValueError(f"state: must be available or unavailable, got {state!r}")
    if node not in nodes:
        raise ValueError(f"node: unknown node {node!r}")
    return node, state == "available", float(msg.get("t", now))
