"""Start a command as a container inside a Mininet host (docs/containers.md).

The container is the host's network namespace plus its own mount, PID and UTS
namespaces, inside the node's cgroups before anything else runs; private /tmp and /run
keep only the `--keep` directories. The parent forwards SIGTERM/SIGINT and ends as the
command ended, so the runner sees the worker's own fate (e.g. an OOM kill).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import sys
import time
from contextlib import suppress
from pathlib import Path

from fogsdn.core.cli_args import command_after_dashes

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG = 1
PRIVATE_DIRS = ("/tmp", "/run")

_libc = ctypes.CDLL(None, use_errno=True)


class ContainerError(OSError):
    """A namespace or mount step failed; the message names it."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise ContainerError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                       enc(data)), f"mount {target}")


def kept_under_private(keep: list[str]) -> list[str]:
    """The `--keep` directories a private /tmp or /run would hide, outermost only (a
    directory inside another kept one comes along with it) (pure)."""
    out: list[str] = []
    for p in sorted({os.path.abspath(k) for k in keep}):
        if not any(p == d or p.startswith(d + "/") for d in PRIVATE_DIRS):
            continue
        if any(p == q or p.startswith(q + "/") for q in out):
            continue
        out.append(p)
    return out


def needed_dirs(cmd: list[str]) -> list[str]:
    """What the command needs to run, kept visible too: the project, the Python install
    and virtual environment, the working directory, the executable's folder (a project
    cloned under /tmp, as CI and `mktemp -d` do, must not vanish under the private /tmp)."""
    dirs = [str(Path(__file__).resolve().parents[2]), sys.prefix, sys.base_prefix,
            os.getcwd()]
    if cmd and os.path.isabs(cmd[0]):
        dirs.append(os.path.dirname(cmd[0]))
    return dirs


def in_cgroup(proc_cgroup: str, group: str) -> int:
    """In how many hierarchies /proc/self/cgroup's text puts us in `group` (pure)."""
    return sum(1 for line in proc_cgroup.splitlines()
               if line.rsplit(":", 1)[-1].rstrip("/").endswith("/" + group))


def await_cgroup(group: str, lines: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while in_cgroup(Path("/proc/self/cgroup").read_text(), group) < lines:
        if time.monotonic() > deadline:
            raise ContainerError(0, f"not moved into cgroup {group} within {timeout_s:g} s")
        time.sleep(0.005)


def enter(name: str, joins: list[str], keep: list[str], group: str | None = None,
          lines: int = 0) -> None:
    """Steps 1-3 and the hostname, in this process (the fork follows)."""
    for f in joins:
        try:
            Path(f).write_text(str(os.getpid()))
        except OSError as err:
            raise ContainerError(err.errno or 0, f"join cgroup {f}: {err.strerror}") from None
    if group is not None:
        await_cgroup(group, lines)
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in kept_under_private(keep)]
    for d in PRIVATE_DIRS:
        _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=1777" if d == "/tmp" else "mode=755")
    for p, fd in kept:
        os.makedirs(p, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", p, None, MS_BIND)
        os.close(fd)
    socket.sethostname(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="hostname inside the container")
    ap.add_argument("--join", action="append", default=[], help="a cgroup.procs file to join")
    ap.add_argument("--await-cgroup", metavar="GROUP",
                    help="wait until the runner has moved this process into GROUP")
    ap.add_argument("--await-lines", type=int, default=1,
                    help="in how many hierarchies (v1: one per controller; v2: 1)")
    ap.add_argument("--keep", action="append", default=[],
                    help="a directory under /tmp or /run to keep visible (the project, "
                         "Python and the working directory always are)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = command_after_dashes(a.command)
    if not cmd:
        print("container: no command given (after --)", file=sys.stderr)
        return 2
    try:
        enter(a.name, a.join, [*a.keep, *needed_dirs(cmd)], a.await_cgroup, a.await_lines)
    except ContainerError as err:
        print(f"container {a.name}: {err.strerror}", file=sys.stderr, flush=True)
        return 71  # EX_OSERR
    pid = os.fork()
    if pid == 0:  # PID 1 of the new namespace
        try:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            os.execvp(cmd[0], cmd)
        except OSError as err:
            print(f"container {a.name}: {cmd[0]}: {err}", file=sys.stderr, flush=True)
        os._exit(127)

    def forward(signum: int, frame: object) -> None:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # end as the command ended
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
