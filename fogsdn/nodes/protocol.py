"""Wire format between clients and workers: one JSON object per line, each way (pure).

Request:  {"id": str, "cls": "hp"|"lp", "size": float >= 0, "client": str}
Reply:    {"id", "status": "ok"|"blocked"|"error", "node", "wait_ms", "service_ms",
           "nominal_ms", "node_ms", "error"}   (times in model ms)
A request over MAX_REQUEST_BYTES or malformed gets an `error` reply naming the cause.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from fogsdn.core.scenario import TaskClass

MAX_REQUEST_BYTES = 2048
DSCP = {TaskClass.HP: 46, TaskClass.LP: 0}


class ProtocolError(ValueError):
    """A request the worker refuses; the message names the field or cause."""


@dataclass(frozen=True)
class TaskRequest:
    id: str
    cls: TaskClass
    size: float
    client: str

    def encode(self) -> bytes:
        body = {"id": self.id, "cls": str(self.cls), "size": self.size, "client": self.client}
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def parse_request(line: bytes, max_size: float = math.inf) -> TaskRequest:
    """The request on one line; `max_size` bounds the work one request may ask for."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ProtocolError(f"request larger than {MAX_REQUEST_BYTES} bytes")
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"not JSON: {err.__class__.__name__}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("request must be a JSON object")
    rid = obj.get("id")
    if not isinstance(rid, str) or not 0 < len(rid) <= 128:
        raise ProtocolError("id: must be a non-empty string of at most 128 characters")
    try:
        cls = TaskClass(str(obj.get("cls")))
    except ValueError:
        raise ProtocolError("cls: must be 'hp' or 'lp'") from None
    size = obj.get("size")
    if isinstance(size, bool) or not isinstance(size, int | float) or not math.isfinite(size):
        raise ProtocolError("size: must be a finite number")
    if size < 0:
        raise ProtocolError("size: must be >= 0")
    if size > max_size:
        raise ProtocolError(f"size: {size:g} is above this node's maximum task size "
                            f"{max_size:g} (from the scenario's size distribution)")
    client = obj.get("client", "")
    if not isinstance(client, str) or len(client) > 64:
        raise ProtocolError("client: must be a string of at most 64 characters")
    return TaskRequest(rid, cls, float(size), client)


def encode_reply(**fields: object) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def parse_reply(line: bytes) -> dict[str, object]:
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict) or "status" not in obj:
        raise ProtocolError("reply must be a JSON object with a status")
    return obj
