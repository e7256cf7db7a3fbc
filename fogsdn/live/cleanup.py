"""What a run created, recorded as it goes, so that it (or a later `--clean`) removes
exactly that: bridges by name, processes by PID and start time, interfaces and sockets
by path. Never `mn -c`: it kills by name machine-wide and deletes every bridge.
"""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fogsdn.core.processes import ours_alive, proc_start_time, stop_pid
from fogsdn.live.cgroups import remove_cgroup

RUNS_DIR = Path("/run/fogsdn/runs")


@dataclass
class RunRecord:
    tag: str
    out_dir: str
    pids: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (pid, start)
    bridges: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)  # the nodes' cgroup directories
    owner: tuple[int, int] | None = None  # the runner process (pid, start time)

    @property
    def file(self) -> Path:
        return RUNS_DIR / f"{self.tag}.json"

    def save(self) -> None:
        RUNS_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(self.file)

    def add_pid(self, label: str, pid: int) -> None:
        start = proc_start_time(pid)
        if start is not None:
            self.pids[label] = (pid, start)
            self.save()

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        d = json.loads(path.read_text())
        d["pids"] = {k: tuple(v) for k, v in d["pids"].items()}
        d["owner"] = tuple(d["owner"]) if d.get("owner") else None
        return cls(**d)


def remove_leftovers(rec: RunRecord) -> list[str]:
    """Remove everything the record names; returns what was actually found and removed."""
    removed: list[str] = []
    for label, (pid, start) in rec.pids.items():
        if stop_pid(pid, start, grace_s=1.0):
            removed.append(f"process {label} (pid {pid})")
    for br in rec.bridges:
        if bridge_exists(br):
            subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", br],
                           capture_output=True)
            removed.append(f"bridge {br}")
    for intf in rec.interfaces:
        if Path(f"/sys/class/net/{intf}").exists():
            subprocess.run(["ip", "link", "del", intf], capture_output=True)
            removed.append(f"interface {intf}")
    for d in rec.cgroups:
        if remove_cgroup(d):
            removed.append(f"cgroup {d}")
    for p in rec.paths:
        path = Path(p)
        if path.exists() and not path.is_dir():
            path.unlink(missing_ok=True)  # sockets and markers: expected, not reported
    for parent in {Path(p).parent for p in rec.paths}:
        with suppress(OSError):
            parent.rmdir()  # the run's socket folder, once empty
    rec.file.unlink(missing_ok=True)
    return removed


def bridge_exists(name: str) -> bool:
    r = subprocess.run(["ovs-vsctl", "--timeout=5", "br-exists", name], capture_output=True)
    return r.returncode == 0


def leftover_records() -> list[RunRecord]:
    if not RUNS_DIR.exists():
        return []
    out = []
    for f in sorted(RUNS_DIR.glob("*.json")):
        try:
            out.append(RunRecord.load(f))
        except (OSError, ValueError, TypeError, KeyError):
            f.unlink(missing_ok=True)
    return out


def record_of_runner(runner_pid: int, timeout: float = 60.0) -> RunRecord | None:
    """The record of the run whose runner has this PID, once its clients are started
    (for drills that kill a run's processes from outside); None after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in leftover_records():
            if rec.owner and rec.owner[0] == runner_pid and any(
                    label.startswith("client") for label in rec.pids):
                return rec
        time.sleep(0.05)
    return None


def clean_all() -> list[str]:
    """Remove the leftovers of every recorded run whose runner is gone (crashed or killed)."""
    removed: list[str] = []
    for rec in leftover_records():
        if rec.owner is not None and ours_alive(*rec.owner):
            continue  # a run in progress, not a leftover
        removed += remove_leftovers(rec)
    return removed
