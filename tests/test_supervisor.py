"""The live runs' supervisor on plain processes (no network, no root): a death is an
incident once, a restartable child is started again and its outage measured, and the
exit code says how the run went."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_until

import fogsdn.live.cleanup
from fogsdn.live.supervisor import MAX_RESTARTS, Restart, Supervisor, exit_code


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@pytest.fixture
def sup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Supervisor]:
    monkeypatch.setattr(fogsdn.live.cleanup, "RUNS_DIR", tmp_path / "runs")
    s = Supervisor("fztest", tmp_path / "out", threading.Event())
    yield s
    s.close()  # stops whatever the record still names


def test_a_death_is_one_incident_and_the_run_exits_3(sup: Supervisor,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    p = _sleeper()
    sup.watch("worker fn", p, "its requests are lost", cause=lambda: "out of memory")
    assert sup.record.pids["worker fn"][0] == p.pid
    sup.check()
    assert sup.incidents == [] and exit_code(sup.summary_fields()) == 0
    p.send_signal(signal.SIGKILL)
    p.wait()
    sup.check()
    sup.check()  # seen once, said once
    [inc] = sup.incidents
    assert inc["process"] == "worker fn" and inc["pid"] == p.pid
    assert inc["exit"] == "killed by SIGKILL" and inc["cause"] == "out of memory"
    assert inc["action"] == "its requests are lost"
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if "CRASH" in ln]
    assert line.startswith(f"[run] CRASH: worker fn (pid {p.pid}) killed by SIGKILL")
    fields = sup.summary_fields()
    assert set(fields) == {"run", "interrupted", "crashed", "incidents", "failure"}
    assert fields["crashed"] is True and exit_code(fields) == 3


def test_a_normal_end_and_a_released_child_are_no_incident(sup: Supervisor) -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    sup.watch("client c1", done, "its trace ends here", exit_zero_ends=True)
    stopped = _sleeper()
    sup.watch("daemon fog1", stopped, "its clients' tasks are lost")
    done.wait()
    sup.release("daemon fog1")
    stopped.terminate()
    stopped.wait()
    sup.check()
    assert sup.incidents == []


def test_deaths_while_the_run_stops_are_its_own_doing(sup: Supervisor) -> None:
    p = _sleeper()
    sup.watch("worker fn", p, "lost")
    sup.stop.set()  # Ctrl-C: the run ends, and stops its children
    p.terminate()
    p.wait()
    sup.check()
    sup.interrupted = True
    assert sup.incidents == [] and exit_code(sup.summary_fields()) == 130
    assert exit_code({"crashed": True, "interrupted": True}) == 3  # a crash says more


def test_a_restartable_child_is_restarted_until_it_keeps_crashing(
        sup: Supervisor, capsys: pytest.CaptureFixture[str]) -> None:
    ready = threading.Event()
    sup.watch("controller", _sleeper(), "restarting it",
              restart=Restart(_sleeper, ready.is_set, "rules re-installed"))
    for k in range(MAX_RESTARTS):
        old = sup.process("controller")
        assert old is not None
        old.kill()
        old.wait()
        sup.check()
        new = sup.process("controller")
        assert new is not None and new.pid != old.pid and new.poll() is None
        assert sup.record.pids["controller"][0] == new.pid  # the new one is recorded
        assert "outage_ms" not in sup.incidents[-1]
        ready.set()
        sup.check()
        assert sup.incidents[-1]["outage_ms"] >= 0 and len(sup.incidents) == k + 1
        ready.clear()
    assert "controller back after" in capsys.readouterr().err
    assert not sup.stop.is_set()
    last = sup.process("controller")
    assert last is not None
    last.kill()
    last.wait()
    sup.check()
    assert sup.process("controller") is last  # not again
    assert "not restarted again" in sup.incidents[-1]["action"]
    assert sup.failure == "the controller kept crashing" and sup.stop.is_set()


def test_the_watch_thread_says_a_death_at_once(sup: Supervisor) -> None:
    p = _sleeper()
    sup.watch("client c2", p, "its trace ends here", exit_zero_ends=True)
    sup.start_watching()
    p.kill()
    wait_until(lambda: bool(sup.incidents), "the supervisor to notice", timeout_s=5)
    assert sup.incidents[0]["exit"] == "killed by SIGKILL"


def test_a_scheduled_death_is_the_faults_not_a_crash(sup: Supervisor) -> None:
    """A kill the fault schedule announced is recorded in its fault; the run stays whole
    (exit 0), a child without a restart is no longer watched, and its next death, had it
    one, would be a crash again."""
    p = _sleeper()
    sup.watch("worker fn", p, "its requests are lost")
    record: dict[str, object] = {"kind": "kill_worker"}
    sup.expect_death("worker fn", record)
    p.send_signal(signal.SIGKILL)
    p.wait()
    sup.check()
    sup.check()
    assert sup.incidents == [] and exit_code(sup.summary_fields()) == 0
    assert record["exit"] == "killed by SIGKILL"
    assert sup.process("worker fn") is None  # released: the schedule may start it again
    again = _sleeper()
    sup.watch("worker fn", again, "its requests are lost")
    again.send_signal(signal.SIGKILL)
    again.wait()
    sup.check()
    assert [i["process"] for i in sup.incidents] == ["worker fn"]


def test_a_scheduled_death_of_a_restartable_child_is_restarted_and_timed(
        sup: Supervisor) -> None:
    first = _sleeper()
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(_sleeper())
        return started[-1]

    sup.watch("controller", first, "restarting it", restart=Restart(start, lambda: True))
    record: dict[str, object] = {"kind": "kill_controller"}
    sup.expect_death("controller", record)
    first.send_signal(signal.SIGKILL)
    first.wait()
    sup.check()  # restarts it
    sup.check()  # sees it back
    assert sup.incidents == [] and len(started) == 1
    assert sup.process("controller") is started[0]
    assert isinstance(record["outage_ms"], float) and record["exit"] == "killed by SIGKILL"
