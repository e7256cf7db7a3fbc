"""A live run's children, watched from start to end, and the exit code that says how the
run went: a death is an incident (exit 3), the controller is restarted, Ctrl-C or
SIGTERM keeps what was collected (exit 130). The rules: docs/reliability.md.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fogsdn.core.faults import FaultRecord
from fogsdn.core.summary import Incident, RunOutcome
from fogsdn.core.timebase import Timebase
from fogsdn.live.cleanup import RunRecord, clean_all, proc_start_time, remove_leftovers

MAX_RESTARTS = 3
WATCH_EVERY_S = 0.05
EXIT_CRASHED = 3
EXIT_INTERRUPTED = 130


def exit_description(returncode: int | None) -> str:
    """`killed by SIGKILL`, `exited with status 1`, or `still running`."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def exit_code(summary: Mapping[str, object]) -> int:
    """3 for a crashed run, 130 for an interrupted one, else 0."""
    if summary.get("crashed"):
        return EXIT_CRASHED
    return EXIT_INTERRUPTED if summary.get("interrupted") else 0


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_on_signals(stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM set `stop` (once said on stderr): the run ends as at its end,
    keeping what it collected. Call from the main thread."""
    def _stop(signum: int, frame: object) -> None:
        if not stop.is_set():
            print(f"\n[run] {signal.Signals(signum).name}: stopping, keeping what was collected",
                  file=sys.stderr, flush=True)
        stop.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


@dataclass
class Restart:
    """How a watched child is started again after it died: `start` gives the new process
    (recorded and watched under the same label); `back` says when it serves again; the
    time until then is the incident's `outage_ms`."""

    start: Callable[[], subprocess.Popen[Any]]
    back: Callable[[], bool]
    back_note: str = ""  # said with "back after N ms"


@dataclass
class _Watched:
    proc: subprocess.Popen[Any]
    action: str  # what the run does about its death, said in the incident
    exit_zero_ends: bool  # exit status 0 is its normal end, not a death
    cause: Callable[[], str | None] | None
    restart: Restart | None


class Supervisor:
    """The run's record, its watched children, and its incidents."""

    def __init__(self, tag: str, out_dir: Path, stop: threading.Event) -> None:
        self.tag = tag
        self.stop = stop
        self.record = RunRecord(tag, str(out_dir))
        self.incidents: list[Incident] = []
        self.failure: str | None = None  # an error that ended the run early
        self.interrupted = False
        self.epoch = math.nan  # monotonic instant of model time 0, once the load starts
        self.timebase = Timebase(1.0)  # the run's, once its load starts (`start_load`)
        self._watched: dict[str, _Watched] = {}
        self._down_since: dict[str, float] = {}  # label -> when its restart began
        self._back_record: dict[str, Incident | FaultRecord] = {}  # label -> what gets outage_ms
        # label -> the scheduled fault's record: its next death is that fault, not a crash
        self._expected: dict[str, FaultRecord] = {}
        self._lock = threading.RLock()
        self._quiet = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the record -------------------------------------------------------------------
    def claim(self) -> None:
        """Remove what dead runs left behind (saying so), then record this runner as
        the owner of this run."""
        leftovers = clean_all()
        if leftovers:
            print(f"[run] removed what dead runs left behind: {', '.join(leftovers)}",
                  file=sys.stderr, flush=True)
        start = proc_start_time(os.getpid())
        self.record.owner = (os.getpid(), start) if start is not None else None
        self.record.save()

    def track(self, label: str, pid: int) -> None:
        """Record a process for removal at the end, without watching it."""
        self.record.add_pid(label, pid)

    def watch(self, label: str, proc: subprocess.Popen[Any], action: str, *,
              exit_zero_ends: bool = False, cause: Callable[[], str | None] | None = None,
              restart: Restart | None = None) -> None:
        """Record `proc` and treat its death as an incident from now on."""
        self.track(label, proc.pid)
        with self._lock:
            self._watched[label] = _Watched(proc, action, exit_zero_ends, cause, restart)

    def release(self, label: str) -> None:
        """Stop watching a child the run is about to end itself."""
        with self._lock:
            self._watched.pop(label, None)

    def expect_death(self, label: str, record: FaultRecord) -> None:
        """The next death of `label` is a scheduled fault (fogsdn.core.faults): said in
        `record` (`exit`, and `outage_ms` once a restarted one serves), not an incident.
        Call before killing it."""
        with self._lock:
            self._expected[label] = record

    def process(self, label: str) -> subprocess.Popen[Any] | None:
        """The watched process under `label` now (a restarted one after a restart)."""
        with self._lock:
            w = self._watched.get(label)
        return None if w is None else w.proc

    # -- watching ---------------------------------------------------------------------
    def start_watching(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch_loop, name="supervisor",
                                            daemon=True)
            self._thread.start()

    def quiet(self) -> None:
        """The run is ending: children die from now on because it stops them."""
        self._quiet.set()

    def _watch_loop(self) -> None:
        # runs until close(), not quiet(): a child it restarted dies with it
        while not self._closed.wait(WATCH_EVERY_S):
            try:
                self.check()
            except Exception as err:  # a watcher that dies would hide every later death
                print(f"[run] supervisor: {err.__class__.__name__}: {err}", file=sys.stderr,
                      flush=True)

    def check(self) -> None:
        """One look at every watched child (the watch thread calls it)."""
        with self._lock:
            if self._quiet.is_set() or self.stop.is_set():
                return  # stopping: deaths are the run's own doing
            for label, w in list(self._watched.items()):
                rc = w.proc.poll()
                if rc is not None and label in self._expected:
                    self._scheduled_death(label, w)
                elif rc is not None and not (rc == 0 and w.exit_zero_ends) and not any(
                        i["pid"] == w.proc.pid for i in self.incidents):
                    self._died(label, w)
                if label in self._down_since and w.restart is not None and w.restart.back():
                    self._back(label, w.restart)

    def _scheduled_death(self, label: str, w: _Watched) -> None:
        """A death the fault schedule caused: recorded in its fault, restarted where the
        child has a restart, otherwise no longer watched (the schedule may start it)."""
        record = self._expected.pop(label)
        record["exit"] = exit_description(w.proc.returncode)
        record["t_died_model_ms"] = round(self.model_now(), 3)
        if w.restart is None:
            self._watched.pop(label, None)
            return
        self._restart(label, w, record)

    def _restart(self, label: str, w: _Watched, record: Incident | FaultRecord) -> None:
        assert w.restart is not None
        self._down_since[label] = time.monotonic()
        self._back_record[label] = record
        w.proc = w.restart.start()
        self.track(label, w.proc.pid)

    def _died(self, label: str, w: _Watched) -> None:
        cause = w.cause() if w.cause is not None else None
        if w.restart is None:
            self._incident(label, w.proc, w.action, cause)
            return
        restarts = sum(1 for i in self.incidents if i["process"] == label)
        if restarts >= MAX_RESTARTS:
            self._incident(label, w.proc, f"not restarted again (already {restarts} times); "
                           "the run stops", cause)
            self.failure = f"the {label} kept crashing"
            self.stop.set()
            return
        self._restart(label, w, self._incident(label, w.proc, w.action, cause))

    def _back(self, label: str, restart: Restart) -> None:
        outage = time.monotonic() - self._down_since.pop(label)
        last = self._back_record.pop(label)
        last["outage_ms"] = round(outage * 1000.0, 1)
        note = f" ({restart.back_note})" if restart.back_note else ""
        print(f"[run] {label} back after {outage * 1000.0:.0f} ms{note}", file=sys.stderr,
              flush=True)

    def model_now(self) -> float:
        """Model ms since the epoch (nan before the load started)."""
        if math.isnan(self.epoch):
            return math.nan
        return self.timebase.started(self.epoch).model_ms_at(time.monotonic())

    def _incident(self, label: str, p: subprocess.Popen[Any], action: str,
                  cause: str | None = None) -> Incident:
        how = exit_description(p.returncode)
        t = self.model_now()
        rec: Incident = {
            "process": label, "pid": p.pid, "exit": how, "t_model_ms": round(t, 3),
            "t_real_s": round(time.monotonic() - self.epoch, 3), "action": action}
        if cause is not None:
            rec["cause"] = cause
            how = f"{how}: {cause}"
        self.incidents.append(rec)
        print(f"\n[run] CRASH: {label} (pid {p.pid}) {how} at model t={t:.1f} ms; {action}",
              file=sys.stderr, flush=True)
        return rec

    # -- the end ----------------------------------------------------------------------
    @property
    def crashed(self) -> bool:
        return bool(self.incidents) or self.failure is not None

    def summary_fields(self) -> RunOutcome:
        """summary.json's keys about how the run went, the same for every live run."""
        return {"run": self.tag, "interrupted": self.interrupted, "crashed": self.crashed,
                "incidents": list(self.incidents), "failure": self.failure}

    def close(self) -> list[str]:
        """Stop watching, then remove whatever the record still names (after the run
        stopped its children: what is left is a leftover); returns what was removed."""
        self.quiet()
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return remove_leftovers(self.record)
