"""A fog node's resource budget as a cgroup: CPU limit, memory limit, accounting, OOM.

cgroup v1 (one directory per controller) or v2 (unified). Each group lies below the
runner's own, so a run never escapes the limits it was given (docs/containers.md).
"""

from __future__ import annotations

import errno
import os
import signal
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000


class CgroupError(RuntimeError):
    """A cgroup could not be set up; the message names the file or the cause."""


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: path}; the v2 entry under the key ''."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


@dataclass(frozen=True)
class Layout:
    """Where the node groups go: v1 directories per controller, or one v2 directory."""

    version: int
    cpu: Path  # the parent directory for new groups, per role
    cpuacct: Path
    memory: Path

    @staticmethod
    def detect(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> Layout:
        """v1 where cpu, cpuacct and memory hierarchies are mounted; else v2 where the
        unified hierarchy offers cpu and memory; else a CgroupError saying what is missing."""
        own = _own_paths(proc_cgroup if proc_cgroup is not None
                         else Path("/proc/self/cgroup").read_text())

        def v1_dir(ctrl: str) -> Path | None:
            for mount in (root / ctrl, root / "cpu,cpuacct"):
                if (mount / "cgroup.procs").exists() and ctrl in own:
                    return mount / own[ctrl].lstrip("/")
            return None

        cpu, acct, mem = v1_dir("cpu"), v1_dir("cpuacct"), v1_dir("memory")
        if cpu is not None and acct is not None and mem is not None:
            return Layout(1, cpu, acct, mem)
        for unified in (root, root / "unified"):
            ctl = unified / "cgroup.controllers"
            if ctl.exists():
                have = ctl.read_text().split()
                if "cpu" in have and "memory" in have:
                    base = unified / own.get("", "/").lstrip("/")
                    return Layout(2, base, base, base)
        raise CgroupError(f"no cgroup hierarchy with cpu, cpuacct and memory under {root} "
                          "(v1) and no unified one offering cpu and memory (v2)")


# real-time budget of a node's group (cgroup v1): a short period, so that a thread that
# overran its share waits at most the rest of 100 ms, not of the kernel's default 1 s
RT_PERIOD_US = 100_000


def rt_share(n_groups: int) -> float:
    """Each node group's real-time share: 30 % (a worker's completion thread spins at
    most 0.5 ms per reply), all together at most 60 % (docs/containers.md)."""
    return min(0.3, 0.6 / max(1, n_groups))


def cpu_quota_us(cores: float, period_us: int = CFS_PERIOD_US) -> int:
    """The CFS quota per period for a limit of `cores` CPUs (at least 1 ms)."""
    if not cores > 0:
        raise CgroupError(f"cpu must be > 0 cores, got {cores!r}")
    return max(1000, round(cores * period_us))


@dataclass
class NodeCgroup:
    """One node's group(s); `dirs` are what was created, in creation order."""

    layout: Layout
    name: str
    dirs: list[Path] = field(default_factory=list)

    @property
    def cpu_dir(self) -> Path:
        return self.layout.cpu / self.name

    @property
    def acct_dir(self) -> Path:
        return self.layout.cpuacct / self.name

    @property
    def mem_dir(self) -> Path:
        return self.layout.memory / self.name

    def create(self, cpu: float | None, memory_mb: int | None,
               rt_share: float | None = None) -> None:
        """Make the group(s) and set the limits (None: no limit, accounting only).
        `rt_share`: the share of each RT_PERIOD_US for the group's real-time threads,
        where v1 gives child groups no real-time time of their own."""
        for d in dict.fromkeys((self.cpu_dir, self.acct_dir, self.mem_dir)):
            try:
                d.mkdir(exist_ok=True)
            except OSError as err:
                raise CgroupError(f"cannot create cgroup {d}: {err.strerror}") from None
            self.dirs.append(d)
        if self.layout.version == 2:
            if cpu is not None:
                _write(self.cpu_dir / "cpu.max", f"{cpu_quota_us(cpu)} {CFS_PERIOD_US}")
            if memory_mb is not None:
                _write(self.mem_dir / "memory.max", str(memory_mb * 1024 * 1024))
                if (self.mem_dir / "memory.swap.max").exists():
                    _write(self.mem_dir / "memory.swap.max", "0")
        else:
            if cpu is not None:
                _write(self.cpu_dir / "cpu.cfs_period_us", str(CFS_PERIOD_US))
                _write(self.cpu_dir / "cpu.cfs_quota_us", str(cpu_quota_us(cpu)))
            if memory_mb is not None:
                _write(self.mem_dir / "memory.limit_in_bytes", str(memory_mb * 1024 * 1024))
            if rt_share is not None and (self.cpu_dir / "cpu.rt_runtime_us").exists():
                _write(self.cpu_dir / "cpu.rt_period_us", str(RT_PERIOD_US))
                _write_rt_runtime(self.cpu_dir, round(rt_share * RT_PERIOD_US))

    def procs_files(self) -> list[str]:
        """The cgroup.procs files a process writes its pid to, to join every group."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs)]

    def add_process(self, pid: int) -> None:
        """Move `pid` into every group of this node (its threads and children follow)."""
        for f in self.procs_files():
            _write(Path(f), str(pid))

    def cpu_usage_s(self) -> float:
        """CPU seconds used by everything in the group so far."""
        if self.layout.version == 2:
            usec = _key_value((self.acct_dir / "cpu.stat").read_text(), "usage_usec")
            if usec is None:
                raise CgroupError(f"no usage_usec in {self.acct_dir / 'cpu.stat'}")
            return usec / 1e6
        return int((self.acct_dir / "cpuacct.usage").read_text()) / 1e9

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for exceeding memory_mb."""
        f = self.mem_dir / ("memory.events" if self.layout.version == 2 else "memory.oom_control")
        try:
            return _key_value(f.read_text(), "oom_kill") or 0
        except OSError:
            return 0

    def memory_failcnt(self) -> int:
        """v1: how often usage hit the limit (reclaim or OOM followed); v2: events max."""
        if self.layout.version == 2:
            return _key_value((self.mem_dir / "memory.events").read_text(), "max") or 0
        return int((self.mem_dir / "memory.failcnt").read_text())


def _key_value(text: str, key: str) -> int | None:
    """A `key N` line's N in a flat-keyed cgroup file (cpu.stat, memory.events, ...)."""
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return None


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as err:
        raise CgroupError(f"cannot write {value!r} to {path}: {err.strerror}") from None


RT_BUDGET_WAIT_S = 3.0


def _write_rt_runtime(cpu_dir: Path, runtime_us: int, wait_s: float = RT_BUDGET_WAIT_S) -> None:
    """Give the group its real-time budget, waiting for removed groups to return theirs
    (docs/containers.md); after `wait_s` the error names the groups that hold it."""
    f = cpu_dir / "cpu.rt_runtime_us"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            f.write_text(str(runtime_us))
            return
        except OSError as err:
            if err.errno != errno.EINVAL or time.monotonic() >= deadline:
                holders = sorted(
                    f"{d.name}={(d / 'cpu.rt_runtime_us').read_text().strip()}"
                    for d in cpu_dir.parent.iterdir()
                    if d.is_dir() and d != cpu_dir and (d / "cpu.rt_runtime_us").exists()
                    and (d / "cpu.rt_runtime_us").read_text().strip() not in ("0", ""))
                raise CgroupError(
                    f"cannot write {str(runtime_us)!r} to {f}: {err.strerror}"
                    f" (real-time budget held by: {', '.join(holders) or 'no visible group'})"
                ) from None
        time.sleep(0.02)


def remove_cgroup(path: str | Path, grace_s: float = 2.0) -> bool:
    """Kill what is still in the group (ours by construction) and remove it; True if
    it existed."""
    d = Path(path)
    if not d.is_dir():
        return False
    procs = d / "cgroup.procs"
    deadline = time.monotonic() + grace_s
    while True:
        try:
            pids = [int(x) for x in procs.read_text().split()]
        except OSError:
            pids = []
        if not pids:
            break
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    for _ in range(50):
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)  # the kernel frees a group a moment after its last task
    return True


__all__ = ["CFS_PERIOD_US", "CgroupError", "Layout", "NodeCgroup", "cpu_quota_us",
           "remove_cgroup"]
