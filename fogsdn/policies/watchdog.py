"""A time limit on the user's policy code (importing it, building it, `routes`, `decide`,
`stages`)
where it runs on a program's main thread: the simulator, the checker, `predict.py`.

A loop in user code used to hang all three for ever. `watchdog()` arms one interval timer
for the whole program section (not one per call: the simulator asks `decide` up to a
million times a second); `user_call` notes which call is running and since when; the
timer's handler, on the main thread, raises `PolicyTimeout` inside the stuck call once
it has run past the limit, naming it. Off the main thread (the live controller's event
thread) the signal cannot reach: there `ThreadWatchdog` watches instead, raising the
timeout asynchronously in the stuck thread (`PyThreadState_SetAsyncExc`, which a pure
Python loop sees at its next bytecode; a call blocked in C is named but not stopped).
A caller's own
interval timer (a deadline of its own) is put back, with its time left, when the outer
`watchdog()` block ends.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fogsdn.policies.base import PolicyError

T = TypeVar("T")
LIMIT_ENV = "FOGSDN_POLICY_TIME_LIMIT_S"  # seconds one call of user code may take
DEFAULT_LIMIT_S = 10.0
TICK_S = 0.25  # how often the timer looks


class PolicyTimeout(PolicyError):
    """A call of the user's policy code that did not return within the limit."""

    def __init__(self, *args: object) -> None:
        # raised by class from another thread (ThreadWatchdog): no arguments then
        super().__init__(*(args or (f"did not return within the time limit (a loop in the "
                                    f"policy's code? the limit is {LIMIT_ENV})",)))


def limit_s() -> float:
    """The limit: FOGSDN_POLICY_TIME_LIMIT_S, else DEFAULT_LIMIT_S (a bad value: default)."""
    try:
        value = float(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT_S))
    except ValueError:
        return DEFAULT_LIMIT_S
    return value if 0 < value < 1e9 else DEFAULT_LIMIT_S


# the call running now (None: ours), when it began, and the limit it runs under
_running: list[Any] = [None, 0.0, DEFAULT_LIMIT_S]
_armed = [0]  # nesting depth of `watchdog()`


def _tick(signum: int, frame: object) -> None:
    what, since, limit = _running
    if what is not None and time.monotonic() - since > limit:
        _running[0] = None  # said once
        raise PolicyTimeout(f"{what} did not return within {limit:g} s (a loop in the "
                            f"policy's code? the limit is {LIMIT_ENV})")


@contextmanager
def watchdog() -> Iterator[None]:
    """Watch user calls made inside this block (on the main thread; nests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outer = _armed[0] == 0
    was: Any = None
    their: tuple[float, float] = (0.0, 0.0)
    began = time.monotonic()
    if outer:
        _running[2] = limit_s()
        was = signal.signal(signal.SIGALRM, _tick)
        their = signal.setitimer(signal.ITIMER_REAL, TICK_S, TICK_S)
    _armed[0] += 1
    try:
        yield
    finally:
        _armed[0] -= 1
        if outer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, was if was is not None else signal.SIG_DFL)
            if their[0] > 0:  # a caller's own timer (a deadline of its own) runs on
                left = their[0] - (time.monotonic() - began)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), their[1])


def user_call(what: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, noted as the user's code `what` for the watchdog."""
    outer = _running[0]
    if outer is not None:  # already inside a watched call: its clock runs on
        return call(*args)
    _running[0], _running[1] = what, time.monotonic()
    try:
        return call(*args)
    finally:
        _running[0] = None


class ThreadWatchdog:
    """A time limit on user calls made on threads other than the main one (the live
    controller's event thread): one daemon thread looks every TICK_S at the calls under
    way and raises `PolicyTimeout` in the thread of one past the limit, once."""

    def __init__(self, limit: float | None = None) -> None:
        self.limit = limit_s() if limit is None else limit
        self._calls: dict[int, tuple[str, float]] = {}  # thread id -> (what, since)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.timed_out: list[str] = []  # what was stopped, in order

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="policy-watchdog",
                                            daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while True:
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:
                late = [(tid, what) for tid, (what, since) in self._calls.items()
                        if now - since > self.limit]
                for tid, what in late:
                    del self._calls[tid]  # said once
                    self.timed_out.append(what)
                    _raise_in(tid, PolicyTimeout)

    def call(self, what: str, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` under the limit, on whatever thread calls it."""
        tid = threading.get_ident()
        with self._lock:
            self._start()
            self._calls[tid] = (what, time.monotonic())
        try:
            return call(*args)
        finally:
            with self._lock:
                self._calls.pop(tid, None)


_SHARED: list[ThreadWatchdog] = []


def thread_watchdog() -> ThreadWatchdog:
    """The process's one ThreadWatchdog (its thread starts with the first watched call)."""
    if not _SHARED:
        _SHARED.append(ThreadWatchdog())
    return _SHARED[0]


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
