"""Live size-based dispatch (seed 002b) as TCP destination ports the switch matches (pure).

The service listens on `service_port`; a size-based policy's stage i (host i in
scenario order) is reached at `service_port + 1 + i` on the service address. The
controller installs one proactive rule per stage (new connection to that port ->
conntrack NAT to host i's worker at `service_port`), so no request needs the
controller:

* SITA (sita_e, sita_u): the client, which knows its task's size, picks the port of
  the size's interval; the interval travels in the destination port.
* TAGS: every task starts at stage 0; the worker at stage i serves it up to the
  cutoff s_i and answers `killed`; the client re-sends the same request id to stage
  i + 1's port.

Other policies use the service port itself (select groups or the per-request path).
A policy states its plan (`Policy.stages(view)`, default kind "none"); every engine
asks that method: the simulator kills and restarts where it says, and
`controller.policies.stage_plan` gives the live run the plan as the run starts, which
the runner hands to clients and workers as JSON (`to_json` / `from_json`).
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
