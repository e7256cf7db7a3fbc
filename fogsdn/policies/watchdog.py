"""A time limit on the user's policy code (importing it, building it, `routes`, `decide`,
`stages`)
where it runs on a program's main thread: the simulator, the checker, `predict.py`.

A loop in user code used to hang all three for ever. `watchdog()` arms one interval timer
for the whole program section (not one per call: the simulator asks `decide` up to a
million times a second); `user_call` notes which call is running and since when; the
timer's handler, on the main thread, raises `PolicyTimeout` inside the stuck call once
it has run past the limit, naming it. Off the main thread (the live controller's event
thread) nothing is armed: that process is supervised from outside. A caller's own
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
