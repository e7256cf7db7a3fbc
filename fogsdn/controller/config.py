"""What the controller process is told at start: one typed file, written by whoever
starts it (the emulate engine, the controller benchmark) and read by `fogsdn.controller.app`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from fogsdn.controller.rt_measure import RT_SAMPLE_DEFAULT
from fogsdn.core.fabric import Fabric

CONFIG_ENV = "FOGSDN_CONTROLLER_CONFIG"  # the path of the config file, in the environment


class ConfigFile(TypedDict):
    """`ControllerConfig.to_dict`: the file's JSON (paths as strings)."""

    fabric: dict[str, object]  # Fabric.to_dict
    scenario: str
    events: str
    ready: str
    registration: str
    available: dict[str, bool]
    measure_rt: int
    load_reports: str | None
    load_stream: NotRequired[str | None]


@dataclass(frozen=True)
class ControllerConfig:
    fabric: Fabric
    scenario: Path  # the run's resolved scenario file
    events: Path  # JSON lines the controller appends (ready, availability, decisions, ...)
    ready: Path  # written once the pipeline is in ("ready", or why not)
    registration: Path  # Unix socket for OFN join/leave registrations
    available: Mapping[str, bool] = field(default_factory=dict)  # OFN state at start
    # time one connection in N (a power of two; 0 none) into controller-rt.csv
    measure_rt: int = RT_SAMPLE_DEFAULT
    # Unix datagram socket the workers report their counts to (fogsdn.core.load_report);
    # None: a per-request policy sees only the connections the controller decided
    load_reports: Path | None = None
    # the same reports as lines on a Unix stream socket (workers on other servers, whose
    # reports ssh forwards: it carries stream sockets only); None: not listened on
    load_stream: Path | None = None

    def to_dict(self) -> ConfigFile:
        return {"fabric": self.fabric.to_dict(), "scenario": str(self.scenario),
                "events": str(self.events), "ready": str(self.ready),
                "registration": str(self.registration), "available": dict(self.available),
                "measure_rt": self.measure_rt,
                "load_reports": None if self.load_reports is None else str(self.load_reports),
                "load_stream": None if self.load_stream is None else str(self.load_stream)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControllerConfig:
        return cls(fabric=Fabric.from_dict(d["fabric"]), scenario=Path(d["scenario"]),
                   events=Path(d["events"]), ready=Path(d["ready"]),
                   registration=Path(d["registration"]),
                   available={str(k): bool(v) for k, v in d.get("available", {}).items()},
                   measure_rt=int(d.get("measure_rt", RT_SAMPLE_DEFAULT)),
                   load_reports=(None if d.get("load_reports") is None
                                 else Path(d["load_reports"])),
                   load_stream=(None if d.get("load_stream") is None
                                else Path(d["load_stream"])))

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

    @classmethod
    def from_environment(cls) -> ControllerConfig:
        return cls.from_dict(json.loads(Path(os.environ[CONFIG_ENV]).read_text()))
