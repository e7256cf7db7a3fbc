"""A run's process on another server, started over ssh: it ends when the runner's end of
that ssh ends (docs/scale-out.md).

ssh without a terminal gives a remote command no hangup when its client goes: a worker
started as `ssh server python -m fogsdn.nodes.worker` would outlive a runner that died or
stopped it. This wrapper runs the command as its child and reads its own stdin, which
the runner holds open; at its end (the runner closed it to stop the process, or the
runner died and its ssh with it) the child gets SIGTERM (a client flushes its trace),
then SIGKILL after a grace. The child dies with the wrapper as well. The wrapper exits
with the child's status, or 128 + the signal that ended it, which ssh passes back.

`--clock-offset S` runs the child in a time namespace of its own whose monotonic clock
reads this server's plus S seconds: the runner measures each server's clock against its
own and passes the difference, so that every process of the run, on any server, reads
one monotonic clock (instants are compared across processes: a send here, a completion
there, an epoch from the runner). `--pass-stdin` gives the child the wrapper's stdin
instead (the runner's clock check talks to it; the child then ends at its end itself).

    python -m fogsdn.netem.remote_child [--grace S] [--clock-offset S] [--pass-stdin] -- COMMAND...

Standard library and the project's standard-library-only helpers: it runs before
anything heavier of the project is needed there.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from fogsdn.core.cli_args import command_after_dashes
from fogsdn.core.processes import die_with_parent, hangup_default

CLONE_NEWTIME = 0x80
GRACE_S = 8.0  # a traffic engine records its outstanding requests and flushes meanwhile


class ClockError(OSError):
    """The time namespace could not be made (no kernel support, or not root)."""


def offset_line(offset_s: float) -> str:
    """`/proc/self/timens_offsets`'s monotonic line for an offset in seconds (the
    nanoseconds part is never negative)."""
    ns = round(offset_s * 1e9)
    sec, nsec = divmod(ns, 1_000_000_000)
    return f"monotonic {sec} {nsec}\n"


def current_offset_s(text: str) -> float:
    """The monotonic offset in a `/proc/self/timens_offsets` text: this process's own
    time namespace's, against the machine's (0 outside one)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "monotonic":
            return int(words[1]) + int(words[2]) / 1e9
    return 0.0


def shift_children_clock(offset_s: float) -> None:
    """The children made from now on read CLOCK_MONOTONIC plus `offset_s` (a time
    namespace of theirs; this process keeps its own clock). A namespace's offset counts
    from the machine's clock, not its parent's: ours is added."""
    try:
        here = current_offset_s(Path("/proc/self/timens_offsets").read_text())
    except OSError:
        here = 0.0  # no time namespaces: the unshare below says so
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWTIME) != 0:
        err = ctypes.get_errno()
        raise ClockError(err, f"no time namespace: {os.strerror(err)}")
    with open("/proc/self/timens_offsets", "w") as f:
        f.write(offset_line(here + offset_s))


def _dies_with_wrapper() -> None:
    die_with_parent()
    hangup_default()


def exit_status(returncode: int) -> int:
    """A child's Popen return code as a shell states it: a signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run(command: Sequence[str], grace_s: float = GRACE_S, clock_offset_s: float = 0.0,
        pass_stdin: bool = False) -> int:
    """Run `command` until it exits or stdin ends; its exit status."""
    if clock_offset_s:
        shift_children_clock(clock_offset_s)
    child = subprocess.Popen(list(command), stdin=None if pass_stdin else subprocess.DEVNULL,
                             preexec_fn=_dies_with_wrapper)
    if pass_stdin:
        return exit_status(child.wait())

    def stop_at_end_of_stdin() -> None:
        with open(sys.stdin.fileno(), "rb", buffering=0, closefd=False) as stdin:
            while stdin.read(4096):
                pass
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(grace_s)
            except subprocess.TimeoutExpired:
                child.kill()

    threading.Thread(target=stop_at_end_of_stdin, daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        # the wrapper stopped by hand: the child first, its status then ours
        signal.signal(sig, lambda s, _f: child.send_signal(signal.SIGTERM))
    return exit_status(child.wait())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fogsdn.netem.remote_child")
    ap.add_argument("--grace", type=float, default=GRACE_S,
                    help="seconds between SIGTERM and SIGKILL once stdin ends")
    ap.add_argument("--clock-offset", type=float, default=0.0,
                    help="seconds the child's monotonic clock reads ahead of this server's")
    ap.add_argument("--pass-stdin", action="store_true",
                    help="the child reads our stdin (and ends at its end itself)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    command = command_after_dashes(a.command)
    if not command:
        print("remote_child: no command after --", file=sys.stderr)
        return 2
    if not math.isfinite(a.clock_offset):
        print(f"remote_child: --clock-offset {a.clock_offset}: not a finite number",
              file=sys.stderr)
        return 2
    try:
        return run(command, a.grace, a.clock_offset, a.pass_stdin)
    except ClockError as err:
        print(f"remote_child: --clock-offset: {err.strerror}", file=sys.stderr)
        return 125
    except OSError as err:
        print(f"remote_child: {command[0]}: {err.strerror or err}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
