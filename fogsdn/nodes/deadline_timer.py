"""An asyncio wake-up at an absolute `time.monotonic()` instant, to the microsecond.

asyncio's own timeouts go through epoll, whose timeout is whole milliseconds: a send
due 0.2 ms from now waits a full millisecond (at time scale 2 that is half a model
millisecond). A timerfd armed at the absolute instant (TFD_TIMER_ABSTIME, CLOCK_MONOTONIC:
the clock `time.monotonic()` reads) wakes the loop through its readiness instead, with
the thread's timer slack set to 1 ns. Where timerfd cannot be made, the loop's own timer
is used and `precise` is False.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = 0o4000
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1
PR_SET_TIMERSLACK = 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class DeadlineTimer:
    """`await timer.until(t)` returns at monotonic instant `t`, or at once on `wake()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self._target = 0.0
        self._fd = -1
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            self._libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
            fd = self._libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        except (OSError, AttributeError):
            fd = -1
        if fd >= 0:
            self._fd = fd
            loop.add_reader(fd, self._fired)

    @property
    def precise(self) -> bool:
        return self._fd >= 0

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return
        self._due()

    def _due(self) -> None:
        # a fire armed for an earlier instant and not read in time is not this wait's
        if time.monotonic() >= self._target:
            self.wake()

    def wake(self) -> None:
        """End the current wait now (an interrupt)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def until(self, t_monotonic: float) -> None:
        delay = t_monotonic - time.monotonic()
        if delay <= 0:
            return
        self._waiter = self._loop.create_future()
        self._target = t_monotonic
        handle = None
        if self._fd >= 0:
            spec = _Itimerspec()
            spec.it_value.tv_sec = int(t_monotonic)
            spec.it_value.tv_nsec = int((t_monotonic - int(t_monotonic)) * 1e9)
            if self._libc.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(spec),
                                          None) != 0:
                handle = self._loop.call_later(delay, self.wake)
        else:
            handle = self._loop.call_later(delay, self.wake)
        try:
            await self._waiter
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
