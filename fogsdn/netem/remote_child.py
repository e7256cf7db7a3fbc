"""A run's process on another server, started over ssh: it ends when the runner's end of
that ssh ends (docs/scale-out.md).

ssh without a terminal gives a remote command no hangup when its client goes: a worker
started as `ssh server python -m fogsdn.nodes.worker` would outlive a runner that died or
stopped it. This wrapper runs the command as its child and reads its own stdin, which
the runner holds open; at its end (the runner closed it to stop the process, or the
runner died and its ssh with it) the child gets SIGTERM (a client flushes its trace),
then SIGKILL after a grace. The child dies with the wrapper as well. The wrapper exits
with the child's status, or 128 + the signal that ended it, which ssh passes back.

    python -m fogsdn.netem.remote_child [--grace S] -- COMMAND...

Standard library only: it runs before anything else of the project is needed there.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1
GRACE_S = 8.0  # a traffic engine records its outstanding requests and flushes meanwhile


def _dies_with_wrapper() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def exit_status(returncode: int) -> int:
    """A child's Popen return code as a shell states it: a signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run(command: Sequence[str], grace_s: float = GRACE_S) -> int:
    """Run `command` until it exits or stdin ends; its exit status."""
    child = subprocess.Popen(list(command), stdin=subprocess.DEVNULL,
                             preexec_fn=_dies_with_wrapper)

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
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        print("remote_child: no command after --", file=sys.stderr)
        return 2
    try:
        return run(command, a.grace)
    except OSError as err:
        print(f"remote_child: {command[0]}: {err.strerror or err}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
