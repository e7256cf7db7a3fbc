"""The host's emulation lock (fogsdn.studies.study.emulation_lock): every live study
point takes it; where an ancestor process holds it (`sudo flock LOCK python ...`, as the
docs run the long live studies) it is already ours, instead of a deadlock; where an
unrelated process holds it, the point waits. Real flocks, no root."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

from fogsdn.studies.study import ancestors, emulation_lock, lock_holders


def test_holders_are_read_from_proc_locks() -> None:
    text = ("1: FLOCK  ADVISORY  WRITE 4242 fe:00:1474595 0 EOF\n"
            "2: POSIX  ADVISORY  WRITE 17 fe:00:1474595 0 EOF\n"
            "3: FLOCK  ADVISORY  WRITE 99 fe:00:7 0 EOF\n")
    assert lock_holders(text, 1474595) == {4242}
    assert lock_holders(text, 8) == set()
    assert os.getppid() in ancestors(os.getpid())


def test_a_lock_an_ancestor_holds_is_ours_and_an_unrelated_holder_is_waited_for(
        tmp_path: Path) -> None:
    lock = tmp_path / "emulation.lock"
    inner = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
             "from fogsdn.studies.study import emulation_lock\n"
             "with emulation_lock(Path(sys.argv[2])): print('in', flush=True)")
    # flock(1) holds it and runs us: the nested take must not wait
    r = subprocess.run(["flock", str(lock), sys.executable, "-c", inner, str(ROOT), str(lock)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stdout.strip() == "in", r.stdout + r.stderr
    # an unrelated holder for 1.5 s: this process waits for it
    holder = subprocess.Popen(["flock", str(lock), "sleep", "1.5"])
    try:
        time.sleep(0.3)  # it has the lock
        said: list[str] = []
        t0 = time.monotonic()
        with emulation_lock(lock, say=said.append):
            waited = time.monotonic() - t0
        assert waited >= 0.8 and said and str(holder.pid) in said[0], (waited, said)
    finally:
        holder.wait(10)
