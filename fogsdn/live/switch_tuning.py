"""The switch's settings for one live run, applied at start and given back at teardown.

SCHED_FIFO for ovs-vswitchd and a short datapath max-idle, so that datapath flows do
not outlive an OFN change (docs/architecture.md, "The switch's tuning for a run").
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from fogsdn.core.realtime import all_realtime, process_ordinary, process_realtime
from fogsdn.live.proc_memory import ovs_pid

MAX_IDLE_MS = 100  # other_config:max-idle for the run (OVS: 10,000 by default)


@dataclass
class SwitchTuning:
    """What `apply` changed, so that `restore` gives exactly that back."""

    pid: int | None = None  # ovs-vswitchd, while its threads are ours to give back
    were_realtime: set[int] = field(default_factory=set)  # its threads real-time before
    realtime: bool = False  # whether the switch ran SCHED_FIFO (kept after restore)
    max_idle: str | None = None  # the previous other_config:max-idle ("" when unset)
    notes: list[str] = field(default_factory=list)

    def apply(self, realtime: bool) -> None:
        pid = ovs_pid()
        if realtime and pid is not None:
            self.pid, self.were_realtime = pid, process_realtime(pid)
            self.realtime = all_realtime(pid)
            if not self.realtime:
                self.notes.append("the switch's threads could not run SCHED_FIFO")
        before = _vsctl("get", "Open_vSwitch", ".", "other_config")
        if before is None:
            self.notes.append("could not read the switch's other_config; max-idle unchanged")
            return
        self.max_idle = _other_config_value(before, "max-idle")
        if self.max_idle == str(MAX_IDLE_MS):
            self.max_idle = ""  # a killed run's leftover: the switch's default comes back
        if _vsctl("set", "Open_vSwitch", ".", f"other_config:max-idle={MAX_IDLE_MS}") is None:
            self.max_idle = None
            self.notes.append("could not set the switch's max-idle")

    def restore(self) -> None:
        if self.pid is not None:
            process_ordinary(self.pid, self.were_realtime)
            self.pid = None
        if self.max_idle is None:
            return
        if self.max_idle:
            _vsctl("set", "Open_vSwitch", ".", f"other_config:max-idle={self.max_idle}")
        else:
            _vsctl("remove", "Open_vSwitch", ".", "other_config", "max-idle")
        self.max_idle = None


def _other_config_value(text: str, key: str) -> str:
    """One key of `ovs-vsctl get ... other_config` output ({k=v, k2="v2"}), "" if absent."""
    body = text.strip().removeprefix("{").removesuffix("}")
    for item in body.split(","):
        k, _, v = item.strip().partition("=")
        if k == key:
            return v.strip().strip('"')
    return ""


def _vsctl(*args: str) -> str | None:
    try:
        r = subprocess.run(["ovs-vsctl", "--timeout=5", *args], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None
