"""Live size-based dispatch (seed 002b) as TCP destination ports the switch matches (pure).

Stage i (host i in scenario order) is reached at `service_port + 1 + i`, so the switch
routes SITA and TAGS stages by proactive rules without the controller
(docs/architecture.md, "Size-based stages as ports").
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

StageKind = Literal["sita", "tags", "none"]


@dataclass(frozen=True)
class StagePlan:
    kind: StageKind
    hosts: tuple[str, ...] = ()  # stage i is hosts[i]
    cutoffs: tuple[float, ...] = ()  # s_1 < ... < s_(h-1), size units

    def first_stage(self, size: float) -> int | None:
        """The stage a new task of this size goes to (None: the plain service port)."""
        if self.kind == "sita":
            return bisect_left(self.cutoffs, size)
        if self.kind == "tags":
            return 0
        return None

    def next_stage(self, stage: int) -> int | None:
        """Where a task killed at `stage` restarts (TAGS), None after the last."""
        return stage + 1 if self.kind == "tags" and stage + 1 < len(self.hosts) else None

    def kill_after(self, host: str) -> float | None:
        """The size at which `host` kills a task (TAGS stages but the last), else None."""
        if self.kind != "tags" or host not in self.hosts:
            return None
        i = self.hosts.index(host)
        return self.cutoffs[i] if i < len(self.cutoffs) else None

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "hosts": list(self.hosts),
                           "cutoffs": list(self.cutoffs)})

    @classmethod
    def from_json(cls, text: str) -> StagePlan:
        """The plan from `to_json`'s text; ValueError naming the field otherwise."""
        try:
            d = json.loads(text)
            kind = d["kind"]
            hosts = tuple(str(h) for h in d.get("hosts", ()))
            cutoffs = tuple(float(c) for c in d.get("cutoffs", ()))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"stages: not a stage plan: {err}") from None
        if kind not in ("sita", "tags", "none"):
            raise ValueError(f"stages.kind: must be sita, tags or none, got {kind!r}")
        if kind != "none" and len(cutoffs) != len(hosts) - 1:
            raise ValueError("stages.cutoffs: need one fewer than hosts")
        return cls(kind, hosts, cutoffs)


def stage_port(service_port: int, stage: int) -> int:
    return service_port + 1 + stage
