"""Real CPU work for `work: cpu` scenarios: a calibrated kernel and a FIFO of servers.

The kernel is SHA-256 over a fixed buffer: hashlib releases the GIL above 2 KiB, so
server threads run in parallel and do not starve the network threads. A task of nominal
service S real ms hashes S x `calibrate`'s bytes per CPU-ms (docs/containers.md).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_BUF = memoryview(bytes(1 << 20))
CALIBRATION_BYTES = 48 << 20


def kernel(n_bytes: int) -> bytes:
    """Hash `n_bytes` bytes: the unit of real work."""
    h = hashlib.sha256()
    while n_bytes > 0:
        k = n_bytes if n_bytes < len(_BUF) else len(_BUF)
        h.update(_BUF[:k])
        n_bytes -= k
    return h.digest()


def calibrate(n_bytes: int = CALIBRATION_BYTES, repeats: int = 3) -> float:
    """Bytes the kernel hashes per CPU-ms on this machine (the fastest of `repeats`,
    by this thread's CPU time, so other load on the machine does not skew it)."""
    best = 0.0
    for _ in range(repeats):
        t0 = time.thread_time()
        kernel(n_bytes)
        dt = time.thread_time() - t0
        if dt > 0:
            best = max(best, n_bytes / (dt * 1000.0))
    if best <= 0:
        raise RuntimeError("calibration measured no CPU time")
    return best


@dataclass
class CpuTask:
    arrival: float
    work_bytes: int
    payload: Any  # what the worker needs to reply


@dataclass
class CpuServers:
    """Capacity-limited FIFO served by `servers` threads that run the kernel.

    `done(task, start, end)` is called from the server thread after each task."""

    capacity: int
    servers: int
    done: Callable[[CpuTask, float, float], None]
    _queue: deque[CpuTask] = field(default_factory=deque)
    _busy: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stop: bool = False

    @property
    def in_system(self) -> int:
        return len(self._queue) + self._busy

    def start(self, wrap: Callable[..., None] | None = None) -> None:
        for i in range(self.servers):
            target = self._serve if wrap is None else (lambda: wrap(self._serve))
            threading.Thread(target=target, daemon=True, name=f"cpu-server-{i}").start()

    def admit(self, task: CpuTask) -> bool:
        with self._cond:
            if self.in_system >= self.capacity:
                return False
            self._queue.append(task)
            self._cond.notify()
            return True

    def clear(self) -> list[CpuTask]:
        """Take everything still waiting (tasks in service finish)."""
        with self._cond:
            taken = list(self._queue)
            self._queue.clear()
            return taken

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                task = self._queue.popleft()
                self._busy += 1
            start = time.monotonic()
            kernel(task.work_bytes)
            end = time.monotonic()
            with self._cond:
                self._busy -= 1
            self.done(task, start, end)


__all__ = ["CALIBRATION_BYTES", "CpuServers", "CpuTask", "calibrate", "kernel"]
