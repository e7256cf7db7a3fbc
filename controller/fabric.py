"""What the controller must know of the data plane: service address, hosts, ports (pure).

The runner writes it once the topology is built; the controller and the flow-table
checks in tests read it. No discovery: a fog star is known in advance, so every
forwarding rule is proactive and a task needs no packet-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fogsdn.scenario import Role, TaskClass

CT_ZONE = 7
TABLE_CLASSIFY, TABLE_DISPATCH, TABLE_FORWARD = 0, 1, 2
GROUP_ID = {TaskClass.HP: 1, TaskClass.LP: 2}
BUCKET_SCALE = 1000  # select-group weights are integers


@dataclass(frozen=True)
class HostPort:
    name: str
    ip: str
    mac: str
    port: int  # switch port number
    role: str  # a Role value, or "client"


@dataclass(frozen=True)
class Fabric:
    vip: str
    vip_mac: str
    service_port: int
    hosts: tuple[HostPort, ...] = field(default_factory=tuple)

    def host(self, name: str) -> HostPort:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def by_port(self, port: int) -> HostPort | None:
        return next((h for h in self.hosts if h.port == port), None)

    def workers(self) -> tuple[HostPort, ...]:
        return tuple(h for h in self.hosts if h.role in {r.value for r in Role})

    def clients(self) -> tuple[HostPort, ...]:
        return tuple(h for h in self.hosts if h.role == "client")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fabric:
        hosts = tuple(HostPort(**h) for h in d["hosts"])
        return cls(str(d["vip"]), str(d["vip_mac"]), int(d["service_port"]), hosts)


def bucket_weights(weights: Mapping[str, float]) -> list[tuple[str, int]]:
    """Integer select-group weights, in a stable order, for one class's route."""
    positive = {n: w for n, w in weights.items() if w > 0}
    total = sum(positive.values())
    if total <= 0:
        return []
    return [(n, max(1, round(BUCKET_SCALE * w / total))) for n, w in sorted(positive.items())]
