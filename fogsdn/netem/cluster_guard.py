"""The guard of one run on one server: whatever the run made there goes when the run
ends, however it ends (docs/scale-out.md).

The runner starts one guard per server over ssh (`GuardSession`) and keeps its stdin
open; it tells the guard each process it starts there (`pid N`). When the guard's stdin
closes (the runner said `done`, or died and its ssh with it), the guard stops those
processes (by PID and start time, never by name) and removes every Open vSwitch bridge
and interface on the server whose name starts with the run's tag, which nothing but this
run can carry, and the run's own folders there (`--remove-dir`, a folder named with
the tag). Never `mn -c`: the server's other bridges and controllers are not ours.

    python -m fogsdn.netem.cluster_guard --tag TAG [--remove-dir DIR]...
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from fogsdn.core.processes import (
    ours_alive,
    own_group_dying_with_parent,
    proc_start_time,
    stop_pid,
)

TAG = re.compile(r"^[a-z][a-z0-9]{1,7}$")
READY = "guard ready"
CLEAN = "guard clean"
GUARD_TIMEOUT_S = 30.0


def remove_tagged(tag: str) -> list[str]:
    """This server's bridges and interfaces named with `tag`, removed; what was removed."""
    gone: list[str] = []
    bridges = subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True,
                             text=True, check=False).stdout.split()
    for br in bridges:
        if br.startswith(tag):
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br],
                           capture_output=True, check=False)
            gone.append(br)
    for link in sorted(p.name for p in Path("/sys/class/net").iterdir()):
        if link.startswith(tag):
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
            gone.append(link)
    return gone


def guard(tag: str, lines: Sequence[str] | None = None, remove_dirs: Sequence[str] = ()
          ) -> list[str]:
    """Read `pid N` lines until `done` or the end of stdin, then clean up; what went."""
    pids: list[tuple[int, int]] = []
    print(READY, flush=True)
    for raw in (lines if lines is not None else sys.stdin):
        kind, _, arg = raw.strip().partition(" ")
        if kind == "done":
            break
        if kind == "pid" and arg.isdigit():
            start = proc_start_time(int(arg))
            if start is not None:
                pids.append((int(arg), start))
    gone = [f"pid {pid}" for pid, start in pids if ours_alive(pid, start)
            and stop_pid(pid, start, grace_s=2.0)]
    for d in remove_dirs:
        if Path(d).exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone + remove_tagged(tag)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fogsdn.netem.cluster_guard")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--remove-dir", action="append", default=[],
                    help="a folder of the run's (its name is the tag) to remove at the end")
    args = ap.parse_args(argv)
    if not TAG.match(args.tag):
        print(f"cluster_guard: --tag {args.tag!r}: 2-8 lowercase letters and digits",
              file=sys.stderr)
        return 2
    for d in args.remove_dir:
        if Path(d).name != args.tag or not Path(d).is_absolute():
            print(f"cluster_guard: --remove-dir {d!r}: an absolute folder named {args.tag}",
                  file=sys.stderr)
            return 2
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the session's end is stdin's end
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gone = guard(args.tag, remove_dirs=args.remove_dir)
    print(f"{CLEAN} {' '.join(gone)}".rstrip(), flush=True)
    return 0


class GuardSession:
    """The runner's end of one server's guard: its ssh, which dies with the runner."""

    def __init__(self, ssh: Sequence[str], tag: str, python: str = sys.executable,
                 remove_dirs: Sequence[str] = ()) -> None:
        """`ssh`: the command that reaches the server (`ssh [options] user@address`);
        `remove_dirs`: the run's folders there (each named `tag`)."""
        dirs = [w for d in remove_dirs for w in ("--remove-dir", d)]
        self.proc = subprocess.Popen(
            [*ssh, python, "-m", "fogsdn.netem.cluster_guard", "--tag", tag, *dirs],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=own_group_dying_with_parent)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        if first != READY:
            self.proc.kill()
            raise RuntimeError(f"cluster guard did not start: {first or 'no output'}")

    def watch(self, pid: int) -> None:
        """A process of the run on this server, to be stopped at the end."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"pid {pid}\n")
        self.proc.stdin.flush()

    def close(self) -> str:
        """End of the run: the guard cleans up; its last line (what it removed)."""
        try:
            out, _ = self.proc.communicate("done\n", timeout=GUARD_TIMEOUT_S)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError) as err:
            self.proc.kill()
            return f"{CLEAN} (no answer: {err.__class__.__name__})"
        return (out or "").strip().splitlines()[-1] if (out or "").strip() else CLEAN


if __name__ == "__main__":
    sys.exit(main())
