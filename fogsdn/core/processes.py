"""Our own processes, by PID and start time, so that a recycled PID is never signalled.

Shared by the runner's cleanup and the link elements (fogsdn.netem.linkem), which start
processes of their own.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` for every child: SIGTERM it when the runner dies, however it dies
    (SIGTERM so that a client flushes its trace; docs/reliability.md). The signal follows
    the thread that forked the child: one the watch thread restarts dies with that thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def killed_with_parent() -> None:
    """`preexec_fn` for a child that holds namespaces and flushes nothing: SIGKILL at the
    parent's death (`unshare --fork` ignores SIGTERM while it waits for its child)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def hangup_default() -> None:
    """`preexec_fn`: SIGHUP back to its default action. A runner started under `nohup`
    ignores SIGHUP and its children inherit that, but Mininet stops every node's shell
    with SIGHUP: ignored, a local shell outlived the run and a remote one's ssh held
    `stop` for ever."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def own_group_dying_with_parent() -> None:
    """`preexec_fn` for an ssh of ours: its own process group (a Ctrl-C is the runner's
    to handle, not ssh's), `die_with_parent`, and a SIGHUP that ends it
    (`hangup_default`)."""
    os.setpgrp()
    die_with_parent()
    hangup_default()


def proc_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def ours_alive(pid: int, start: int) -> bool:
    """Still running and still the process we started (an exited child that its parent
    has not reaped yet, a zombie, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and int(fields[19]) == start


def stop_pid(pid: int, start: int, grace_s: float = 3.0) -> bool:
    """SIGTERM, then SIGKILL after `grace_s`, only if `pid` is still the process we started."""
    if not ours_alive(pid, start):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not ours_alive(pid, start):
            return True
        time.sleep(0.05)
    if ours_alive(pid, start):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})

# Set by SIGINT or SIGTERM from the first line of a run's script on (catch_stop_signals):
# one flag for the whole life of the process, so a signal is never an exception that
# some import's `except:` can swallow, and the phases that start things check it first.
STOP_REQUESTED = threading.Event()


def catch_stop_signals() -> threading.Event:
    """SIGINT and SIGTERM set STOP_REQUESTED from now on, silently; returns it.

    Called as a script's first statement (docs/reliability.md, "A stop at any
    instant"): until then Python turns SIGINT into a KeyboardInterrupt wherever the
    main thread happens to be, an import's bare `except:` included, and SIGTERM kills
    at once. The signals are also unblocked here, in case a parent left them blocked
    (a mask survives fork and exec; `exec_with_stop_signals_held` relies on that)."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, _note_stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return STOP_REQUESTED


def _note_stop(signum: int, frame: FrameType | None) -> None:
    STOP_REQUESTED.set()


def stop_signals_caught() -> bool:
    """Whether catch_stop_signals' handler is the one in place now."""
    return all(signal.getsignal(stop) is _note_stop for stop in STOP_SIGNALS)


def stop_signals_as_exceptions() -> None:
    """Python's own defaults again (SIGINT raises KeyboardInterrupt, SIGTERM ends the
    process), for work that stops by exception (a simulation); a signal already noted
    is raised now, as KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if STOP_REQUESTED.is_set():
        raise KeyboardInterrupt


def exec_with_stop_signals_held(path: str, argv: list[str]) -> None:
    """`os.execv`, with SIGINT and SIGTERM blocked across it: one that arrives while the
    new interpreter starts stays pending until its catch_stop_signals, instead of
    meeting Python's own start-up (a KeyboardInterrupt traceback, or death by the
    signal)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    if STOP_REQUESTED.is_set():  # noted before the block: pending, it survives the exec
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    try:
        os.execv(path, argv)
    finally:  # only reached if exec failed
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back from this process and the children it forks meanwhile.

    For Mininet's build, which hangs if a Ctrl-C kills an `mnexec` before it detaches
    (docs/reliability.md, "Signals during the network's build"). At the end the noted
    signals are raised again, so the run stops as usual.
    """
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        if signum not in noted:  # the kernel keeps one of each pending signal, too
            noted.append(signum)

    handlers: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # where signal() may be set
        for stop in sorted(STOP_SIGNALS):
            if signal.getsignal(stop) not in (signal.SIG_IGN, None):  # None: not from Python
                handlers[stop] = signal.signal(stop, note)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            if signal.getsignal(signum) is note:  # unless the body installed its own
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        for signum in noted:
            signal.raise_signal(signum)
