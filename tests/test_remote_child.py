"""The wrapper of a run's process on another server (fogsdn.netem.remote_child): the end
of its stdin (the runner closed it, or died with its ssh) stops the child, a clean stop
first; the child's exit status comes back as a shell states it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from fogsdn.netem.remote_child import exit_status

_TERM_WRITES = """
import signal, sys, time
def bye(*_):
    open(sys.argv[1], "w").write("flushed")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(sys.argv[1] + ".up", "w").write("up")
time.sleep(60)
"""


def _wrapped(*command: str, grace: float = 8.0) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "fogsdn.netem.remote_child", "--grace",
                             str(grace), "--", *command], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_closing_stdin_stops_the_child_cleanly(tmp_path: Path) -> None:
    mark = tmp_path / "flushed"
    p = _wrapped(sys.executable, "-c", _TERM_WRITES, str(mark))
    _wait_for(Path(f"{mark}.up"))
    assert p.stdin is not None
    p.stdin.close()
    assert p.wait(20) == 0  # the child's own status: it handled SIGTERM and flushed
    assert mark.read_text() == "flushed"


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    up = tmp_path / "up"
    stubborn = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "open(sys.argv[1], 'w').write('up'); time.sleep(60)")
    p = _wrapped(sys.executable, "-c", stubborn, str(up), grace=0.3)
    _wait_for(up)
    assert p.stdin is not None
    p.stdin.close()
    assert p.wait(20) == 128 + 9


def test_the_childs_status_comes_back() -> None:
    p = _wrapped(sys.executable, "-c", "import sys; sys.exit(7)")
    assert p.wait(20) == 7
    p = _wrapped("/nonexistent/binary")
    assert p.wait(20) == 127
    assert p.stderr is not None and b"/nonexistent/binary" in p.stderr.read()
    p = _wrapped()
    assert p.wait(20) == 2


def test_exit_status_of_a_signal_is_128_plus_it() -> None:
    assert exit_status(-15) == 143 and exit_status(0) == 0 and exit_status(3) == 3


def test_offset_lines_keep_their_nanoseconds_positive() -> None:
    from fogsdn.netem.remote_child import offset_line

    assert offset_line(1000.5) == "monotonic 1000 500000000\n"
    assert offset_line(-1.25) == "monotonic -2 750000000\n"
    assert offset_line(-0.000000001) == "monotonic -1 999999999\n"


def test_the_child_reads_the_clock_it_was_given() -> None:
    """A server's clock corrected to the runner's: the child's CLOCK_MONOTONIC reads the
    wrapper's plus the offset (a time namespace of its own), the wrapper's is unchanged."""
    clock = "import sys, time\nfor _ in sys.stdin: print(repr(time.monotonic()), flush=True)"
    p = subprocess.Popen([sys.executable, "-m", "fogsdn.netem.remote_child", "--pass-stdin",
                          "--clock-offset", "-12.5", "--", sys.executable, "-u", "-c", clock],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdin is not None and p.stdout is not None
    t0 = time.monotonic()
    p.stdin.write("\n")
    p.stdin.flush()
    there = float(p.stdout.readline())
    t1 = time.monotonic()
    p.stdin.close()
    assert p.wait(20) == 0
    assert t0 - 12.5 <= there <= t1 - 12.5


def test_an_offset_that_is_not_a_number_is_refused() -> None:
    r = subprocess.run([sys.executable, "-m", "fogsdn.netem.remote_child", "--clock-offset",
                        "nan", "--", "true"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "--clock-offset" in r.stderr and r.stderr.count("\n") == 1


def test_a_correction_inside_a_shifted_clock_counts_from_that_clock() -> None:
    """On a server whose own clock is shifted (a time namespace: the test servers), the
    child's offset is the server's plus the correction, not the correction alone."""
    from fogsdn.netem.remote_child import current_offset_s

    assert current_offset_s("monotonic        1000         0\nboottime 0 0\n") == 1000.0
    assert current_offset_s("monotonic -2 750000000\n") == -1.25
    assert current_offset_s("") == 0.0
    clock = "import time; print(repr(time.monotonic()))"
    inner = (f"sleep 3 | {sys.executable} -m fogsdn.netem.remote_child --clock-offset -1000 "
             f"-- {sys.executable} -c '{clock}'")
    t0 = time.monotonic()
    r = subprocess.run(["unshare", "--time", "--monotonic", "1000", "--fork", "sh", "-c",
                        inner], capture_output=True, text=True, timeout=30,
                       cwd=Path(__file__).resolve().parents[1])
    t1 = time.monotonic()
    assert r.returncode == 0, r.stderr
    assert t0 <= float(r.stdout) <= t1  # this machine's clock again
