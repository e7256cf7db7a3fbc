"""fogsdn.core.processes: stop signals held back from what Mininet forks while it builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

from conftest import ROOT, wait_until

from fogsdn.core.processes import stop_signals_deferred


def _blocked(pid: int) -> int:
    """The signal numbers `pid` has blocked, as a bit mask (bit n-1 for signal n)."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith("SigBlk:"))
    return int(line.split()[1], 16)


def _has(mask: int, sig: signal.Signals) -> bool:
    return bool(mask >> (sig - 1) & 1)


def _pending(sig: signal.Signals) -> bool:
    """`sig` waits undelivered, for the process or for one of its threads."""
    for status in [Path("/proc/self/status"), *Path("/proc/self/task").glob("*/status")]:
        try:
            text = status.read_text()
        except OSError:  # a thread that has just ended
            continue
        for ln in text.splitlines():
            if ln.startswith(("ShdPnd:", "SigPnd:")) and _has(int(ln.split()[1], 16), sig):
                return True
    return False


def _let_python_handlers_run() -> None:
    """Python runs a signal's handler in the main thread between bytecodes: give it
    some (a loop's back edges) after the kernel has delivered it."""
    for _ in range(10_000):
        pass


def test_children_forked_meanwhile_never_see_ctrl_c_and_the_runner_still_does() -> None:
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    # the runner has several threads, and a signal sent to the process goes to any one
    # that does not block it: this one has not blocked any
    other_may_end = threading.Event()
    other = threading.Thread(target=other_may_end.wait, name="not-blocking")
    other.start()
    old = signal.signal(signal.SIGTERM, handler)
    try:
        with stop_signals_deferred():
            child = subprocess.Popen(["sleep", "30"])
            assert not _has(_blocked(other.native_id), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # as a Ctrl-C to the group would
            wait_until(lambda: bool(got) or not _pending(signal.SIGTERM),
                       "the SIGTERM to reach the thread that does not block it", 10.0)
            _let_python_handlers_run()
            assert got == []  # held back, whichever thread the kernel chose
        _let_python_handlers_run()
        assert got == [signal.SIGTERM]  # delivered once the build is over
        mask = _blocked(child.pid)  # the child keeps the block across exec
        assert _has(mask, signal.SIGINT) and _has(mask, signal.SIGTERM)
        child.kill()
        child.wait(5)
        # what is forked after the build is signalled as usual
        after = subprocess.Popen(["sleep", "30"])
        mask = _blocked(after.pid)
        after.kill()
        after.wait(5)
        assert not _has(mask, signal.SIGINT) and not _has(mask, signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is handler  # the runner's, as before
    finally:
        signal.signal(signal.SIGTERM, old)
        other_may_end.set()
        other.join(5)


# a script that catches the stop signals at its first line, says so, then works (a
# KeyboardInterrupt-swallowing import stands in for the imports a signal used to meet)
_EARLY = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
from fogsdn.core.processes import catch_stop_signals, exec_with_stop_signals_held
stop = catch_stop_signals()
print("caught", flush=True)
if sys.argv[2] == "exec":  # a signal noted before the exec is not lost either
    time.sleep(float(sys.argv[3]))  # hold the signals across exec into a second interpreter
    argv = [sys.executable, __file__, sys.argv[1], "work"]
    exec_with_stop_signals_held(sys.executable, argv)
deadline = time.monotonic() + 20
while not stop.is_set() and time.monotonic() < deadline:
    try:
        time.sleep(0.01)
    except:  # noqa: E722 (what some imports do)
        pass
print("stopped" if stop.is_set() else "went on", flush=True)
sys.exit(130 if stop.is_set() else 0)
'''


def _run_early(tmp_path: Path, mode: str, sig: signal.Signals, wait_s: float = 0.0
               ) -> tuple[int, str]:
    script = tmp_path / "early.py"
    script.write_text(_EARLY)
    p = subprocess.Popen([sys.executable, str(script), str(ROOT), mode, str(wait_s)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "caught"
    p.send_signal(sig)
    out, _ = p.communicate(timeout=30)
    return p.returncode, out


def test_a_caught_stop_signal_is_a_flag_no_bare_except_can_swallow(tmp_path: Path) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        rc, out = _run_early(tmp_path, "work", sig)
        assert (rc, out.strip()) == (130, "stopped"), sig


def test_a_stop_signal_during_exec_waits_for_the_next_interpreters_catch(
        tmp_path: Path) -> None:
    """Sent right after the first interpreter's catch, the signal may arrive before,
    during or after the exec; in every case the second interpreter stops on it."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        for wait_s in (0.0, 0.2):  # the signal during the exec, or noted before it
            rc, out = _run_early(tmp_path, "exec", sig, wait_s)
            assert rc == 130 and out.strip().endswith("stopped"), (sig, wait_s, rc, out)


_UNDER_NOHUP = """
import os, signal, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup: children inherit it
from fogsdn.core.processes import own_group_dying_with_parent
for name, pre in (("setpgrp", os.setpgrp), ("ours", own_group_dying_with_parent)):
    p = subprocess.Popen(["sleep", "30"], preexec_fn=pre)
    with open(f"/proc/{p.pid}/status") as f:
        ign = next(int(x.split()[1], 16) for x in f if x.startswith("SigIgn:"))
    os.killpg(p.pid, signal.SIGHUP)  # how Mininet stops a node's shell (here, its ssh)
    try:
        p.wait(timeout=3)
        ended = True
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        ended = False
    print(name, bool(ign & 1), ended)
"""


def test_an_ssh_of_ours_ends_at_sighup_even_under_nohup() -> None:
    """ssh keeps an inherited SIGHUP ignore, so under `nohup` a remote node's ssh shell
    outlived Mininet's SIGHUP and `Mininet.stop` waited for it for ever; ours reset it."""
    r = subprocess.run([sys.executable, "-c", _UNDER_NOHUP, str(ROOT)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # the control: a child that only takes its own group keeps the ignore and lives on
    assert r.stdout.split("\n")[:2] == ["setpgrp True False", "ours False True"], r.stdout
