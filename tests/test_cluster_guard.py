"""The cluster guard's own rules, without a server: a bad tag is refused in one line,
`done` ends the watch, and only processes it was told of (and still the same ones) are
stopped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fogsdn.core.processes import proc_start_time
from fogsdn.netem.cluster_guard import READY, guard, main


@pytest.mark.parametrize("tag", ["", "A1", "x", "toolongtag9", "fz-1"])
def test_a_tag_that_could_match_others_is_refused(tag: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tag", tag]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tag" in err


def test_the_guard_stops_what_it_was_told_of(capsys: pytest.CaptureFixture[str]) -> None:
    told = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert proc_start_time(told.pid) is not None
        gone = guard("zq9unused", [f"pid {told.pid}\n", "pid notanumber\n", "done\n",
                                   f"pid {other.pid}\n"])
        assert READY in capsys.readouterr().out
        assert gone == [f"pid {told.pid}"]
        assert told.wait(5) is not None
        assert other.poll() is None  # after `done`: not the guard's
    finally:
        for p in (told, other):
            p.kill()
            p.wait()


def test_the_guard_removes_the_runs_folder_and_nothing_named_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "zq9unus"
    (run_dir / "sub").mkdir(parents=True)
    (run_dir / "sub" / "a.sock").write_text("")
    gone = guard("zq9unus", ["done\n"], remove_dirs=[str(run_dir)])
    assert gone == [str(run_dir)] and not run_dir.exists()
    # a folder not named with the run's tag is refused before the guard starts
    other = tmp_path / "someone-else"
    other.mkdir()
    assert main(["--tag", "zq9unus", "--remove-dir", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--remove-dir" in err and other.exists()
    assert main(["--tag", "zq9unus", "--remove-dir", "zq9unus"]) == 2  # not absolute
